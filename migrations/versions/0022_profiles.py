"""profiles: requests to profile a running run's next steps, their traces and summaries

Revision ID: 0022_profiles
Revises: 0021_saved_views
Create Date: 2026-12-05 09:10:00.000000

One row per request ("Profile N steps" on a running run's page, ``tracker profile RUN``):
``state`` goes requested -> running -> stored | failed; at most one open (requested or
running) per run, checked by ``tracker.store.profiles``. ``traces`` lists each rank's trace
artifact; ``summary`` is computed from rank 0's trace when first read. Dropped with its run.
A new table: the downgrade drops it (the trace artifacts stay with their runs).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0022_profiles"
down_revision: str | None = "0021_saved_views"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("ranks", sa.String(length=8), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("requested_at", sa.Double(), nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=True),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("ended_at", sa.Double(), nullable=True),
        sa.Column("first_step", sa.BigInteger(), nullable=True),
        sa.Column("last_step", sa.BigInteger(), nullable=True),
        sa.Column("expected", sa.Integer(), nullable=True),
        sa.Column("traces", _JSON, nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("summary", _JSON, nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_profiles_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_profiles")),
    )
    with op.batch_alter_table("profiles", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_profiles_run_id"), ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("profiles", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_profiles_run_id"))
    op.drop_table("profiles")
