"""jobs.parent_job_id indexed: a job's page lists the jobs cloned from it

Revision ID: 0023_jobs_parent_index
Revises: 0022_profiles
Create Date: 2026-12-05 10:00:00.000000

The job page (``tracker.store.job_detail``) reads the clones of a job by ``parent_job_id``;
without an index that is a scan of every job ever queued. An index only: nothing is
rewritten, and the downgrade drops it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0023_jobs_parent_index"
down_revision: str | None = "0022_profiles"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_parent_job_id"), ["parent_job_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_parent_job_id"))
