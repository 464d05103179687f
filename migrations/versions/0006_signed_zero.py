"""signed zero: metric value columns without REAL affinity on SQLite

Revision ID: 0006_signed_zero
Revises: 0005_schedule_names
Create Date: 2026-12-01 06:00:00.000000

SQLite stores a float with no fractional part in a REAL column as an integer, so -0.0 came
back as +0.0 (PostgreSQL kept the sign). The metric value columns become ``BLOB``-declared
(no type affinity: the 8-byte double is stored as given; see
``tracker.store.models.SignedDouble``). SQLite only: each table is rebuilt (copy, drop,
rename; a few seconds per million points); values already stored keep their value (a -0.0
stored before this revision had already lost its sign). PostgreSQL: nothing to do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tracker.store.models import SignedDouble

revision: str = "0006_signed_zero"
down_revision: str | None = "0005_schedule_names"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# table -> (value columns, WITHOUT ROWID)
_TABLES = {
    "metric_points": (("value",), True),
    "metric_summaries": (("last_value",), False),
    "metric_rollups": (("min_value", "max_value", "last_value"), True),
}


def _retype(new: sa.types.TypeEngine[float], old: sa.types.TypeEngine[float]) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table, (columns, without_rowid) in _TABLES.items():
        kwargs = {"sqlite_with_rowid": False} if without_rowid else {}
        with op.batch_alter_table(table, recreate="always", table_kwargs=kwargs) as batch:
            for column in columns:
                batch.alter_column(column, type_=new, existing_type=old, existing_nullable=True)


def upgrade() -> None:
    _retype(SignedDouble(precision=53), sa.Float(precision=53))


def downgrade() -> None:
    _retype(sa.Float(precision=53), SignedDouble(precision=53))
