"""jobs.fail_on: which of the doctor's diagnoses fail a job that exited 0 (``--fail-on``)

Revision ID: 0016_job_fail_on
Revises: 0015_attempt_external_id
Create Date: 2026-12-05 10:00:00.000000

Before this revision only a persistent non-finite loss failed a job that exited 0; a run
that diverged to 1e25, leaked memory or skipped every AMP step ended ``succeeded``. Each job
now keeps its policy (``tracker.rules.fail_on``: ``errors``, ``none`` or a comma list of
diagnosis kinds). Jobs stored before this revision get the default, ``errors``: every
error-severity diagnosis fails them, a non-finite loss among them as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_job_fail_on"
down_revision: str | None = "0015_attempt_external_id"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("fail_on", sa.String(length=200), nullable=False, server_default="errors")
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("fail_on")
