"""metric rollups: a level 1024 steps wide, between 256 and 8192 (issue 30)

Revision ID: 0026_rollup_level_1024
Revises: 0025_metric_chunks
Create Date: 2026-12-06 02:00:00.000000

A chart of 500 buckets over a million steps (2,000 steps a bucket) could read no level
coarser than 256 (8192 is wider than its buckets): 3,900 rows a run, 1.1 s for an overlay
of 100 such runs. The 1024 level gives it a quarter of the rows. Filled here from the
256 level by the rollups' own rule (min of mins, max of maxes, sums of counts, the last
row's last value); the 8192 level is left as stored (the tracker computes it from this
level from now on: the same numbers). The widths are written out here, not imported, so
this revision keeps meaning what it meant when it was written.

The downgrade deletes the level's rows; nothing else reads them.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0026_rollup_level_1024"
down_revision: str | None = "0025_metric_chunks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SOURCE, WIDTH = 256, 1024
_COLUMNS = (
    "run_id, key_id, width, bucket, first_step, last_step, last_wall_ms, min_value, "
    "max_value, last_value, count, nan_count, posinf_count, neginf_count"
)


def upgrade() -> None:
    ratio = WIDTH // SOURCE
    op.execute(
        f"INSERT INTO metric_rollups ({_COLUMNS}) "
        f"SELECT g.run_id, g.key_id, {WIDTH}, g.b, g.first_step, g.last_step, "
        "q.last_wall_ms, g.min_value, g.max_value, q.last_value, g.n, g.nan_n, g.pinf_n, "
        f"g.ninf_n FROM (SELECT run_id, key_id, bucket / {ratio} AS b, max(bucket) AS src, "
        "min(first_step) AS first_step, max(last_step) AS last_step, "
        "min(min_value) AS min_value, max(max_value) AS max_value, sum(count) AS n, "
        "sum(nan_count) AS nan_n, sum(posinf_count) AS pinf_n, sum(neginf_count) AS ninf_n "
        f"FROM metric_rollups WHERE width = {SOURCE} "
        f"GROUP BY run_id, key_id, bucket / {ratio}) g "
        "JOIN metric_rollups q ON q.run_id = g.run_id AND q.key_id = g.key_id "
        f"AND q.width = {SOURCE} AND q.bucket = g.src"
    )


def downgrade() -> None:
    op.execute(f"DELETE FROM metric_rollups WHERE width = {WIDTH}")
