"""tokens.run_id, job_id, attempt: a job's own token, bound to its run and attempt

Revision ID: 0019_job_tokens
Revises: 0018_code_snapshots
Create Date: 2026-12-05 02:10:00.000000

A job that logs over HTTP (a worker or dispatcher started with ``--job-uri http://...``)
gets a token of its own instead of its starter's credentials: ``log`` scope, valid for its
run's URLs only, and only while that attempt of the job is running (``jobs.status`` running
and ``jobs.attempt`` equal). Tokens created by people have NULL in the three columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_job_tokens"
down_revision: str | None = "0018_code_snapshots"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("run_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("job_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("attempt", sa.Integer(), nullable=True))
        batch_op.create_index("ix_tokens_job_id", ["job_id"], unique=False)


def downgrade() -> None:
    # a job's token would become an unbounded log token: revoke them first
    op.execute(
        "UPDATE tokens SET revoked_at = created_at WHERE job_id IS NOT NULL AND revoked_at IS NULL"
    )
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_index("ix_tokens_job_id")
        batch_op.drop_column("attempt")
        batch_op.drop_column("job_id")
        batch_op.drop_column("run_id")
