"""job_attempts.external_id: the cluster scheduler's id of an attempt (Slurm's job id)

Revision ID: 0015_attempt_external_id
Revises: 0014_worker_executor
Create Date: 2026-12-04 13:45:00.000000

A job handed to Slurm by ``tracker dispatcher`` runs as a Slurm job whose id users need
(``squeue -j``, ``sacct -j``, the cluster's own logs); it was found only by its name
(``tracker-<job id>``). The dispatcher stores it on the attempt when ``sbatch`` answers (and
when it adopts the job); ``tracker jobs show``, the JSON API and the job page show it. Local
attempts and rows stored before this revision have none.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_attempt_external_id"
down_revision: str | None = "0014_worker_executor"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("job_attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("external_id", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_attempts", schema=None) as batch_op:
        batch_op.drop_column("external_id")
