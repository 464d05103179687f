"""metric seq: several values of one metric at one step, in the order they were logged

Revision ID: 0012_metric_seq
Revises: 0013_logged_models
Create Date: 2026-12-02 01:20:00.000000

MLflow keeps every value logged at a step (``log_metric(key, v)`` without a step logs them
all at step 0). ``metric_points`` gets a ``seq`` column in its primary key
``(run_id, key_id, step, seq)``: 0 for the tracker's own writes and for every point stored
before this revision, the next number for each further value the MLflow route stores at
the same step. SQLite: the table is rebuilt (copy, drop, rename; WITHOUT ROWID kept);
PostgreSQL: the column is added with its default and the primary key replaced in place.
Downgrading keeps only the highest seq of each step (the value the runs table showed).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_metric_seq"
down_revision: str | None = "0013_logged_models"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PK = "pk_metric_points"


def upgrade() -> None:
    column = sa.Column("seq", sa.Integer(), server_default=sa.text("0"), nullable=False)
    if op.get_bind().dialect.name == "sqlite":
        kwargs = {"sqlite_with_rowid": False}
        with op.batch_alter_table("metric_points", recreate="always", table_kwargs=kwargs) as b:
            b.add_column(column)
            b.drop_constraint(_PK, type_="primary")
            b.create_primary_key(_PK, ["run_id", "key_id", "step", "seq"])
        return
    op.add_column("metric_points", column)
    op.drop_constraint(_PK, "metric_points", type_="primary")
    op.create_primary_key(_PK, "metric_points", ["run_id", "key_id", "step", "seq"])


def downgrade() -> None:
    op.execute(
        "DELETE FROM metric_points WHERE seq < (SELECT max(q.seq) FROM metric_points q "
        "WHERE q.run_id = metric_points.run_id AND q.key_id = metric_points.key_id "
        "AND q.step = metric_points.step)"
    )
    if op.get_bind().dialect.name == "sqlite":
        kwargs = {"sqlite_with_rowid": False}
        with op.batch_alter_table("metric_points", recreate="always", table_kwargs=kwargs) as b:
            b.drop_constraint(_PK, type_="primary")
            b.create_primary_key(_PK, ["run_id", "key_id", "step"])
            b.drop_column("seq")
        return
    op.drop_constraint(_PK, "metric_points", type_="primary")
    op.create_primary_key(_PK, "metric_points", ["run_id", "key_id", "step"])
    op.drop_column("metric_points", "seq")
