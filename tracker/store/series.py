"""Chart series reads: pick the cheapest source that answers at the requested resolution.

Sources, finest first: the points themselves, then the rollup levels of
``tracker.store.rollups`` (bucket widths 256, 8192, 262144 steps). For a window
``[lo, hi]`` and ``max_buckets``:

1. if the window holds at most ``max_buckets`` points, they come back as they are
   (full resolution, through ``tracker.rules.downsample.downsample``);
2. otherwise the finest source with at most ``ROW_BUDGET`` rows in the window is grouped
   by the database into ``max_buckets`` equal step ranges: the bucket of a row is
   ``tracker.rules.downsample.Grid.index`` computed in SQL (``_GRID_INDEX``) from the grid's
   own numbers, so the result is the rule's ``downsample`` (points) or ``merge_buckets``
   (rollup rows, kept whole and assigned by their first step) -- min and max of finite
   values, the last value, counts and NaN/±Inf counts; the last values come from a second
   lookup by primary key (of several values at one step, logged through MLflow, the one
   with the highest ``seq``). ``tests/core/test_series_rule.py`` holds the two equal.

Every read goes through the primary keys ``(run_id, key_id, step, seq)`` and
``(run_id, key_id, width, bucket)``, so only the requested range is touched. A 1,000,000
point series is answered from ~4,000 rollup rows instead of a million points.

Reads raise StoreUnavailable (503) when the database cannot be reached
(``tracker.store.engine.read_conn``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from tracker.errors import NotFound
from tracker.rules.downsample import (
    Bucket,
    DownsampleError,
    Grid,
    Series,
    check_bucket_count,
    downsample,
    level_buckets,
)
from tracker.store import models as m
from tracker.store.engine import read_conn
from tracker.store.rollups import LEVELS
from tracker.store.store import Store

__all__ = ["DEFAULT_BUCKETS", "MAX_BUCKETS", "ROW_BUDGET", "SeriesRead", "read_many", "read_series"]

DEFAULT_BUCKETS = 1000
MAX_BUCKETS = 1500
ROW_BUDGET = 60_000  # rows one request may group in SQL (~25 ms on SQLite)
_ESTIMATE_ROWS = 4096
MAX_SPAN = 2**52  # rollup rows read to estimate the points in a window

_P = m.MetricPointRow
_R = m.MetricRollupRow
# Grid.index in SQL: (step - lo) * count / span, in 64-bit integers (MAX_SPAN keeps the
# product in range); the parameters come from _grid_params.
_GRID_INDEX = "({step} - CAST(:lo AS BIGINT)) * CAST(:n AS BIGINT) / CAST(:span AS BIGINT)"


@dataclass(frozen=True)
class SeriesRead:
    """A downsampled series plus the wall time (ms) of each bucket's last point."""

    key: str
    series: Series
    wall_ms: list[int | None]
    source: str  # "points" or "rollup-<width>"


def _key_id(conn: sa.Connection, key: str) -> int:
    """Raises NotFound when no run ever logged ``key``."""
    found = conn.execute(sa.select(m.MetricKeyRow.id).where(m.MetricKeyRow.name == key)).scalar()
    if found is None:
        raise NotFound(f"no run has a metric named {key!r}", field="key")
    return found


def read_series(
    store: Store,
    run_id: int,
    key: str,
    *,
    lo: int | None = None,
    hi: int | None = None,
    max_buckets: int = DEFAULT_BUCKETS,
) -> SeriesRead:
    """The series of one metric of one run within ``[lo, hi]`` in at most ``max_buckets``.

    Raises:
        NotFound (404): no run has a metric named ``key``.
        DownsampleError (400): ``lo > hi`` or ``max_buckets < 1``.
        StoreUnavailable (503): the database cannot be reached.
    """
    with read_conn(store.engine) as conn:
        return _read_series(conn, run_id, key, lo=lo, hi=hi, max_buckets=max_buckets)


def read_many(
    store: Store,
    pairs: list[tuple[int, str]],
    *,
    lo: int | None = None,
    hi: int | None = None,
    max_buckets: int = DEFAULT_BUCKETS,
) -> list[SeriesRead]:
    """``read_series`` for several (run id, key) pairs on one connection (raises as it)."""
    with read_conn(store.engine) as conn:
        return [
            _read_series(conn, run_id, key, lo=lo, hi=hi, max_buckets=max_buckets)
            for run_id, key in pairs
        ]


def _read_series(
    conn: sa.Connection, run_id: int, key: str, *, lo: int | None, hi: int | None, max_buckets: int
) -> SeriesRead:
    check_bucket_count(max_buckets)
    kid = _key_id(conn, key)
    where = (_R.run_id == run_id, _R.key_id == kid)
    if lo is None or hi is None:
        first, last = conn.execute(
            sa.select(sa.func.min(_R.first_step), sa.func.max(_R.last_step)).where(
                *where, _R.width == LEVELS[-1]
            )
        ).one()
        if first is None:
            return SeriesRead(key, Series((), lo, hi), [], "points")
        lo = first if lo is None else lo
        hi = last if hi is None else hi
    grid = Grid.over(lo, hi, max_buckets)
    if hi - lo > MAX_SPAN:  # (step - lo) * max_buckets must fit in a 64-bit integer
        raise DownsampleError(f"lo/hi: the window is wider than {MAX_SPAN} steps", field="hi")
    estimate = _estimate_points(conn, where, lo, hi)
    if estimate <= max_buckets:
        return _full_resolution(conn, run_id, kid, key, grid)
    if estimate <= ROW_BUDGET:
        return _group_points(conn, run_id, kid, key, grid)
    width = next(
        (w for w in LEVELS if min(estimate, _level_rows(lo, hi, w)) <= ROW_BUDGET), LEVELS[-1]
    )
    return _group_level(conn, run_id, kid, key, grid, width)


def _level_rows(lo: int, hi: int, width: int) -> int:
    """The most rows a rollup level of ``width`` holds for the steps ``lo..hi``."""
    first, last = level_buckets(lo, hi, width)
    return last - first + 1


def _grid_params(grid: Grid) -> dict[str, int]:
    """The parameters of ``_GRID_INDEX`` and of the window filter."""
    return {"lo": grid.lo, "hi": grid.hi, "n": grid.count, "span": grid.span}


def _estimate_points(conn: sa.Connection, where: tuple[Any, ...], lo: int, hi: int) -> int:
    """An upper bound of the points in [lo, hi] (edge buckets count whole)."""
    width = next((w for w in LEVELS if _level_rows(lo, hi, w) <= _ESTIMATE_ROWS), LEVELS[-1])
    first, last = level_buckets(lo, hi, width)
    total = conn.execute(
        sa.select(sa.func.sum(_R.count)).where(
            *where,
            _R.width == width,
            _R.bucket >= first,
            _R.bucket <= last,
            _R.last_step >= lo,
            _R.first_step <= hi,
        )
    ).scalar()
    return int(total or 0)


def _full_resolution(
    conn: sa.Connection, run_id: int, kid: int, key: str, grid: Grid
) -> SeriesRead:
    rows = conn.execute(
        sa.select(_P.step, _P.wall_ms, _P.value)
        .where(_P.run_id == run_id, _P.key_id == kid, _P.step >= grid.lo, _P.step <= grid.hi)
        .order_by(_P.step, _P.seq)
    ).all()
    steps, values = [r[0] for r in rows], [r[2] for r in rows]
    series = downsample(steps, values, grid.count, grid.lo, grid.hi)
    wall = {r[0]: r[1] for r in rows}
    return SeriesRead(key, series, [wall.get(b.last_step) for b in series.buckets], "points")


def _dialect_inf(conn: sa.Connection) -> tuple[str, str]:
    if conn.dialect.name == "postgresql":
        return "'Infinity'::float8", "'-Infinity'::float8"
    return "9e999", "-9e999"


def _group_points(conn: sa.Connection, run_id: int, kid: int, key: str, grid: Grid) -> SeriesRead:
    pinf, ninf = _dialect_inf(conn)
    finite = f"CASE WHEN value > {ninf} AND value < {pinf} THEN value END"
    sql = sa.text(
        f"SELECT {_GRID_INDEX.format(step='step')}, "
        f"min(step), max(step), min({finite}), max({finite}), count(*), "
        "sum(CASE WHEN value IS NULL THEN 1 ELSE 0 END), "
        f"sum(CASE WHEN value = {pinf} THEN 1 ELSE 0 END), "
        f"sum(CASE WHEN value = {ninf} THEN 1 ELSE 0 END) "
        "FROM metric_points WHERE run_id = :run AND key_id = :key "
        "AND step >= :lo AND step <= :hi GROUP BY 1 ORDER BY 1"
    )
    groups = conn.execute(sql, {**_grid_params(grid), "run": run_id, "key": kid}).all()
    if sum(int(g[5]) for g in groups) <= grid.count:  # the estimate was loose: it fits
        return _full_resolution(conn, run_id, kid, key, grid)
    lasts = conn.execute(
        sa.select(_P.step, _P.wall_ms, _P.value)
        .where(_P.run_id == run_id, _P.key_id == kid, _P.step.in_([g[2] for g in groups]))
        .order_by(_P.step, _P.seq)
    )
    last = {step: (wall, value) for step, wall, value in lasts}  # the highest seq wins
    return _build(key, groups, last, grid, "points", lambda g: g[2])


def _group_level(
    conn: sa.Connection, run_id: int, kid: int, key: str, grid: Grid, width: int
) -> SeriesRead:
    # A row that starts before the window belongs to the first bucket, as in Grid.index.
    first_step = "CASE WHEN first_step > :lo THEN first_step ELSE CAST(:lo AS BIGINT) END"
    sql = sa.text(
        f"SELECT {_GRID_INDEX.format(step=first_step)}, "
        "min(first_step), max(last_step), min(min_value), max(max_value), sum(count), "
        "sum(nan_count), sum(posinf_count), sum(neginf_count), max(bucket) "
        "FROM metric_rollups WHERE run_id = :run AND key_id = :key AND width = :width "
        "AND bucket >= :blo AND bucket <= :bhi AND last_step >= :lo AND first_step <= :hi "
        "GROUP BY 1 ORDER BY 1"
    )
    blo, bhi = level_buckets(grid.lo, grid.hi, width)
    params = {**_grid_params(grid), "run": run_id, "key": kid, "width": width}
    groups = conn.execute(sql, {**params, "blo": blo, "bhi": bhi}).all()
    lasts = conn.execute(
        sa.select(_R.bucket, _R.last_wall_ms, _R.last_value).where(
            _R.run_id == run_id,
            _R.key_id == kid,
            _R.width == width,
            _R.bucket.in_([g[9] for g in groups]),
        )
    )
    last = {bucket: (wall, value) for bucket, wall, value in lasts}
    return _build(key, groups, last, grid, f"rollup-{width}", lambda g: g[9])


def _build(
    key: str,
    groups: Sequence[Any],
    last: dict[int, tuple[int, float]],
    grid: Grid,
    source: str,
    last_of: Any,
) -> SeriesRead:
    buckets = []
    walls: list[int | None] = []
    for g in groups:
        wall, value = last[last_of(g)]
        buckets.append(
            Bucket(
                first_step=int(g[1]),
                last_step=int(g[2]),
                min=None if g[3] is None else float(g[3]),
                max=None if g[4] is None else float(g[4]),
                last=math.nan if value is None else float(value),
                count=int(g[5]),
                nan_count=int(g[6]),
                posinf_count=int(g[7]),
                neginf_count=int(g[8]),
            )
        )
        walls.append(int(wall))
    return SeriesRead(key, Series(tuple(buckets), grid.lo, grid.hi), walls, source)
