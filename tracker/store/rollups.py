"""Pre-aggregated levels of metric series (``metric_rollups``), kept current on ingest.

A chart of a 1,000,000-point series cannot be served by grouping a million rows per request
(about 0.4 s here), so every write also refreshes, for each touched (run, key), the buckets
of ``LEVELS`` that its steps fall in: level 0 (width 256) is recomputed from the points,
each coarser level from the level below (4 to 32 of its rows per bucket). Recomputing --
rather than adding the new points to the old totals -- keeps the rollups exact when a batch
is retried or a resumed run rewrites earlier steps with new values.

The bucket rule is ``tracker.rules.downsample``'s, in SQL: a row's bucket is ``level_bucket``
(``step / width``; on the next level, ``bucket / ratio``: the same number), the rows
refreshed are the ``level_steps``/``level_buckets`` of the dirty steps, and a row holds what
``tracker.rules.downsample.level`` gives for its points (``tests/core/test_series.py``,
``tests/core/test_series_rule.py``).

The dashboard reads the finest level that answers a request within its row budget.
Everything here runs inside the caller's transaction on a raw DBAPI cursor.

A big backlog (a tight loop of 10M points leaves the whole run dirty when the writer first
goes idle) is refreshed in chunks, not in one transaction: :func:`next_chunk` cuts off
the ranges worth about ``budget`` points, in step order per (run, key), and the caller
refreshes that chunk in a transaction of its own and keeps the rest for later. One
transaction over 10M points held the SQLite write lock for 86-109 s, so every other
writer (``finish_run``, the dashboard, other runs) failed with "database is locked".
Chunks in step order keep the result exact: a coarse bucket is recomputed by every
chunk that touches it, the last of them after all its dirty finer buckets, and a writer
that dies between chunks leaves a stored prefix, which ``points.repair_rollups`` extends.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from tracker.rules.downsample import level_buckets, level_steps

# Bucket widths in steps, finest first; each divides the next. 1024 came last (migration
# 0026): a 500-bucket chart of a million steps had only the 256 level to read.
LEVELS = (256, 1024, 8192, 262144)
PG_LOCK_CLASS = 7242002  # advisory lock namespace: one writer per run refreshes rollups
# (or seals its chunks: tracker.store.chunks)

Bounds = dict[tuple[int, int], tuple[int, int]]  # (run_id, key_id) -> (min step, max step)

_COLUMNS = (
    "run_id, key_id, width, bucket, first_step, last_step, last_wall_ms, min_value, "
    "max_value, last_value, count, nan_count, posinf_count, neginf_count"
)
_ON_CONFLICT = (
    "ON CONFLICT (run_id, key_id, width, bucket) DO UPDATE SET "
    "first_step = excluded.first_step, last_step = excluded.last_step, "
    "last_wall_ms = excluded.last_wall_ms, min_value = excluded.min_value, "
    "max_value = excluded.max_value, last_value = excluded.last_value, "
    "count = excluded.count, nan_count = excluded.nan_count, "
    "posinf_count = excluded.posinf_count, neginf_count = excluded.neginf_count"
)
# Level 0 from the points, grouped by level_bucket (step / width). NaN is stored as NULL;
# min/max are over finite values only; the last value is the one with the highest (step,
# seq) (MLflow keeps several per step): point_bucket and combine of the rule, in SQL.
_FROM_POINTS = (
    "INSERT INTO metric_rollups (" + _COLUMNS + ") "
    "SELECT g.run_id, g.key_id, {w}, g.b, g.first_step, g.last_step, q.wall_ms, "
    "g.min_value, g.max_value, q.value, g.n, g.nan_n, g.pinf_n, g.ninf_n FROM ("
    "SELECT run_id, key_id, step / {w} AS b, min(step) AS first_step, "
    "max(step) AS last_step, "
    "min(CASE WHEN value > {ninf} AND value < {pinf} THEN value END) AS min_value, "
    "max(CASE WHEN value > {ninf} AND value < {pinf} THEN value END) AS max_value, "
    "count(*) AS n, sum(CASE WHEN value IS NULL THEN 1 ELSE 0 END) AS nan_n, "
    "sum(CASE WHEN value = {pinf} THEN 1 ELSE 0 END) AS pinf_n, "
    "sum(CASE WHEN value = {ninf} THEN 1 ELSE 0 END) AS ninf_n "
    "FROM metric_points WHERE run_id = {p} AND key_id = {p} AND step >= {p} AND step <= {p} "
    "GROUP BY {group}step / {w}) g "
    "JOIN metric_points q ON q.run_id = g.run_id AND q.key_id = g.key_id "
    "AND q.step = g.last_step WHERE NOT EXISTS (SELECT 1 FROM metric_points s "
    "WHERE s.run_id = q.run_id AND s.key_id = q.key_id AND s.step = q.step AND s.seq > q.seq) "
    + _ON_CONFLICT
)
# A coarser level from the level below it: combine of the rule over its rows (a row's
# bucket / ratio is level_bucket of its steps at the coarser width).
_FROM_LEVEL = (
    "INSERT INTO metric_rollups (" + _COLUMNS + ") "
    "SELECT g.run_id, g.key_id, {w}, g.b, g.first_step, g.last_step, q.last_wall_ms, "
    "g.min_value, g.max_value, q.last_value, g.n, g.nan_n, g.pinf_n, g.ninf_n FROM ("
    "SELECT run_id, key_id, bucket / {r} AS b, max(bucket) AS src, "
    "min(first_step) AS first_step, max(last_step) AS last_step, "
    "min(min_value) AS min_value, max(max_value) AS max_value, sum(count) AS n, "
    "sum(nan_count) AS nan_n, sum(posinf_count) AS pinf_n, sum(neginf_count) AS ninf_n "
    "FROM metric_rollups WHERE run_id = {p} AND key_id = {p} AND width = {src} "
    "AND bucket >= {p} AND bucket <= {p} GROUP BY run_id, key_id, bucket / {r}) g "
    "JOIN metric_rollups q ON q.run_id = g.run_id AND q.key_id = g.key_id "
    "AND q.width = {src} AND q.bucket = g.src WHERE 1 = 1 " + _ON_CONFLICT
)
# Level-0 rows computed by the caller (tracker.rules.point_buckets.level_rows).
_DOUBLE = "CAST({p} AS DOUBLE PRECISION)"
_UPSERT_ROWS = {
    dialect: (
        f"INSERT INTO metric_rollups ({_COLUMNS}) VALUES ({p}, {p}, {LEVELS[0]}, {p}, {p}, "
        f"{p}, {p}, {_DOUBLE}, {_DOUBLE}, {_DOUBLE}, {p}, {p}, {p}, {p}) ".replace("{p}", p)
        + _ON_CONFLICT
    )
    for dialect, p in (("sqlite", "?"), ("postgresql", "%s"))
}


def level_span(lo: int, hi: int) -> tuple[int, int]:
    """The steps of the level-0 buckets that hold a step of ``lo..hi``."""
    return level_steps(lo, hi, LEVELS[0])


def upsert_level0(cur: Any, dialect: str, run_id: int, key_id: int, rows: Sequence[Any]) -> None:
    """Store level-0 rows (``tracker.rules.point_buckets.level_rows``) of one series."""
    upsert_level0_rows(cur, dialect, [(run_id, key_id, *row) for row in rows])


def upsert_level0_rows(cur: Any, dialect: str, rows: Sequence[Any]) -> None:
    """Store level-0 rows of several series: ``(run_id, key_id, *level_row)`` each."""
    cur.executemany(_UPSERT_ROWS[dialect], rows)


_INF = {
    "sqlite": ("9e999", "-9e999"),
    "postgresql": ("'Infinity'::float8", "'-Infinity'::float8"),
}
_PARAM = {"sqlite": "?", "postgresql": "%s"}


def _statements(dialect: str) -> list[str]:
    pinf, ninf = _INF[dialect]
    p = _PARAM[dialect]
    # run_id and key_id are fixed by the WHERE clause; SQLite sorts less without them in
    # the GROUP BY (-20% refresh time), PostgreSQL requires them there.
    group = "" if dialect == "sqlite" else "run_id, key_id, "
    out = [_FROM_POINTS.format(w=LEVELS[0], p=p, pinf=pinf, ninf=ninf, group=group)]
    for src, width in itertools.pairwise(LEVELS):
        out.append(_FROM_LEVEL.format(w=width, src=src, r=width // src, p=p))
    return out


_SQL = {name: _statements(name) for name in _INF}


def step_bounds(rows: Iterable[Sequence[Any]]) -> Bounds:
    """The lowest and highest step written per (run, key) in ``(run, key, step, ...)`` rows."""
    bounds: dict[tuple[int, int], list[int]] = {}
    get = bounds.get
    for row in rows:
        key = (row[0], row[1])
        step = row[2]
        b = get(key)
        if b is None:
            bounds[key] = [step, step]
        elif step < b[0]:
            b[0] = step
        elif step > b[1]:
            b[1] = step
    return {k: (v[0], v[1]) for k, v in bounds.items()}


MIN_CHUNK_POINTS = 2_000  # a ChunkSizer never goes below this (unless its maximum is lower)


class ChunkSizer:
    """Points per refresh transaction, adapted to how fast this database refreshes.

    Starts at ``max_points`` and moves toward what took about ``target_s`` seconds last
    time, never above ``max_points`` nor below ``min(max_points, MIN_CHUNK_POINTS)``: a
    slow or busy disk gets smaller chunks, so the write lock is still held only briefly.
    """

    def __init__(self, max_points: int, target_s: float = 0.25) -> None:
        if max_points < 1:
            raise ValueError(f"chunk_points: must be at least 1 point, got {max_points}")
        self.max_points = max_points
        self.target_s = target_s
        self.points = max_points

    def update(self, points: int, took_s: float) -> None:
        """Record that a chunk of ``points`` points took ``took_s`` seconds."""
        rate = points / max(took_s, 1e-3)
        floor = min(self.max_points, MIN_CHUNK_POINTS)
        self.points = max(floor, min(self.max_points, int(rate * self.target_s)))


def next_chunk(cur: Any, dialect: str, bounds: Bounds, budget: int) -> tuple[Bounds, Bounds]:
    """Split ``bounds`` into a chunk of about ``budget`` stored points and the rest.

    The chunk holds whole (run, key) ranges, in sorted order, while they fit, and the
    lower part of the first one that does not: it ends before the ``budget``-th point
    still unplaced, so it is never empty and never holds more than ``budget`` points plus
    the rest of two level-0 buckets at its ends. Counting reads only the points index.
    """
    if budget < 1:
        raise ValueError(f"budget: must be at least 1 point, got {budget}")
    p = _PARAM[dialect]
    where = f"WHERE run_id = {p} AND key_id = {p} AND step >= {p} AND step <= {p}"
    chunk: Bounds = {}
    rest: Bounds = {}
    left = budget
    for (run_id, key_id), (lo, hi) in sorted(bounds.items()):
        if left <= 0:
            rest[run_id, key_id] = (lo, hi)
            continue
        if hi - lo < left:  # at most one point per step: it fits without counting
            chunk[run_id, key_id] = (lo, hi)
            left -= hi - lo + 1
            continue
        cur.execute(
            f"SELECT step FROM metric_points {where} ORDER BY step LIMIT 1 OFFSET {p}",
            (run_id, key_id, lo, hi, left),
        )
        found = cur.fetchone()
        if found is None:  # fewer than ``left`` points are stored in the range
            cur.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM metric_points {where} LIMIT {p}) t",
                (run_id, key_id, lo, hi, left),
            )
            chunk[run_id, key_id] = (lo, hi)
            left -= max(1, cur.fetchone()[0])
            continue
        cut = found[0]  # the first point past the budget starts the rest
        if cut > lo:
            chunk[run_id, key_id] = (lo, cut - 1)
        rest[run_id, key_id] = (cut, hi)
        left = 0
    return chunk, rest


def refresh(cur: Any, dialect: str, bounds: Bounds) -> None:
    """Recompute every rollup bucket that covers a step in ``bounds``, level by level.

    Runs in the caller's transaction; on PostgreSQL it first takes a transaction-level
    advisory lock per run, so two concurrent writers of one run cannot each publish a
    bucket computed without the other's points. A level-0 bucket with sealed points
    (``tracker.store.chunks``) is computed from the chunks and head rows merged, in numpy,
    by the same rule; a run without chunks costs one index probe.
    """
    if not bounds:
        return
    statements = _SQL[dialect]
    if dialect == "postgresql":
        for run_id in sorted({r for r, _ in bounds}):
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", (PG_LOCK_CLASS, run_id))
    dirty = sorted(bounds.items())
    # Level 0: every point of the level-0 buckets that hold a dirty step; in SQL from the
    # head rows, or, where sealed chunks hold some of those steps, from the points merged
    params = []
    sealed = sealed_runs(cur, dialect, (r for (r, _k), _b in dirty))
    for (r, k), (lo, hi) in dirty:
        span = level_steps(lo, hi, LEVELS[0])
        if r in sealed:
            from tracker.store.chunks import refresh_level0  # numpy: only where it is sealed

            if refresh_level0(cur, dialect, r, k, *span):
                continue
        params.append((r, k, *span))
    cur.executemany(statements[0], params)
    refresh_coarse(cur, dialect, dirty)


def refresh_coarse(
    cur: Any, dialect: str, dirty: Sequence[tuple[tuple[int, int], tuple[int, int]]]
) -> None:
    """Recompute the levels above level 0 over the dirty step ranges, from the level
    below (what :func:`refresh` does after level 0; a writer that stored level 0 itself,
    ``tracker.store.chunks.write_packed``, calls it alone). Run lock held by the caller."""
    statements = _SQL[dialect]
    for i, (src, width) in enumerate(itertools.pairwise(LEVELS), start=1):
        # Every row of the level below inside the buckets of ``width`` that hold a dirty step.
        level_params = [
            (r, k, *level_buckets(*level_steps(lo, hi, width), src)) for (r, k), (lo, hi) in dirty
        ]
        cur.executemany(statements[i], level_params)


_HAS_CHUNKS = {
    dialect: f"SELECT 1 FROM metric_chunks WHERE run_id = {p} LIMIT 1"
    for dialect, p in _PARAM.items()
}


def sealed_runs(cur: Any, dialect: str, run_ids: Iterable[int]) -> set[int]:
    """The runs of ``run_ids`` with any chunk (one index probe per run)."""
    sealed = set()
    for run_id in sorted(set(run_ids)):
        cur.execute(_HAS_CHUNKS[dialect], (run_id,))
        if cur.fetchone() is not None:
            sealed.add(run_id)
    return sealed
