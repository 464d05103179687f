"""logged_models: MLflow logged models (``mlflow.<flavor>.log_model``)

Revision ID: 0013_logged_models
Revises: 0011_soft_delete
Create Date: 2026-12-02 00:45:00.000000

One row per model: its name, type, status (PENDING, READY, UPLOAD_FAILED), tags and params.
Its files are artifacts of its source run (under ``mlflow-models/<id>/``), so they share the
run's blob root, cascade and garbage collection; a model is deleted with its run.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0013_logged_models"
down_revision: str | None = "0011_soft_delete"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "logged_models",
        sa.Column("id", sa.String(length=34), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=250), nullable=False),
        sa.Column("model_type", sa.String(length=250), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=True),
        sa.Column("tags", _JSON, nullable=False),
        sa.Column("params", _JSON, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name="fk_logged_models_project_id_projects"
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_logged_models_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_logged_models"),
    )
    op.create_index("ix_logged_models_project_id", "logged_models", ["project_id"])
    op.create_index("ix_logged_models_run_id", "logged_models", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_logged_models_run_id", table_name="logged_models")
    op.drop_index("ix_logged_models_project_id", table_name="logged_models")
    op.drop_table("logged_models")
