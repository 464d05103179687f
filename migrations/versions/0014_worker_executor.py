"""workers.executor: what runs a worker's jobs (``local``, or a cluster scheduler)

Revision ID: 0014_worker_executor
Revises: 0012_metric_seq
Create Date: 2026-12-02 13:10:00.000000

``tracker worker`` runs its jobs itself (``local``); ``tracker dispatcher --executor slurm``
registers too, as ``slurm``, so ``tracker workers ls`` and the Queue page list it and a queued
job is not told "no live worker" while a dispatcher takes jobs for the cluster. Rows stored
before this revision were local workers.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_worker_executor"
down_revision: str | None = "0012_metric_seq"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("executor", sa.String(length=32), nullable=False, server_default="local")
        )


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("executor")
