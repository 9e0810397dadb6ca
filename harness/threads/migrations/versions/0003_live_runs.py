"""Live runs (LIVE §2.9, §3.4, §4.7, §5.6): run event logs, thread change sequence, and the columns of
background runs, busy strategies and dispatch intents, in one migration.

Additive: every new column has a default that existing rows take, so a `0002` database upgrades in place
and replicas migrate it once (the advisory lock, or SQLite's write lock, `migrations/env.py`).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_logs",
        sa.Column("namespace", sa.String(64), primary_key=True),
        sa.Column("thread_id", sa.String(256), primary_key=True),
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("request_id", sa.String(256), nullable=False),
        sa.Column("incarnation", sa.String(32), nullable=False),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("last_sequence", sa.BigInteger, nullable=False),
        sa.Column("result_sequence", sa.BigInteger),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("create_time", sa.Float, nullable=False),
        sa.Column("end_time", sa.Float),
    )
    op.create_index("run_logs_by_end", "run_logs", ["status", "end_time"])
    op.create_index("run_logs_by_create", "run_logs", ["status", "create_time"])
    op.create_table(
        "run_events",
        sa.Column("namespace", sa.String(64), primary_key=True),
        sa.Column("thread_id", sa.String(256), primary_key=True),
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("first_sequence", sa.BigInteger, primary_key=True),
        sa.Column("last_sequence", sa.BigInteger, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "dispatch_intents",
        sa.Column("namespace", sa.String(64), primary_key=True),
        sa.Column("thread_id", sa.String(256), primary_key=True),
        sa.Column("call_id", sa.String(256), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("tool_name", sa.String(256), nullable=False),
        sa.Column("retryable", sa.Boolean, nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("create_time", sa.Float, nullable=False),
        sa.Column("dispatch_time", sa.Float),
    )
    op.create_index("dispatch_intents_by_state", "dispatch_intents", ["namespace", "thread_id", "state"])
    with op.batch_alter_table("threads") as table:
        table.add_column(sa.Column("change_seq", sa.BigInteger, nullable=False, server_default="0"))
        table.add_column(sa.Column("sweep_after", sa.Float))
        table.add_column(sa.Column("queue_length", sa.Integer, nullable=False, server_default="0"))
        table.add_column(sa.Column("queue_next", sa.BigInteger, nullable=False, server_default="0"))
        table.add_column(sa.Column("intents_fence", sa.String(32)))
        table.add_column(sa.Column("answered_request_id", sa.String(256)))
        table.add_column(sa.Column("answered_revision", sa.Integer))
        table.add_column(sa.Column("answered_how", sa.String(16)))
    op.create_index("threads_by_sweep", "threads", ["namespace", "sweep_after"])
    with op.batch_alter_table("runs") as table:
        table.add_column(sa.Column("detached", sa.Boolean, nullable=False, server_default=sa.false()))
        table.add_column(sa.Column("spec", sa.Text))
        table.add_column(sa.Column("begin_revision", sa.Integer))
        table.add_column(sa.Column("queue_seq", sa.BigInteger))
        table.add_column(sa.Column("queue_kind", sa.String(16)))
        table.add_column(sa.Column("rollback_of", sa.String(256)))
        table.add_column(sa.Column("rolled_back", sa.Boolean, nullable=False, server_default=sa.false()))
        table.add_column(sa.Column("digest_parts", sa.Text))
    op.create_index("runs_by_queue", "runs", ["namespace", "thread_id", "queue_seq"])
