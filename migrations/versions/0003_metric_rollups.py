"""metric rollups: pre-aggregated chart levels of every metric series

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 10:00:00.000000

Creates ``metric_rollups`` and fills it from the points already stored, so series logged
before this revision chart as fast as new ones. The level widths are written out here (not
imported) so this revision keeps meaning what it meant when it was written.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LEVELS = (256, 8192, 262144)
_COLUMNS = (
    "run_id, key_id, width, bucket, first_step, last_step, last_wall_ms, min_value, "
    "max_value, last_value, count, nan_count, posinf_count, neginf_count"
)


def upgrade() -> None:
    op.create_table(
        "metric_rollups",
        sa.Column("run_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("key_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("width", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("bucket", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("first_step", sa.BigInteger(), nullable=False),
        sa.Column("last_step", sa.BigInteger(), nullable=False),
        sa.Column("last_wall_ms", sa.BigInteger(), nullable=False),
        sa.Column("min_value", sa.Float(precision=53), nullable=True),
        sa.Column("max_value", sa.Float(precision=53), nullable=True),
        sa.Column("last_value", sa.Float(precision=53), nullable=True),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("nan_count", sa.BigInteger(), nullable=False),
        sa.Column("posinf_count", sa.BigInteger(), nullable=False),
        sa.Column("neginf_count", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "run_id", "key_id", "width", "bucket", name=op.f("pk_metric_rollups")
        ),
        sqlite_with_rowid=False,
    )
    _backfill()


def _backfill() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        pinf, ninf = "'Infinity'::float8", "'-Infinity'::float8"
    else:
        pinf, ninf = "9e999", "-9e999"
    w = LEVELS[0]
    op.execute(
        f"INSERT INTO metric_rollups ({_COLUMNS}) "
        f"SELECT g.run_id, g.key_id, {w}, g.b, g.first_step, g.last_step, q.wall_ms, "
        "g.min_value, g.max_value, q.value, g.n, g.nan_n, g.pinf_n, g.ninf_n FROM ("
        f"SELECT run_id, key_id, step / {w} AS b, min(step) AS first_step, "
        "max(step) AS last_step, "
        f"min(CASE WHEN value > {ninf} AND value < {pinf} THEN value END) AS min_value, "
        f"max(CASE WHEN value > {ninf} AND value < {pinf} THEN value END) AS max_value, "
        "count(*) AS n, sum(CASE WHEN value IS NULL THEN 1 ELSE 0 END) AS nan_n, "
        f"sum(CASE WHEN value = {pinf} THEN 1 ELSE 0 END) AS pinf_n, "
        f"sum(CASE WHEN value = {ninf} THEN 1 ELSE 0 END) AS ninf_n "
        f"FROM metric_points GROUP BY run_id, key_id, step / {w}) g "
        "JOIN metric_points q ON q.run_id = g.run_id AND q.key_id = g.key_id "
        "AND q.step = g.last_step"
    )
    for src, width in itertools.pairwise(LEVELS):
        r = width // src
        op.execute(
            f"INSERT INTO metric_rollups ({_COLUMNS}) "
            f"SELECT g.run_id, g.key_id, {width}, g.b, g.first_step, g.last_step, "
            "q.last_wall_ms, g.min_value, g.max_value, q.last_value, g.n, g.nan_n, g.pinf_n, "
            f"g.ninf_n FROM (SELECT run_id, key_id, bucket / {r} AS b, max(bucket) AS src, "
            "min(first_step) AS first_step, max(last_step) AS last_step, "
            "min(min_value) AS min_value, max(max_value) AS max_value, sum(count) AS n, "
            "sum(nan_count) AS nan_n, sum(posinf_count) AS pinf_n, "
            "sum(neginf_count) AS ninf_n "
            f"FROM metric_rollups WHERE width = {src} GROUP BY run_id, key_id, bucket / {r}) g "
            "JOIN metric_rollups q ON q.run_id = g.run_id AND q.key_id = g.key_id "
            f"AND q.width = {src} AND q.bucket = g.src"
        )


def downgrade() -> None:
    op.drop_table("metric_rollups")
