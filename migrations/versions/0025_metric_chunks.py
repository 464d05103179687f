"""metric_chunks: sealed, packed points of a metric series (issue 30)

Revision ID: 0025_metric_chunks
Revises: 0024_sweeps
Create Date: 2026-12-05 16:30:00.000000

One row per chunk of one (run, key): the chunk's bytes (docs/CHUNK_FORMAT.md) and its
header, keyed by its first step. A new, empty table: the points already stored stay in
``metric_points`` (the head), which every read merges with the chunks
(``tracker.store.chunks``); ``tracker ui`` and the workers seal ended runs, ``tracker db
seal`` a whole store's backlog (resumable, with progress). On PostgreSQL the chunk bytes
are stored out of line without TOAST's compression (``STORAGE EXTERNAL``): they are
compressed already.

The downgrade drops the table, so it refuses while any chunk is stored: run ``tracker db
unseal`` first (every chunk back to rows).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tracker.store.models import SignedDouble

revision: str = "0025_metric_chunks"
down_revision: str | None = "0024_sweeps"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "metric_chunks",
        sa.Column("run_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("key_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("first_step", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("last_step", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("min_value", SignedDouble(precision=53), nullable=True),
        sa.Column("max_value", SignedDouble(precision=53), nullable=True),
        sa.Column("last_value", SignedDouble(precision=53), nullable=True),
        sa.Column("last_wall_ms", sa.BigInteger(), nullable=False),
        sa.Column("nan_count", sa.BigInteger(), nullable=False),
        sa.Column("posinf_count", sa.BigInteger(), nullable=False),
        sa.Column("neginf_count", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "key_id", "first_step", name=op.f("pk_metric_chunks")),
        sqlite_with_rowid=False,
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE metric_chunks ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    stored = op.get_bind().execute(sa.text("SELECT count(*) FROM metric_chunks")).scalar()
    if stored:
        raise RuntimeError(
            f"metric_chunks holds {stored} sealed chunks: dropping the table would lose their "
            "points; run `tracker db unseal` first, then downgrade again"
        )
    op.drop_table("metric_chunks")
