"""jobs.project_root: the project root on the host that submitted the job

Revision ID: 0009_job_project_root
Revises: 0008_diagnoses
Create Date: 2026-12-01 07:00:00.000000

Jobs record their directory relative to a project root so that a worker on another host
runs them in its own copy (``tracker worker --project-root``). The submitting host's root
is kept too: a worker started without ``--project-root`` on that host (in any directory)
still finds the job's directory there. NULL for jobs stored before this revision, whose
directories are absolute.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_job_project_root"
down_revision: str | None = "0008_diagnoses"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("project_root", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("project_root")
