"""run logs: the console output of runs started by hand (teed by the client)

Revision ID: 0007_run_logs
Revises: 0006_signed_zero
Create Date: 2026-12-01 06:00:00.000000

A job's output lives in ``job_log_chunks`` (the worker stores it). A script run by hand has no
job, so the client tees its stdout/stderr into ``run_log_chunks``: the same chunk shape, keyed
by run, trimmed oldest-first past a per-run budget like a job's output.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_run_logs"
down_revision: str | None = "0006_signed_zero"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_log_chunks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("stream", sa.String(length=8), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_log_chunks_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_log_chunks")),
    )
    with op.batch_alter_table("run_log_chunks", schema=None) as batch_op:
        batch_op.create_index("ix_run_log_chunks_run_id_id", ["run_id", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("run_log_chunks", schema=None) as batch_op:
        batch_op.drop_index("ix_run_log_chunks_run_id_id")
    op.drop_table("run_log_chunks")
