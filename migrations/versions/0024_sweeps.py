"""sweeps and sweep_trials: sweeps that learn (Bayesian search, early stopping)

Revision ID: 0024_sweeps
Revises: 0023_jobs_parent_index
Create Date: 2026-12-05 12:40:00.000000

``sweeps`` holds a sweep's search (the ``-c`` override texts), its budget (trials, parallel),
its sampler and pruner and the job spec every trial shares; ``sweep_trials`` one row per
trial, keyed by (sweep, number): the controller (``tracker.store.sweeps``) inserts a trial
and its job in one transaction, so a trial is queued exactly once. New tables only: the
downgrade drops them (the trials' jobs and runs stay).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0024_sweeps"
down_revision: str | None = "0023_jobs_parent_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("project", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("method", sa.String(length=16), nullable=False),
        sa.Column("metric", sa.String(length=250), nullable=False),
        sa.Column("goal", sa.String(length=8), nullable=False),
        sa.Column("objective", sa.String(length=8), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("parallel", sa.Integer(), nullable=False),
        sa.Column("prune", sa.String(length=16), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("space", _JSON, nullable=False),
        sa.Column("spec", _JSON, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("ended_at", sa.Double(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sweeps")),
    )
    with op.batch_alter_table("sweeps", schema=None) as batch_op:
        batch_op.create_index("ix_sweeps_status", ["status"], unique=False)
    op.create_table(
        "sweep_trials",
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("params", _JSON, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("pruned_step", sa.BigInteger(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("system_attrs", _JSON, nullable=False),
        sa.Column("intermediate", _JSON, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("ended_at", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_sweep_trials_job_id_jobs"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["sweep_id"],
            ["sweeps.id"],
            name=op.f("fk_sweep_trials_sweep_id_sweeps"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("sweep_id", "number", name=op.f("pk_sweep_trials")),
    )
    with op.batch_alter_table("sweep_trials", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sweep_trials_job_id"), ["job_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("sweep_trials", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sweep_trials_job_id"))
    op.drop_table("sweep_trials")
    with op.batch_alter_table("sweeps", schema=None) as batch_op:
        batch_op.drop_index("ix_sweeps_status")
    op.drop_table("sweeps")
