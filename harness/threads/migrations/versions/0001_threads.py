"""The thread store: threads, labels, blobs, checkpoints, run records (THREADS §2).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "threads",
        sa.Column("namespace", sa.String(64), primary_key=True),
        sa.Column("thread_id", sa.String(256), primary_key=True),
        sa.Column("incarnation", sa.String(32), nullable=False),
        sa.Column("agent", sa.String(256), nullable=False),
        sa.Column("labels", sa.Text, nullable=False),
        sa.Column("create_time", sa.Float, nullable=False),
        sa.Column("update_time", sa.Float, nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("pending", sa.Text),
        sa.Column("accepted", sa.Text),
        sa.Column("fence", sa.String(32), nullable=False),
        sa.Column("lease_run_id", sa.String(64)),
        sa.Column("lease_request_id", sa.String(256)),
        sa.Column("lease_replica", sa.String(64)),
        sa.Column("lease_expires", sa.Float),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("last_request_id", sa.String(256)),
    )
    op.create_index("threads_by_update", "threads", ["namespace", "update_time", "thread_id"])
    op.create_table(
        "thread_labels",
        sa.Column("namespace", sa.String(64), primary_key=True),
        sa.Column("thread_id", sa.String(256), primary_key=True),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(1024), nullable=False),
    )
    op.create_index("labels_by_value", "thread_labels", ["namespace", "key", "value"])
    op.create_table(
        "blobs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("owner", sa.String(32), nullable=False),
        sa.Column("base_id", sa.Integer, sa.ForeignKey("blobs.id")),
        sa.Column("keep", sa.Integer, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("chain_bytes", sa.Integer, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
    )
    op.create_index("blobs_by_owner", "blobs", ["owner"])
    op.create_index("blobs_by_base", "blobs", ["base_id"])
    op.create_table(
        "checkpoints",
        sa.Column("namespace", sa.String(64), primary_key=True),
        sa.Column("thread_id", sa.String(256), primary_key=True),
        sa.Column("revision", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("request_id", sa.String(256), nullable=False),
        sa.Column("create_time", sa.Float, nullable=False),
        sa.Column("history_blob", sa.Integer, sa.ForeignKey("blobs.id"), nullable=False),
        sa.Column("rest_blob", sa.Integer, sa.ForeignKey("blobs.id"), nullable=False),
        sa.Column("history_at", sa.Integer, nullable=False),
        sa.Column("pending", sa.Text),
        sa.Column("remaining", sa.Text),
        sa.Column("client_tools", sa.Text, nullable=False),
    )
    op.create_index("checkpoints_by_history", "checkpoints", ["history_blob"])
    op.create_index("checkpoints_by_rest", "checkpoints", ["rest_blob"])
    op.create_table(
        "runs",
        sa.Column("namespace", sa.String(64), primary_key=True),
        sa.Column("thread_id", sa.String(256), primary_key=True),
        sa.Column("request_id", sa.String(256), primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("prompt", sa.Text),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("outcome", sa.Text),
        sa.Column("attempts", sa.Text, nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("committed_revision", sa.Integer, nullable=False),
        sa.Column("create_time", sa.Float, nullable=False),
        sa.Column("update_time", sa.Float, nullable=False),
    )
    op.create_index("runs_by_run_id", "runs", ["namespace", "thread_id", "run_id"])
