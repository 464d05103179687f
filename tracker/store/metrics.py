"""Metrics of runs: key names, writing points (the client's rows, MLflow's every-value
appends), their chart rollups, and reading them back (keys, a series' history, last values).

The row-level writers live in :mod:`tracker.store.points`; the chart reads in
:mod:`tracker.store.series`. Every function takes the open :class:`~tracker.store.store.Store`
first.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.entities import AttemptFence, MetricPoint
from tracker.store import models as m
from tracker.store import points
from tracker.store.engine import read_conn, write_begin
from tracker.store.rows import dialect_insert
from tracker.store.store import Store

if TYPE_CHECKING:
    from tracker.rules.chunk_codec import Points


def intern_keys(store: Store, names: Iterable[str]) -> dict[str, int]:
    """Ids for metric key names, creating the missing ones (safe under concurrency)."""
    names = sorted(set(names))
    if not names:
        return {}
    with write_begin(store.engine) as conn:
        ins = dialect_insert(conn)(m.MetricKeyRow).on_conflict_do_nothing(index_elements=["name"])
        conn.execute(ins, [{"name": n} for n in names])
        rows = conn.execute(
            sa.select(m.MetricKeyRow.name, m.MetricKeyRow.id).where(m.MetricKeyRow.name.in_(names))
        ).all()
    return {name: key_id for name, key_id in rows}


def write_points(
    store: Store,
    rows: Sequence[points.Row],
    last: Sequence[points.Row] | None = None,
    bounds: dict[tuple[int, int], tuple[int, int]] | None = None,
    *,
    refresh_rollups: bool = True,
    fence: AttemptFence | None = None,
    packed: Sequence[Any] = (),
) -> None:
    """Store ``(run_id, key_id, step, wall_ms, value)`` rows idempotently (NaN or None
    for NaN), and ``packed`` series as chunks. See :func:`tracker.store.points.write_rows`
    (its ``fence`` and ``packed``)."""
    points.write_rows(
        store.engine,
        rows,
        last,
        bounds,
        refresh_rollups=refresh_rollups,
        fence=fence,
        packed=packed,
    )


def append_points(store: Store, rows: Sequence[points.Row]) -> int:
    """Store rows keeping every value of a step (MLflow's semantics); a row equal to a
    stored one in step, wall time and value is skipped. Returns how many were stored.
    See :func:`tracker.store.points.append_rows`."""
    return points.append_rows(store.engine, rows)


def refresh_rollups(
    store: Store,
    bounds: dict[tuple[int, int], tuple[int, int]],
    *,
    chunk_points: int | None = None,
    budget_s: float | None = None,
) -> dict[tuple[int, int], tuple[int, int]]:
    """Recompute the chart rollups of ``{(run_id, key_id): (lo, hi)}`` step ranges in
    short transactions (``chunk_points`` points each; by default as many as take about
    a quarter second here); returns the ranges left once ``budget_s`` is spent. See
    :func:`tracker.store.points.refresh_rollups`."""
    sizing = store.rollup_sizer if chunk_points is None else chunk_points
    return points.refresh_rollups(store.engine, bounds, chunk_points=sizing, budget_s=budget_s)


def log_metrics(
    store: Store, run_id: int, step: int, values: dict[str, float], wall_time: float | None = None
) -> None:
    """Convenience for tools and tests: store one step of metrics synchronously."""
    wall_ms = int((time.time() if wall_time is None else wall_time) * 1000)
    ids = intern_keys(store, values)
    rows = [
        (run_id, ids[k], step, wall_ms, None if math.isnan(v) else float(v))
        for k, v in values.items()
    ]
    write_points(store, rows)


def metric_keys(store: Store, run_id: int) -> list[str]:
    query = (
        sa.select(m.MetricKeyRow.name)
        .join(m.MetricSummaryRow, m.MetricSummaryRow.key_id == m.MetricKeyRow.id)
        .where(m.MetricSummaryRow.run_id == run_id)
        .order_by(m.MetricKeyRow.name)
    )
    with read_conn(store.engine) as conn:
        return list(conn.execute(query).scalars())


def metric_history(
    store: Store,
    run_id: int,
    key: str,
    *,
    lo: int | None = None,
    hi: int | None = None,
    limit: int | None = None,
) -> list[MetricPoint]:
    """Every point of one metric, by step (values logged at one step through MLflow in
    the order logged), optionally within [lo, hi]; with ``limit``, the first ``limit``
    of them and the rest of the last one's step (page on with ``lo`` = the last step +
    1). Sealed chunks and the head are merged (:mod:`tracker.store.chunks`)."""
    p = m.MetricPointRow
    key_id_of = sa.select(m.MetricKeyRow.id).where(m.MetricKeyRow.name == key)
    with read_conn(store.engine) as conn:
        key_id = conn.execute(key_id_of).scalar_one_or_none()
        if key_id is None:
            return []
        sealed = sealed_points(conn, run_id, key_id, lo, hi)
        if sealed is not None:
            return _history_of(sealed, limit)
        query = (
            sa.select(p.step, p.seq, p.wall_ms, p.value)
            .where(p.run_id == run_id, p.key_id == key_id)
            .order_by(p.step, p.seq)
        )
        if lo is not None:
            query = query.where(p.step >= lo)
        if hi is not None:
            query = query.where(p.step <= hi)
        rows = list(conn.execute(query if limit is None else query.limit(limit)))
        if limit is not None and rows and len(rows) >= limit:  # the step's other values
            step, seq = rows[-1][0], rows[-1][1]
            rows += conn.execute(query.where(p.step == step, p.seq > seq)).all()
    return [MetricPoint(s, w / 1000.0, v) for s, _, w, v in rows]


def sealed_points(
    conn: sa.Connection,
    run_id: int,
    key_id: int,
    lo: int | None = None,
    hi: int | None = None,
    *,
    newest: int | None = None,
) -> Points | None:
    """The points of a series that has sealed chunks, chunks and head merged
    (:func:`tracker.store.chunks.read_points_in`); None when it has none, so a reader keeps
    its own SQL over the head (and numpy is not imported). ``newest``: at least the newest
    that many points up to ``hi`` (or all), decoding only the chunks that hold them
    (:func:`tracker.store.chunks.read_tail_in`; ``lo`` is not used then)."""
    if not _has_chunks(conn, run_id, key_id):
        return None
    from tracker.store import chunks

    if newest is not None:
        return chunks.read_tail_in(conn, run_id, key_id, newest, hi)
    return chunks.read_points_in(conn, run_id, key_id, lo, hi)


def _has_chunks(conn: sa.Connection, run_id: int, key_id: int) -> bool:
    c = m.MetricChunkRow
    where = (c.run_id == run_id, c.key_id == key_id)
    return conn.execute(sa.select(sa.exists().where(*where))).scalar_one()


def _history_of(pts: Points, limit: int | None) -> list[MetricPoint]:
    n = len(pts)
    if limit is not None and n > limit:
        n = max(limit, 0)
        while 0 < n < len(pts) and pts.steps[n] == pts.steps[n - 1]:
            n += 1
    return [
        MetricPoint(s, w / 1000.0, v)
        for s, w, v in zip(
            pts.steps[:n].tolist(),
            pts.walls[:n].tolist(),
            pts.values[:n].tolist(),
            strict=True,
        )
    ]


def count_points(store: Store, run_id: int) -> int:
    """How many points ``run_id`` has, head rows and sealed chunks merged."""
    p = m.MetricPointRow
    with read_conn(store.engine) as conn:
        c = m.MetricChunkRow
        sealed = conn.execute(
            sa.select(c.key_id).where(c.run_id == run_id).distinct()
        ).scalars().all()  # fmt: skip
        query = sa.select(sa.func.count()).select_from(p).where(p.run_id == run_id)
        if sealed:
            query = query.where(p.key_id.not_in(sealed))
        head = conn.execute(query).scalar_one()
        if not sealed:
            return head
        from tracker.store import chunks  # numpy: only where a series is sealed

        return head + sum(len(chunks.read_points_in(conn, run_id, k, None, None)) for k in sealed)


def last_metrics(store: Store, run_ids: Sequence[int]) -> dict[int, dict[str, float]]:
    with read_conn(store.engine) as conn:
        return last_metrics_of(conn, run_ids)


def last_metrics_of(conn: sa.Connection, run_ids: Sequence[int]) -> dict[int, dict[str, float]]:
    """{run id: {metric name: last value}} for these runs (runs without metrics are absent)."""
    if not run_ids:
        return {}
    query = (
        sa.select(m.MetricSummaryRow.run_id, m.MetricKeyRow.name, m.MetricSummaryRow.last_value)
        .join(m.MetricKeyRow, m.MetricKeyRow.id == m.MetricSummaryRow.key_id)
        .where(m.MetricSummaryRow.run_id.in_(list(run_ids)))
    )
    out: dict[int, dict[str, float]] = {}
    for run_id, name, value in conn.execute(query):
        out.setdefault(run_id, {})[name] = value
    return out
