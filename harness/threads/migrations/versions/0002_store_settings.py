"""The store's own settings: the key of its page tokens (THREADS §3 paging).

A random key made once per store, so every replica of one database accepts the page tokens of the others
(`harness.threads.pages`). Additive: replicas migrate one at a time (an advisory lock on PostgreSQL, the
write lock of `BEGIN IMMEDIATE` on SQLite), so the key is made exactly once.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    settings = op.create_table(
        "store_settings",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.bulk_insert(settings, [{"name": "page_token_key", "value": secrets.token_hex(32)}])
