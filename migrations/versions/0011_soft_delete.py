"""soft delete: runs and projects can be deleted (hidden) and restored; project tags; the
last write of a run that sends no heartbeats

Revision ID: 0011_soft_delete
Revises: 0010_artifacts
Create Date: 2026-12-02 00:40:00.000000

``deleted_at`` (NULL: active) marks a run or a project deleted without removing anything:
deleted runs are hidden from every listing unless asked for, can be restored, and
``tracker gc`` purges those deleted longer than a grace period (``tracker.store.purge``).
Deleting a project (an MLflow experiment) deletes its runs softly too.

``projects.tags``: a JSON object of the project's tags (MLflow experiment tags).

``runs.written_at``: when a run without heartbeats (one created through the MLflow API) was
last written to; the dashboard marks such a run stale when it stays silent too long
(``tracker ui --mlflow-idle-timeout``). NULL for every other run.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011_soft_delete"
down_revision: str | None = "0010_artifacts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("deleted_at", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("written_at", sa.Double(), nullable=True))
        batch_op.create_index("ix_runs_deleted_at", ["deleted_at"], unique=False)
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(sa.Column("deleted_at", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("tags", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_column("tags")
        batch_op.drop_column("deleted_at")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_deleted_at")
        batch_op.drop_column("written_at")
        batch_op.drop_column("deleted_at")
