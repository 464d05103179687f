"""saved_views, saved_view_events: named workspace views of the runs page, and their audit

Revision ID: 0021_saved_views
Revises: 0020_run_annotations
Create Date: 2026-12-05 04:30:00.000000

``saved_views``: one row per named view (unique per project; ``""`` is the view of all
projects); ``state`` is the workspace's layout and the table's query as JSON
(``tracker.store.views``). ``saved_view_events``: who created, updated or deleted a view,
and when; kept after the view is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0021_saved_views"
down_revision: str | None = "0020_run_annotations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "saved_views",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project", sa.String(length=250), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column(
            "state",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_saved_views")),
        sa.UniqueConstraint("project", "name", name=op.f("uq_saved_views_project_name")),
    )
    op.create_table(
        "saved_view_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("project", sa.String(length=250), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("by", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_saved_view_events")),
    )
    with op.batch_alter_table("saved_view_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_saved_view_events_at"), ["at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("saved_view_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_saved_view_events_at"))
    op.drop_table("saved_view_events")
    op.drop_table("saved_views")
