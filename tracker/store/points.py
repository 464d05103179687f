"""Bulk metric ingest: the hot path from the writer thread into the database.

Rows are ``(run_id, key_id, step, wall_ms, value)``; NaN values may be NaN or ``None``
(both are stored as NULL). Ingest is idempotent: the same (run, key, step) written twice
keeps the last value, so a retried batch never duplicates or errors. These rows take
``seq`` 0 (the column's default); :func:`append_rows` (the MLflow route) keeps every
value of a step instead, each further one with the next ``seq``.

* SQLite: multi-row ``INSERT ... ON CONFLICT DO UPDATE`` statements of ``SQLITE_CHUNK``
  rows. Python's sqlite3 releases the GIL around every statement; with one statement per
  row (``executemany``) a busy training thread starves the writer (measured: 880k rows/s
  alone, 150k rows/s beside a busy loop), so fewer, larger statements matter more than
  anything else here.
* PostgreSQL: binary ``COPY`` straight into ``metric_points`` inside a savepoint; when the
  batch rewrites existing steps (a retry, a resumed run) the unique key refuses it, and
  the batch goes through a staging table and ``INSERT ... ON CONFLICT`` instead.
* Both: the per-run last values (``metric_summaries``) and the chart rollups
  (``metric_rollups``) are updated in the same transaction -- or, for the client's writer,
  the rollups later and apart (:func:`refresh_rollups`): in transactions of at most
  ``REFRESH_CHUNK_POINTS`` points (fewer on a slower database), so no refresh holds the
  write lock for long, with a pause between them on SQLite (``SQLITE_REFRESH_PAUSE_S``)
  so that another writer waiting in SQLite's busy handler, which sleeps up to 100 ms
  between tries, gets its turn.
* -0.0 keeps its sign on both (``tracker.store.models.SignedDouble``): on SQLite the value
  columns have no type affinity and every value is bound through ``CAST(? AS DOUBLE
  PRECISION)``, so an int is stored as a double, never as an integer.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from tracker.entities import AttemptFence
from tracker.errors import InvalidInput
from tracker.store import fencing, rollups
from tracker.store.engine import is_unavailable, read_conn, unavailable_as_error

Row = tuple[int, int, int, int, "float | None"]
Fenced = tuple[int, AttemptFence] | None  # (run id, fence) of a fenced write

# Most points per rollup-refresh transaction (about 0.3 s on SQLite here, bench/RESULTS.md);
# the Store's ChunkSizer shrinks it where the database is slower.
REFRESH_CHUNK_POINTS = 200_000
SQLITE_REFRESH_PAUSE_S = 0.12  # longer than the busy handler's longest sleep (100 ms)
SQLITE_CHUNK = 2_048  # rows per statement: 10,240 bound parameters, under SQLite's 32,766
# Statements come in these row counts only (powers of two up to SQLITE_CHUNK): a batch of n
# rows is split by n's binary digits. One statement per distinct count would fill sqlite3's
# statement cache and the SQL memo with up to 2,000 large statements over a long run (RSS
# grew ~10 MiB over 100k steps); this way there are 12, and at most 12 per chunk.
SQLITE_SHAPES = tuple(1 << i for i in range(SQLITE_CHUNK.bit_length() - 1, -1, -1))
_POINTS_COLUMNS = "INSERT INTO metric_points (run_id, key_id, step, wall_ms, value) "
_ON_CONFLICT_POINTS = (
    " ON CONFLICT (run_id, key_id, step, seq) DO UPDATE "
    "SET wall_ms = excluded.wall_ms, value = excluded.value"
)
_UPSERT_SUMMARY = (
    "INSERT INTO metric_summaries (run_id, key_id, last_step, last_wall_ms, last_value) "
    "VALUES ({p}, {p}, {p}, {p}, CAST({p} AS DOUBLE PRECISION)) "
    "ON CONFLICT (run_id, key_id) DO UPDATE "
    "SET last_step = excluded.last_step, last_wall_ms = excluded.last_wall_ms, "
    "last_value = excluded.last_value WHERE excluded.last_step >= metric_summaries.last_step"
)
_PG_TYPES = ["int4", "int4", "int8", "int8", "float8"]
_PG_COPY = "COPY {table} (run_id, key_id, step, wall_ms, value) FROM STDIN (FORMAT BINARY)"
_PG_TMP = (
    "CREATE TEMP TABLE IF NOT EXISTS tmp_points (ord bigserial, run_id integer, "
    "key_id integer, step bigint, wall_ms bigint, value double precision) ON COMMIT DELETE ROWS"
)
_PG_MERGE = (
    _POINTS_COLUMNS + "SELECT DISTINCT ON (run_id, key_id, step) run_id, key_id, step, "
    "wall_ms, value FROM tmp_points ORDER BY run_id, key_id, step, ord DESC" + _ON_CONFLICT_POINTS
)


def _sqlite_shapes(n: int) -> list[int]:
    """Statement sizes (each in ``SQLITE_SHAPES``) that add up to ``n`` rows."""
    full, rest = divmod(n, SQLITE_CHUNK)
    return [SQLITE_CHUNK] * full + [size for size in SQLITE_SHAPES if rest & size]


def _sqlite_insert(n: int, cache: dict[int, str] = {}) -> str:  # noqa: B006 - a memo
    sql = cache.get(n)
    if sql is None:
        # An int value is stored as a double (the column has no affinity: see SignedDouble).
        values = ", ".join(["(?, ?, ?, ?, CAST(? AS DOUBLE PRECISION))"] * n)
        sql = cache[n] = _POINTS_COLUMNS + "VALUES " + values + _ON_CONFLICT_POINTS
    return sql


def last_per_key(rows: Sequence[Row]) -> list[Row]:
    """The row with the highest step per (run, key); later rows win ties."""
    last: dict[tuple[int, int], Row] = {}
    for row in rows:
        k = (row[0], row[1])
        prev = last.get(k)
        if prev is None or row[2] >= prev[2]:
            last[k] = row
    return list(last.values())


def write_rows(
    engine: sa.Engine,
    rows: Sequence[Row],
    last: Sequence[Row] | None = None,
    bounds: rollups.Bounds | None = None,
    *,
    refresh_rollups: bool = True,
    fence: AttemptFence | None = None,
    packed: Sequence[Any] = (),
) -> None:
    """Store metric rows, the per-run last values and the chart rollups in one transaction.

    ``packed`` series, ``(run_id, key_id, Points)`` with strictly increasing steps, are
    stored as chunks with their rollups in the same transaction
    (``tracker.store.chunks.write_packed``); one that meets stored points goes in as rows,
    its rollups refreshed at once. Their last values belong in ``last``.

    ``last`` (the newest row per key) and ``bounds`` (lowest/highest step per key; a wider
    range is harmless) are computed from ``rows`` when the caller has not. With
    ``refresh_rollups=False`` the caller takes over the rollups and must pass the bounds to
    :func:`refresh_rollups` later (the client's writer does, once it is idle).

    With a ``fence`` (rows of one run only) the transaction first checks that the job's
    attempt still holds the run (:mod:`tracker.store.fencing`).

    Raises:
        StoreUnavailable: the database cannot be reached or stays locked; nothing was stored
            and the caller may retry the same rows.
        AttemptSuperseded: the fence no longer holds; nothing was stored.
        InvalidInput: a fence with rows of several runs.
    """
    if not rows and not packed:
        return
    fenced = None
    if fence is not None:
        runs = {r[0] for r in rows} | {p[0] for p in packed}
        if len(runs) != 1:
            raise InvalidInput("a fenced write of metric points takes one run", field="run")
        fenced = (runs.pop(), fence)
    summary = last if last is not None else last_per_key(rows)
    if refresh_rollups:
        bounds = bounds if bounds is not None else rollups.step_bounds(rows)
    else:
        bounds = {}
    writer = _write_sqlite if engine.dialect.name == "sqlite" else _write_postgres
    n = len(rows) + sum(len(p[2]) for p in packed)
    _in_transaction(
        engine, f"writing {n} metric points", writer, rows, summary, bounds, fenced, packed
    )


def append_rows(engine: sa.Engine, rows: Sequence[Row]) -> int:
    """Store rows keeping every value of a step, in order (MLflow's semantics); returns how
    many were stored.

    A row equal to a stored one of its (run, key, step) in ``wall_ms`` and value (NaN equals
    NaN; among the step's newest ``RETRY_WINDOW`` values), or to an earlier row of ``rows``,
    is skipped: a retried request stores nothing twice. Every other row gets the next
    ``seq`` of its step, so the value with the highest (step, seq) is the metric's latest
    (summaries and chart rollups follow in the same transaction). One appender per run at a
    time on PostgreSQL (an advisory lock). Cost: the step's rollup bucket is recomputed on
    every call, so a step holding many values (``log_metric`` in a loop without a step)
    makes each further call slower (bench/RESULTS.md).

    Raises:
        StoreUnavailable: the database cannot be reached or stays locked; nothing was stored.
    """
    if not rows:
        return 0
    rows = [r if r[4] == r[4] or r[4] is None else (*r[:4], None) for r in rows]
    stored: list[int] = []
    _in_transaction(engine, f"appending {len(rows)} metric points", _append, rows, stored)
    return stored[0]


_APPEND_LOCK_CLASS = 7242012  # advisory lock namespace: one MLflow-route appender per run
_SEQ_AT = "SELECT max(seq) FROM metric_points WHERE run_id = {p} AND key_id = {p} AND step = {p}"
# A retry repeats what was just stored: it is looked for among the newest RETRY_WINDOW
# values of the step (an index range; one request holds at most 1,000 metrics), so a step
# with 100,000 values (log_metric in a loop, no step) costs no more per call than one with
# 1,000.
RETRY_WINDOW = 10_000
_SAME_WALL = (
    "SELECT value FROM metric_points WHERE run_id = {p} AND key_id = {p} AND step = {p} "
    "AND seq >= {p} AND wall_ms = {p}"
)
_INSERT_SEQ = (
    "INSERT INTO metric_points (run_id, key_id, step, seq, wall_ms, value) "
    "VALUES ({p}, {p}, {p}, {p}, {p}, CAST({p} AS DOUBLE PRECISION))"
)


_CHUNK_AT = (
    "SELECT last_step, data FROM metric_chunks WHERE run_id = {p} AND key_id = {p} "
    "AND first_step <= {p} ORDER BY first_step DESC LIMIT 1"
)


def _sealed_at(cur: Any, p: str, at: tuple[int, int, int]) -> list[tuple[int, int, Any]]:
    """(seq, wall_ms, value) of the values of step ``at`` sealed in a chunk (NaN as None,
    as rows are compared), so an append counts them (``tracker.store.chunks``)."""
    cur.execute(_CHUNK_AT.format(p=p), at)
    row = cur.fetchone()
    if row is None or row[0] < at[2]:
        return []
    import numpy as np  # only where a series is sealed: numpy stays out of the store's import

    from tracker.rules import chunk_codec

    pts = chunk_codec.decode(bytes(row[1]))
    lo, hi = np.searchsorted(pts.steps, at[2], "left"), np.searchsorted(pts.steps, at[2], "right")
    return [
        (q, w, None if v != v else v)
        for q, w, v in zip(
            pts.seqs[lo:hi].tolist(),
            pts.walls[lo:hi].tolist(),
            pts.values[lo:hi].tolist(),
            strict=True,
        )
    ]


def _append(raw: Any, rows: Sequence[Row], stored: list[int]) -> None:
    sqlite = _is_sqlite(raw)
    p = "?" if sqlite else "%s"
    cur = raw.cursor()
    if sqlite:
        cur.execute("BEGIN IMMEDIATE")
    else:
        for run_id in sorted({r[0] for r in rows}):
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_APPEND_LOCK_CLASS, run_id))
    # (run, key, step) -> ([next seq], {(wall_ms, value) seen}, had stored values, lowest
    # seq a retry is looked for at)
    Seen = tuple[list[int], set[tuple[int, float | None]], bool, int]
    seen: dict[tuple[int, int, int], Seen] = {}
    out: list[tuple[int, int, int, int, int, float | None]] = []
    # runs with chunks: only their steps may be sealed
    sealed_runs = rollups.sealed_runs(
        cur, "sqlite" if sqlite else "postgresql", (r[0] for r in rows)
    )
    for run_id, key_id, step, wall_ms, value in rows:
        at = (run_id, key_id, step)
        known = seen.get(at)
        if known is None:
            cur.execute(_SEQ_AT.format(p=p), at)
            top = cur.fetchone()[0]
            sealed = _sealed_at(cur, p, at) if run_id in sealed_runs else []
            if sealed:
                top = max(-1 if top is None else top, max(q for q, _, _ in sealed))
            first = 0 if top is None else top + 1
            known = seen[at] = ([first], set(), top is not None, max(0, first - RETRY_WINDOW))
            known[1].update((w, v) for q, w, v in sealed if q >= known[3])
        pairs = known[1]
        if (wall_ms, value) in pairs:
            continue
        if known[2]:  # the step has stored values: is this one of them?
            cur.execute(_SAME_WALL.format(p=p), (*at, known[3], wall_ms))
            pairs.update((wall_ms, v) for (v,) in cur.fetchall())
            if (wall_ms, value) in pairs:
                continue
        pairs.add((wall_ms, value))
        out.append((run_id, key_id, step, known[0][0], wall_ms, value))
        known[0][0] += 1
    if out:
        cur.executemany(_INSERT_SEQ.format(p=p), out)
        plain = [(r, k, s, w, v) for r, k, s, _, w, v in out]
        cur.executemany(_UPSERT_SUMMARY.format(p=p), last_per_key(plain))
        rollups.refresh(cur, "sqlite" if sqlite else "postgresql", rollups.step_bounds(plain))
    if sqlite:
        cur.execute("COMMIT")
    else:
        raw.commit()
    cur.close()
    stored.append(len(out))


def refresh_rollups(
    engine: sa.Engine,
    bounds: rollups.Bounds,
    *,
    chunk_points: int | rollups.ChunkSizer = REFRESH_CHUNK_POINTS,
    budget_s: float | None = None,
) -> rollups.Bounds:
    """Recompute the chart rollups over ``bounds``, a chunk of points per transaction.

    Chunks go in step order (:func:`tracker.store.rollups.next_chunk`) and hold
    ``chunk_points`` points, or what a :class:`~tracker.store.rollups.ChunkSizer` says
    (the Store keeps one, so the size adapts to the database). With ``budget_s`` it stops
    after the first chunk that ends past that many seconds and returns the ranges still to
    refresh (pass them again later); without it, it returns ``{}``.

    Raises:
        StoreUnavailable: the database cannot be reached; the ranges not yet refreshed are
            lost to this call, so a caller that may retry keeps its own copy.
        ValueError: ``chunk_points`` is below 1.
    """
    sizer = rollups.ChunkSizer(chunk_points) if isinstance(chunk_points, int) else chunk_points
    fixed = isinstance(chunk_points, int)  # an explicit size is kept as given
    start = time.monotonic()
    pending = dict(bounds)
    while pending:
        size = sizer.points
        done: list[rollups.Bounds] = []
        began = time.monotonic()
        _in_transaction(engine, "refreshing chart rollups", _refresh_chunk, pending, size, done)
        if not fixed:
            sizer.update(size, time.monotonic() - began)
        pending = done[0]
        if not pending:
            break
        if engine.dialect.name == "sqlite":
            time.sleep(SQLITE_REFRESH_PAUSE_S)  # let a waiting writer in (see above)
        if budget_s is not None and time.monotonic() - start >= budget_s:
            break
    return pending


def repair_rollups(engine: sa.Engine, run_ids: Sequence[int]) -> None:
    """Bring the rollups of ``run_ids`` up to their last steps (after a writer died before
    refreshing them)."""
    if not run_ids:
        return
    query = sa.text(
        "SELECT s.run_id, s.key_id, (SELECT max(r.last_step) FROM metric_rollups r "
        "WHERE r.run_id = s.run_id AND r.key_id = s.key_id AND r.width = :w), s.last_step "
        "FROM metric_summaries s WHERE s.run_id IN :runs"
    ).bindparams(sa.bindparam("runs", expanding=True))
    with read_conn(engine) as conn:
        found = conn.execute(query, {"w": rollups.LEVELS[0], "runs": list(run_ids)}).all()
    bounds = {(r, k): (lo or 0, hi) for r, k, lo, hi in found if lo is None or lo < hi}
    refresh_rollups(engine, bounds)


def _in_transaction(engine: sa.Engine, what: str, work: Any, *args: Any) -> None:
    """Run ``work(raw_connection, *args)``; driver outages become StoreUnavailable."""
    with unavailable_as_error(what):
        raw = engine.raw_connection()
        try:
            work(raw, *args)
        except Exception as exc:
            if is_unavailable(exc):
                raw.invalidate()  # a broken connection must not go back into the pool
            else:
                _rollback_quietly(raw)
            raise
        finally:
            raw.close()


def _refresh_chunk(
    raw: Any, bounds: rollups.Bounds, chunk_points: int, rest: list[rollups.Bounds]
) -> None:
    """Refresh the first chunk of ``bounds`` in one transaction; append what is left."""
    cur = raw.cursor()
    if _is_sqlite(raw):
        chunk, left = rollups.next_chunk(cur, "sqlite", bounds, chunk_points)
        raw.rollback()  # the sizing reads ran in an implicit read transaction
        cur.execute("BEGIN IMMEDIATE")
        rollups.refresh(cur, "sqlite", chunk)
        cur.execute("COMMIT")
    else:
        chunk, left = rollups.next_chunk(cur, "postgresql", bounds, chunk_points)
        raw.commit()
        rollups.refresh(cur, "postgresql", chunk)
        raw.commit()
    cur.close()
    rest.append(left)


def _is_sqlite(raw: Any) -> bool:
    return type(raw.driver_connection).__module__.startswith("sqlite3")


def _write_sqlite(
    raw: Any,
    rows: Sequence[Row],
    summary: Sequence[Row],
    bounds: rollups.Bounds,
    fenced: Fenced,
    packed: Sequence[Any],
) -> None:
    cur = raw.cursor()
    cur.execute("BEGIN IMMEDIATE")
    if fenced is not None:
        fencing.check_raw(cur, False, *fenced)
    rows, bounds = _write_packed(cur, "sqlite", packed, rows, bounds)
    flat = itertools.chain.from_iterable
    start = 0
    for size in _sqlite_shapes(len(rows)):
        chunk = rows[start : start + size]
        cur.execute(_sqlite_insert(size), list(flat(chunk)))  # NaN binds as NULL
        start += size
    cur.executemany(_UPSERT_SUMMARY.format(p="?"), summary)
    if bounds:
        rollups.refresh(cur, "sqlite", bounds)
    cur.execute("COMMIT")
    cur.close()


def _write_postgres(
    raw: Any,
    rows: Sequence[Row],
    summary: Sequence[Row],
    bounds: rollups.Bounds,
    fenced: Fenced,
    packed: Sequence[Any],
) -> None:
    # Binary COPY would store NaN as NaN; the schema's convention is NULL.
    summary = [r if r[4] == r[4] or r[4] is None else (*r[:4], None) for r in summary]
    import psycopg

    with raw.cursor() as cur:
        rows, bounds = _write_packed(cur, "postgresql", packed, rows, bounds)
        rows = [r if r[4] == r[4] or r[4] is None else (*r[:4], None) for r in rows]
        cur.execute("SAVEPOINT tracker_copy")
        try:
            _pg_copy(cur, "metric_points", rows)
            cur.execute("RELEASE SAVEPOINT tracker_copy")
        except psycopg.errors.UniqueViolation:  # the batch rewrites stored steps: merge
            cur.execute("ROLLBACK TO SAVEPOINT tracker_copy")
            cur.execute(_PG_TMP)
            _pg_copy(cur, "tmp_points", rows)
            cur.execute(_PG_MERGE)
        cur.executemany(_UPSERT_SUMMARY.format(p="%s"), summary)
        if bounds:
            rollups.refresh(cur, "postgresql", bounds)
        if fenced is not None:  # last, so the job row's lock lasts only until the commit
            fencing.check_raw(cur, True, *fenced)
    raw.commit()


def _write_packed(
    cur: Any, dialect: str, packed: Sequence[Any], rows: Sequence[Row], bounds: rollups.Bounds
) -> tuple[Sequence[Row], rollups.Bounds]:
    """Store ``packed`` as chunks (``tracker.store.chunks.write_packed``); the rows to store
    and the rollup ranges to refresh, with those of a series that could not be packed."""
    if not packed:
        return rows, bounds
    from tracker.store.chunks import write_packed  # numpy: only where a writer packs

    instead = write_packed(cur, dialect, packed)
    if not instead:
        return rows, bounds
    merged = dict(bounds)
    for key, (lo, hi) in rollups.step_bounds(instead).items():
        seen = merged.get(key)
        merged[key] = (lo, hi) if seen is None else (min(lo, seen[0]), max(hi, seen[1]))
    return [*rows, *instead], merged


def _pg_copy(cur: Any, table: str, rows: Sequence[Row]) -> None:
    with cur.copy(_PG_COPY.format(table=table)) as copy:
        copy.set_types(_PG_TYPES)
        write = copy.write_row
        for row in rows:
            write(row)


def _rollback_quietly(raw: Any) -> None:
    # Called while another exception propagates: that one is what the caller needs, so a
    # second failure here (connection already gone) is deliberately not raised over it.
    with contextlib.suppress(Exception):
        raw.rollback()
