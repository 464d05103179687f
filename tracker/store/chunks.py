"""A metric series as a head of rows and sealed chunks (issue 30; docs/CHUNK_FORMAT.md).

Points land in ``metric_points`` (the head: last-wins upserts, MLflow's every-value ``seq``,
idempotent retries, as before). :func:`seal` moves a series' head rows into
``metric_chunks`` rows of up to :data:`CHUNK_POINTS` points (never splitting a step's
values), re-encoding the chunks the head rows fall into, and deletes the rows it sealed, in
one transaction. :func:`read_points` merges the chunks and the head of a step range: at an
equal (step, seq) the head's row wins, so a write to a sealed step is read at once and
sealed into its chunk by the next :func:`seal`. A seal re-encodes every chunk over the span
of the head's steps, so an overwrite far behind new points reseals what lies between.

Every read merges chunks and head: ``metrics.metric_history`` and ``count_points``, the
doctor's ``diagnoses.read_run_series``, the sweeps' objective and curves (through
``metrics.sealed_points``) and the charts (``store.series``); purge deletes chunks. The chart
rollups hold every point: a refresh of level-0 buckets with sealed steps computes them from
chunks and head merged (:func:`refresh_level0`, called by ``store.rollups.refresh``).

What seals: the periodic work (``tracker.periodic``, :func:`sealable_runs`: runs that ended
a minute ago), ``tracker db seal``, and the client's writer itself, which stores a tight
loop's batches packed (:func:`write_packed`, with their rollups) instead of as rows.
:func:`unseal_run` moves chunks back to rows (``tracker db unseal``, before a downgrade).

Concurrency: a row written while a seal runs is never lost. The seal deletes the head rows
of the step range it read in one statement and gets back what it deleted; a row another
writer stored or replaced after the read (PostgreSQL: point writers take the seal's lock only
for their rollups, and the seal skips rows they hold locked; SQLite's write lock excludes
them) is put back or left, and wins over the sealed copy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa

from tracker.rules import chunk_codec
from tracker.rules.chunk_codec import Points
from tracker.rules.point_buckets import LevelRow, level_rows
from tracker.store import models as m
from tracker.store import rollups
from tracker.store.engine import read_conn, write_begin
from tracker.store.store import Store

__all__ = [
    "CHUNK_POINTS",
    "SEAL_BATCH_POINTS",
    "read_points",
    "read_points_in",
    "read_tail_in",
    "read_window_many",
    "refresh_level0",
    "seal",
    "seal_run",
    "sealable_runs",
    "sealed_runs",
    "sealed_series",
    "unseal_in",
    "unseal_run",
    "write_packed",
]

CHUNK_POINTS = 4096  # points per chunk, at most (a step's values are never split)
SEAL_BATCH_POINTS = 32_768  # head rows one seal transaction moves (seal_run)

_P = m.MetricPointRow
_C = m.MetricChunkRow
_EMPTY = Points.of([], [])


def seal(
    store: Store,
    run_id: int,
    key_id: int,
    *,
    chunk_points: int = CHUNK_POINTS,
    max_points: int | None = None,
) -> int:
    """Move head rows of (``run_id``, ``key_id``) into chunks, in one transaction; returns
    how many rows were sealed (0: none in the head). With ``max_points`` only the lowest
    steps holding about that many rows go (a step's values are never split), so a caller
    seals a long series in short transactions (:func:`seal_run`). The chunks a sealed
    row's step falls in, and the last chunk when it is not full, are decoded, merged with
    the head (the head winning) and written again.

    On PostgreSQL it takes the run's rollup lock (``tracker.store.rollups``), so a seal
    and a writer's rollup refresh of one run, which unseals what it refreshes, never
    interleave; SQLite's write lock does that there."""
    if chunk_points < 1:
        raise ValueError("chunk_points must be >= 1")
    if max_points is not None and max_points < 1:
        raise ValueError("max_points must be >= 1")
    with write_begin(store.engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(
                sa.text("SELECT pg_advisory_xact_lock(:c, :r)"),
                {"c": rollups.PG_LOCK_CLASS, "r": run_id},
            )
        head = _head(conn, run_id, key_id, None, None, max_points)
        if not len(head):
            return 0
        if max_points is not None and len(head) == max_points:
            last = int(head.steps[-1])
            whole = head.steps < last  # the last step may have more values than were read
            head = _take(head, whole) if whole.any() else _head(conn, run_id, key_id, last, last)
        _seal_head(conn, run_id, key_id, head, chunk_points)
    return len(head)


def _seal_head(
    conn: sa.Connection, run_id: int, key_id: int, head: Points, chunk_points: int
) -> None:
    # the chunks over the head's span (a run of them, so the new ones never overlap one
    # left alone), and the last one when it is not full (appends fill it up); headers
    # first, through the key's index, and the bytes of those alone
    lo, hi = int(head.steps[0]), int(head.steps[-1])
    header = sa.select(_C.first_step, _C.last_step, _C.count.label("points")).where(
        _C.run_id == run_id, _C.key_id == key_id
    )
    newest_first = _C.first_step.desc()
    inside = conn.execute(header.where(_C.first_step >= lo, _C.first_step <= hi)).all()
    before = conn.execute(header.where(_C.first_step < lo).order_by(newest_first).limit(1)).all()
    last = conn.execute(header.order_by(newest_first).limit(1)).all()
    redo = {c.first_step for c in inside} | {c.first_step for c in before if c.last_step >= lo}
    redo |= {c.first_step for c in last if c.points < chunk_points and c.last_step < hi}
    data = (
        conn.execute(
            sa.select(_C.data)
            .where(_C.run_id == run_id, _C.key_id == key_id, _C.first_step.in_(sorted(redo)))
            .order_by(_C.first_step)
        )
        .scalars()
        .all()
        if redo
        else []
    )
    old = _concat([chunk_codec.decode(blob) for blob in data])
    merged = chunk_codec.merge(old, head)
    if redo:
        conn.execute(
            sa.delete(_C).where(
                _C.run_id == run_id, _C.key_id == key_id, _C.first_step.in_(sorted(redo))
            )
        )
    rows = [_chunk_row(run_id, key_id, part) for part in _cut(merged, chunk_points)]
    conn.execute(sa.insert(_C), rows)
    _delete_sealed(conn, run_id, key_id, head)


# The head rows of a sealed step range, deleted in one statement; what it deleted comes
# back, so a row another writer stored or replaced after the seal read the head (possible
# on PostgreSQL, where point writers take the seal's lock only for their rollups) is put
# back, unchanged.
_PUT_BACK = sa.text(
    "INSERT INTO metric_points (run_id, key_id, step, seq, wall_ms, value) VALUES "
    "(:r, :k, :s, :q, :w, CAST(:v AS DOUBLE PRECISION)) ON CONFLICT DO NOTHING"
)


def _delete_sealed(conn: sa.Connection, run_id: int, key_id: int, head: Points) -> None:
    lo, hi = int(head.steps[0]), int(head.steps[-1])
    if conn.dialect.name == "sqlite":  # the seal's BEGIN IMMEDIATE kept every writer out
        _fetch(
            conn,
            "DELETE FROM metric_points WHERE run_id = ? AND key_id = ? AND step >= ? AND step <= ?",
            (run_id, key_id, lo, hi),
        )
        return
    # rows a writer holds locked (it waits for this seal's lock to refresh its rollups) are
    # skipped, not waited for: they stay in the head, newer than their sealed copies
    gone = _fetch(
        conn,
        "DELETE FROM metric_points WHERE (run_id, key_id, step, seq) IN (SELECT run_id, "
        "key_id, step, seq FROM metric_points WHERE run_id = %s AND key_id = %s AND step >= %s "
        "AND step <= %s FOR UPDATE SKIP LOCKED) RETURNING step, seq, wall_ms, value",
        (run_id, key_id, lo, hi),
    )
    if not gone:
        return
    steps, seqs, walls, values = zip(*gone, strict=True)
    deleted = Points.of(steps, values, walls, seqs)
    deleted = _take(deleted, np.lexsort((deleted.seqs, deleted.steps)))
    if len(deleted) == len(head) and _same(deleted, head):
        return
    sealed = set(_identities(head))
    back = [
        {"r": run_id, "k": key_id, "s": s, "q": q, "w": w, "v": None if math.isnan(v) else v}
        for (s, q, w, bits), v in zip(_identities(deleted), deleted.values.tolist(), strict=True)
        if (s, q, w, bits) not in sealed
    ]
    if back:
        conn.execute(_PUT_BACK, back)


def _same(a: Points, b: Points) -> bool:
    return bool(
        np.array_equal(a.steps, b.steps)
        and np.array_equal(a.seqs, b.seqs)
        and np.array_equal(a.walls, b.walls)
        and np.array_equal(_bits(a.values), _bits(b.values))
    )


def _bits(values: np.ndarray) -> np.ndarray:
    """Values as int64 bits, every NaN the same (the store keeps NaN as NULL)."""
    return np.where(np.isnan(values), np.nan, values).view(np.int64)


def _identities(p: Points) -> list[tuple[int, int, int, int]]:
    return list(
        zip(
            p.steps.tolist(),
            p.seqs.tolist(),
            p.walls.tolist(),
            _bits(p.values).tolist(),
            strict=True,
        )
    )


def seal_run(
    store: Store,
    run_id: int,
    *,
    batch_points: int = SEAL_BATCH_POINTS,
    budget_s: float | None = None,
    chunk_points: int = CHUNK_POINTS,
) -> tuple[int, bool]:
    """Seal every series of ``run_id``, ``batch_points`` rows per transaction; returns the
    rows sealed and whether the run's head is empty now. With ``budget_s`` it stops after
    the first batch that ends past that many seconds (call again to go on: each batch is
    committed, so a stop or a crash at any point loses nothing and redoes nothing)."""
    started = time.monotonic()
    total = 0
    with read_conn(store.engine) as conn:
        keys = (
            conn.execute(
                sa.select(m.MetricSummaryRow.key_id)
                .where(m.MetricSummaryRow.run_id == run_id)
                .order_by(m.MetricSummaryRow.key_id)
            )
            .scalars()
            .all()
        )
    for key_id in keys:
        while True:
            sealed = seal(store, run_id, key_id, chunk_points=chunk_points, max_points=batch_points)
            total += sealed
            if not sealed:
                break
            if budget_s is not None and time.monotonic() - started >= budget_s:
                return total, False
    return total, True


def sealed_runs(store: Store) -> list[int]:
    """The runs that have chunks, by id."""
    with read_conn(store.engine) as conn:
        return list(conn.execute(sa.select(_C.run_id).distinct().order_by(_C.run_id)).scalars())


def sealable_runs(store: Store, ended_before: float, limit: int | None = None) -> list[int]:
    """Runs that ended (any final status) before ``ended_before`` and still have head
    rows, oldest id first: what the periodic work and ``tracker db seal`` seal. A deleted
    run is left to purge."""
    r = m.RunRow
    has_head = sa.exists().where(_P.run_id == r.id)
    query = (
        sa.select(r.id)
        .where(
            r.status.not_in(("queued", "running")),
            r.ended_at < ended_before,
            r.deleted_at.is_(None),
            has_head,
        )
        .order_by(r.id)
        .limit(limit)
    )
    with read_conn(store.engine) as conn:
        return list(conn.execute(query).scalars())


def unseal_run(store: Store, run_id: int) -> int:
    """Move every chunk of ``run_id`` back into head rows, one series per transaction;
    returns how many chunks (what ``tracker db unseal`` does before a downgrade below the
    schema revision that added chunks)."""
    total = 0
    for key_id in sealed_series(store, run_id):
        with write_begin(store.engine) as conn:
            raw = conn.connection.driver_connection
            cur = raw.cursor()  # type: ignore[union-attr]
            try:
                if conn.dialect.name == "postgresql":
                    cur.execute(
                        "SELECT pg_advisory_xact_lock(%s, %s)", (rollups.PG_LOCK_CLASS, run_id)
                    )
                total += unseal_in(cur, conn.dialect.name, run_id, key_id, -(2**63), 2**63 - 1)
            finally:
                cur.close()
    return total


Packed = tuple[int, int, Points]  # (run id, key id, points: steps strictly increasing, seq 0)


def write_packed(cur: Any, dialect: str, packed: Sequence[Packed]) -> list[Any]:
    """Store series straight as chunks, with their rollups, on a raw DBAPI cursor in the
    caller's write transaction (the client's writer in a tight loop: no head rows to
    write, refresh and seal later). A series whose steps meet stored points -- head rows or
    a chunk in its step range, as a resumed run or a retried batch has -- is not packed:
    its rows are returned for the caller to store as rows. Level 0 of the rollups is
    computed from the packed points, merged with the stored rows of its edge buckets (or,
    where head rows share an edge bucket, from the points and the stored ones of those
    buckets); the levels above from level 0, as ``store.rollups`` does. On PostgreSQL the
    run's rollup lock is taken first (a seal or another writer of the run waits).

    The series of one batch share their steps (one log() call gives every key its point),
    so each of the questions above is asked once for all of them, not once per series:
    a handful of round trips a batch, whatever its number of keys."""
    p = "%s" if dialect == "postgresql" else "?"
    if dialect == "postgresql":
        for run_id in sorted({r for r, _k, _p in packed}):
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", (rollups.PG_LOCK_CLASS, run_id))
    rows_instead: list[Any] = []
    written: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for (run_id, lo, hi), series in _same_span(packed):
        chunk_rows: list[tuple[Any, ...]] = []
        level0: list[tuple[Any, ...]] = []
        keys = [k for k, _ in series]
        first, last = rollups.level_span(lo, hi)
        head_near = _keys_with_head(cur, p, run_id, keys, first, last)
        taken = _keys_with_head(cur, p, run_id, sorted(head_near), lo, hi) if head_near else set()
        taken |= _keys_with_chunk(cur, p, run_id, keys, lo, hi)
        fresh = [(k, points) for k, points in series if k not in taken]
        for k, points in series:
            if k in taken:
                rows_instead.extend(_as_rows(run_id, k, points))
        edges = _stored_edges(cur, p, run_id, [k for k, _ in fresh if k not in head_near], lo, hi)
        for key_id, points in fresh:
            chunk_rows.extend(
                _chunk_values(run_id, key_id, part) for part in _cut(points, CHUNK_POINTS)
            )
            # with head rows in the edge buckets (whose rollups a writer may not have
            # refreshed yet) from the points; else the edge buckets' stored points are
            # chunks', whose level-0 rows are current, merged with the new points' rows
            if key_id in head_near:
                around = _stored_points(cur, p, run_id, key_id, first, last)
                merged = chunk_codec.merge(around, points) if len(around) else points
                rows = level_rows(merged, rollups.LEVELS[0])
            else:
                rows = _with_edges(level_rows(points, rollups.LEVELS[0]), edges.get(key_id, {}))
            level0.extend((run_id, key_id, *row) for row in rows)
            written.append(((run_id, key_id), (lo, hi)))
        if chunk_rows:
            cur.executemany(_INSERT_CHUNK.replace("{p}", p), chunk_rows)
        if level0:
            rollups.upsert_level0_rows(cur, dialect, level0)
    if written:
        rollups.refresh_coarse(cur, dialect, sorted(written))
    return rows_instead


_DBL = "CAST({p} AS DOUBLE PRECISION)"
_INSERT_CHUNK = (
    f"INSERT INTO metric_chunks (run_id, key_id, first_step, last_step, count, min_value, "
    f"max_value, last_value, last_wall_ms, nan_count, posinf_count, neginf_count, data) "
    f"VALUES ({{p}}, {{p}}, {{p}}, {{p}}, {{p}}, {_DBL}, {_DBL}, {_DBL}, {{p}}, {{p}}, {{p}}, "
    f"{{p}}, {{p}})"
)
_PROBES = 100  # per-key probes in one UNION ALL statement (SQLite allows 500 terms)


def _same_span(packed: Sequence[Packed]) -> list[tuple[tuple[int, int, int], list[Any]]]:
    """``packed`` in its order as groups of consecutive series of one run with the same
    first and last step and distinct keys (a batch's keys): a group is stored before the
    next one is looked at, as one series after another was."""
    out: list[tuple[tuple[int, int, int], list[Any]]] = []
    keys: set[int] = set()  # the last group's
    for run_id, key_id, points in packed:
        span = (run_id, int(points.steps[0]), int(points.steps[-1]))
        if not out or out[-1][0] != span or key_id in keys:
            out.append((span, []))
            keys = set()
        out[-1][1].append((key_id, points))
        keys.add(key_id)
    return out


def _chunk_values(run_id: int, key_id: int, part: Points) -> tuple[Any, ...]:
    """A chunk row's columns in ``write_packed``'s order, NaN as NULL (the store's)."""
    row = _chunk_row(run_id, key_id, part)
    last = row["last_value"]
    row["last_value"] = None if isinstance(last, float) and math.isnan(last) else last
    return tuple(row.values())


def _probe(cur: Any, one: str, params: Sequence[tuple[Any, ...]]) -> list[Any]:
    """The rows of the one-row query ``one`` for each parameter tuple, in one statement per
    ``_PROBES`` of them (each keeps its own index probe and LIMIT)."""
    out: list[Any] = []
    for at in range(0, len(params), _PROBES):
        part = params[at : at + _PROBES]
        sql = " UNION ALL ".join(f"SELECT * FROM ({one}) AS q{i}" for i in range(len(part)))
        cur.execute(sql, [v for args in part for v in args])
        out.extend(cur.fetchall())
    return out


def _keys_with_head(
    cur: Any, p: str, run_id: int, keys: Sequence[int], lo: int, hi: int
) -> set[int]:
    """The keys of ``keys`` with a head row of ``run_id`` with a step in [lo, hi]."""
    one = (
        f"SELECT key_id FROM metric_points WHERE run_id = {p} AND key_id = {p} "
        f"AND step >= {p} AND step <= {p} LIMIT 1"
    )
    return {int(r[0]) for r in _probe(cur, one, [(run_id, k, lo, hi) for k in keys])}


def _keys_with_chunk(
    cur: Any, p: str, run_id: int, keys: Sequence[int], lo: int, hi: int
) -> set[int]:
    """The keys of ``keys`` with a chunk holding a step in [lo, hi]: the newest chunk of
    the key starting at or before ``hi`` reaches ``lo`` (chunks of a series never overlap)."""
    one = (
        f"SELECT key_id, last_step FROM metric_chunks WHERE run_id = {p} AND key_id = {p} "
        f"AND first_step <= {p} ORDER BY first_step DESC LIMIT 1"
    )
    found = _probe(cur, one, [(run_id, k, hi) for k in keys])
    return {int(k) for k, last in found if last >= lo}


def _stored_edges(
    cur: Any, p: str, run_id: int, keys: Sequence[int], lo: int, hi: int
) -> dict[int, dict[int, Any]]:
    """Per key, the stored level-0 rows of the buckets of ``lo`` and ``hi``, by bucket."""
    width = rollups.LEVELS[0]
    out: dict[int, dict[int, Any]] = {}
    for at in range(0, len(keys), 500):
        part = keys[at : at + 500]
        cur.execute(
            f"SELECT key_id, bucket, first_step, last_step, last_wall_ms, min_value, "
            f"max_value, last_value, count, nan_count, posinf_count, neginf_count "
            f"FROM metric_rollups WHERE run_id = {p} AND key_id IN ({', '.join([p] * len(part))}) "
            f"AND width = {p} AND (bucket = {p} OR bucket = {p})",
            (run_id, *part, width, lo // width, hi // width),
        )
        for row in cur.fetchall():
            out.setdefault(int(row[0]), {})[int(row[1])] = row[1:]
    return out


def _with_edges(rows: list[LevelRow], stored: dict[int, Any]) -> list[LevelRow]:
    """``rows`` (level 0 of new points, none of whose steps is stored) with ``stored``, the
    stored level-0 rows of their first and last bucket, merged in: the bucket rule's
    ``combine`` of two disjoint sets of points (min of mins, max of maxes, the later last,
    counts added)."""
    if not stored:
        return rows
    out = list(rows)
    for i in {0, len(rows) - 1}:
        old = stored.get(rows[i][0])
        if old is not None:
            out[i] = _combine_rows(old, rows[i])
    return out


def _combine_rows(a: Sequence[Any], b: Sequence[Any]) -> LevelRow:
    """Two level-0 rows of one bucket over disjoint points, as one."""
    later = a if a[2] > b[2] else b
    lows = [v for v in (a[4], b[4]) if v is not None]
    highs = [v for v in (a[5], b[5]) if v is not None]
    return (
        int(a[0]), min(a[1], b[1]), later[2], later[3], min(lows) if lows else None,
        max(highs) if highs else None, later[6], a[7] + b[7], a[8] + b[8], a[9] + b[9],
        a[10] + b[10],
    )  # fmt: skip


def _chunk_in(cur: Any, p: str, run_id: int, key_id: int, lo: int, hi: int) -> bool:
    """Whether a chunk of (run, key) holds a step in [lo, hi] (:func:`_keys_with_chunk`)."""
    return bool(_keys_with_chunk(cur, p, run_id, [key_id], lo, hi))


def _stored_points(cur: Any, p: str, run_id: int, key_id: int, lo: int, hi: int) -> Points:
    """Every stored point of (run, key) in [lo, hi], chunks and head merged (raw cursor)."""
    cur.execute(
        f"SELECT data FROM metric_chunks WHERE run_id = {p} AND key_id = {p} "
        f"AND first_step <= {p} AND last_step >= {p} ORDER BY first_step",
        (run_id, key_id, hi, lo),
    )
    sealed = [chunk_codec.decode(bytes(row[0])) for row in cur.fetchall()]
    cur.execute(
        f"SELECT step, seq, wall_ms, value FROM metric_points WHERE run_id = {p} "
        f"AND key_id = {p} AND step >= {p} AND step <= {p} ORDER BY step, seq",
        (run_id, key_id, lo, hi),
    )
    rows = cur.fetchall()
    head = _EMPTY
    if rows:
        steps, seqs, walls, values = zip(*rows, strict=True)
        head = Points.of(steps, values, walls, seqs)
    if not sealed:
        return head
    merged = chunk_codec.merge(_concat(sealed), head)
    keep = (merged.steps >= lo) & (merged.steps <= hi)
    return merged if keep.all() else _take(merged, keep)


def _as_rows(run_id: int, key_id: int, points: Points) -> list[Any]:
    return [
        (run_id, key_id, s, w, None if math.isnan(v) else v)
        for s, w, v in zip(
            points.steps.tolist(), points.walls.tolist(), points.values.tolist(), strict=True
        )
    ]


def refresh_level0(cur: Any, dialect: str, run_id: int, key_id: int, lo: int, hi: int) -> bool:
    """Recompute the level-0 rollups of (run, key) over the steps [lo, hi] (whole level-0
    buckets) from its chunks and head merged, when a chunk holds one of those steps;
    returns False, doing nothing, when none does (the SQL over the head rows answers)."""
    p = "%s" if dialect == "postgresql" else "?"
    if not _chunk_in(cur, p, run_id, key_id, lo, hi):
        return False
    points = _stored_points(cur, p, run_id, key_id, lo, hi)
    rollups.upsert_level0(cur, dialect, run_id, key_id, level_rows(points, rollups.LEVELS[0]))
    return True


def unseal_in(cur: Any, dialect: str, run_id: int, key_id: int, lo: int, hi: int) -> int:
    """Move the chunks of (``run_id``, ``key_id``) that hold a step in [``lo``, ``hi``]
    back into head rows (a head row at the same (step, seq) is kept: it is the newer),
    on a raw DBAPI cursor in the caller's transaction; returns how many chunks
    (:func:`unseal_run`)."""
    p = "%s" if dialect == "postgresql" else "?"
    if not _chunk_in(cur, p, run_id, key_id, lo, hi):
        return 0
    cur.execute(
        f"SELECT first_step, data FROM metric_chunks WHERE run_id = {p} AND key_id = {p} "
        f"AND first_step <= {p} AND last_step >= {p}",
        (run_id, key_id, hi, lo),
    )
    found = cur.fetchall()
    if not found:
        return 0
    insert = (
        "INSERT INTO metric_points (run_id, key_id, step, seq, wall_ms, value) "
        f"VALUES ({p}, {p}, {p}, {p}, {p}, CAST({p} AS DOUBLE PRECISION)) "
        "ON CONFLICT (run_id, key_id, step, seq) DO NOTHING"
    )
    for first_step, data in found:
        pts = chunk_codec.decode(bytes(data))
        cur.executemany(
            insert,
            [
                (run_id, key_id, s, q, w, None if v != v else v)
                for s, q, w, v in zip(
                    pts.steps.tolist(),
                    pts.seqs.tolist(),
                    pts.walls.tolist(),
                    pts.values.tolist(),
                    strict=True,
                )
            ],
        )
        cur.execute(
            f"DELETE FROM metric_chunks WHERE run_id = {p} AND key_id = {p} AND first_step = {p}",
            (run_id, key_id, first_step),
        )
    return len(found)


def sealed_series(store: Store, run_id: int) -> list[int]:
    """The key ids of ``run_id`` that have chunks."""
    with read_conn(store.engine) as conn:
        return list(
            conn.execute(
                sa.select(_C.key_id).where(_C.run_id == run_id).distinct().order_by(_C.key_id)
            ).scalars()
        )


def read_points(
    store: Store, run_id: int, key_id: int, lo: int | None = None, hi: int | None = None
) -> Points:
    """Every point of (``run_id``, ``key_id``) with a step in [``lo``, ``hi``] (either
    open), chunks and head merged, in (step, seq) order."""
    with read_conn(store.engine) as conn:
        return read_points_in(conn, run_id, key_id, lo, hi)


def read_points_in(
    conn: sa.Connection, run_id: int, key_id: int, lo: int | None, hi: int | None
) -> Points:
    """:func:`read_points` on an open connection."""
    query = sa.select(_C.data).where(_C.run_id == run_id, _C.key_id == key_id)
    if lo is not None:
        query = query.where(_C.last_step >= lo)
    if hi is not None:
        query = query.where(_C.first_step <= hi)
    sealed = [
        chunk_codec.decode(data) for data in conn.execute(query.order_by(_C.first_step)).scalars()
    ]
    head = _head(conn, run_id, key_id, lo, hi)
    if not sealed:
        return head
    merged = chunk_codec.merge(_concat(sealed), head)
    if lo is None and hi is None:
        return merged
    keep = np.ones(len(merged), bool)
    if lo is not None:
        keep &= merged.steps >= lo
    if hi is not None:
        keep &= merged.steps <= hi
    return _take(merged, keep)


def read_tail_in(
    conn: sa.Connection, run_id: int, key_id: int, points: int, hi: int | None
) -> Points:
    """The series' points at or before ``hi`` from the first step of its newest chunks that
    hold ``points`` of them (all of them when the chunks hold fewer, or when head rows that
    replaced sealed values leave fewer): a reader of the newest points decodes those chunks
    only, not the whole run (the doctor reads a 1M-step run's last 20,000 points)."""
    query = sa.select(_C.first_step, _C.count).where(_C.run_id == run_id, _C.key_id == key_id)
    if hi is not None:
        query = query.where(_C.first_step <= hi)
    lo = None
    held = 0
    for first, count in conn.execute(query.order_by(_C.first_step.desc())).all():
        held += count
        if held >= points:
            lo = first
            break
    found = read_points_in(conn, run_id, key_id, lo, hi)
    if lo is not None and len(found) < points:
        found = read_points_in(conn, run_id, key_id, None, hi)
    return found


def read_window_many(
    conn: sa.Connection, run_ids: Sequence[int], key_id: int, lo: int, hi: int
) -> dict[int, Points]:
    """:func:`read_points_in` of [``lo``, ``hi``] for several runs in two statements (their
    chunks, their head rows): what a workspace of many runs' charts reads."""
    if not run_ids:
        return {}
    p = "%s" if conn.dialect.name == "postgresql" else "?"
    runs = ", ".join([p] * len(run_ids))
    where = f"WHERE run_id IN ({runs}) AND key_id = {p}"
    params = [*run_ids, key_id, lo, hi]
    sealed: dict[int, list[Points]] = {}
    for run_id, data in _fetch(
        conn,
        f"SELECT run_id, data FROM metric_chunks {where} AND last_step >= {p} "
        f"AND first_step <= {p} ORDER BY run_id, first_step",
        params,
    ):
        sealed.setdefault(run_id, []).append(chunk_codec.decode(bytes(data)))
    heads: dict[int, list[Any]] = {}
    for row in _fetch(
        conn,
        f"SELECT run_id, step, seq, wall_ms, value FROM metric_points {where} "
        f"AND step >= {p} AND step <= {p} ORDER BY run_id, step, seq",
        params,
    ):
        heads.setdefault(row[0], []).append(row)
    out = {}
    for run_id in run_ids:
        rows = heads.get(run_id)
        head = _EMPTY
        if rows:
            _runs, steps, seqs, walls, values = zip(*rows, strict=True)
            head = Points.of(steps, values, walls, seqs)
        parts = sealed.get(run_id)
        if not parts:
            out[run_id] = head
            continue
        merged = chunk_codec.merge(_concat(parts), head)
        keep = (merged.steps >= lo) & (merged.steps <= hi)
        out[run_id] = merged if keep.all() else _take(merged, keep)
    return out


def _head(
    conn: sa.Connection,
    run_id: int,
    key_id: int,
    lo: int | None,
    hi: int | None,
    limit: int | None = None,
) -> Points:
    """The head rows of a series (a step range, the first ``limit``) as columns, read on
    the driver's cursor: SQLAlchemy's per-row result handling was half of a seal's time."""
    p = "%s" if conn.dialect.name == "postgresql" else "?"
    sql = f"SELECT step, seq, wall_ms, value FROM metric_points WHERE run_id = {p} AND key_id = {p}"
    params: list[int] = [run_id, key_id]
    if lo is not None:
        sql += f" AND step >= {p}"
        params.append(lo)
    if hi is not None:
        sql += f" AND step <= {p}"
        params.append(hi)
    sql += " ORDER BY step, seq"
    if limit is not None:
        sql += f" LIMIT {p}"
        params.append(limit)
    rows = _fetch(conn, sql, params)
    if not rows:
        return _EMPTY
    steps, seqs, walls, values = zip(*rows, strict=True)
    return Points.of(steps, values, walls, seqs)  # a NULL value (NaN) becomes NaN


def _fetch(conn: sa.Connection, sql: str, params: Sequence[object]) -> list[Any]:
    """Rows of ``sql`` on the driver's cursor, in the connection's transaction."""
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql, params)
        return list(cur.fetchall())
    finally:
        cur.close()


def _concat(parts: Sequence[Points]) -> Points:
    if not parts:
        return _EMPTY
    if len(parts) == 1:
        return parts[0]
    return Points(
        np.concatenate([p.steps for p in parts]),
        np.concatenate([p.seqs for p in parts]),
        np.concatenate([p.walls for p in parts]),
        np.concatenate([p.values for p in parts]),
    )


def _take(p: Points, index: np.ndarray) -> Points:
    return Points(p.steps[index], p.seqs[index], p.walls[index], p.values[index])


def _cut(p: Points, size: int) -> list[Points]:
    """``p`` in pieces of at most ``size`` points (more when one step has more values),
    cut between steps only."""
    out = []
    start, n = 0, len(p)
    while start < n:
        end = min(start + size, n)
        while end < n and p.steps[end] == p.steps[end - 1]:
            end += 1
        out.append(_take(p, slice(start, end)))  # type: ignore[arg-type]
        start = end
    return out


def _chunk_row(run_id: int, key_id: int, part: Points) -> dict[str, object]:
    head = chunk_codec.summary(part)
    return {
        "run_id": run_id,
        "key_id": key_id,
        "first_step": head.first_step,
        "last_step": head.last_step,
        "count": head.count,
        "min_value": head.min,
        "max_value": head.max,
        "last_value": head.last,
        "last_wall_ms": int(part.walls[-1]),
        "nan_count": head.nan_count,
        "posinf_count": head.posinf_count,
        "neginf_count": head.neginf_count,
        "data": chunk_codec.encode(part),
    }
