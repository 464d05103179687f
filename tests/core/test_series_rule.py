"""The chart reads that group in SQL (``tracker.store.series`` over the points and the rollup
levels of ``tracker.store.rollups``) return exactly what the pure bucket rule
(``tracker.rules.downsample``) gives for the same points, on real SQLite and PostgreSQL.

Random series hold NaN, ±Inf, signed zeros and huge values, steps logged twice (the last value
kept) and steps holding several values (MLflow's route keeps each, in order), in rows or
sealed into chunks (``tracker.store.chunks``: at the end, or after every batch so that later
batches write over sealed steps). The row budget
of a read is lowered so that small series also take the grouped paths: the points grouped in
SQL and every rollup level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tracker.rules.downsample import (
    DownsampleError,
    Series,
    downsample,
    level,
    merge_buckets,
)
from tracker.store import Store, chunks
from tracker.store import series as store_series
from tracker.store.metrics import append_points, intern_keys, write_points
from tracker.store.rollups import LEVELS
from tracker.store.runs import create_run
from tracker.store.series import read_series

Point = tuple[int, int, float]  # step, wall_ms, value (NaN for NaN), in (step, seq) order

VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308]),
)


@st.composite
def series_cases(draw: st.DrawFn) -> dict[str, Any]:
    # Step scales: dense, then sparse over a few buckets of each rollup level.
    top = draw(st.sampled_from([40, *(3 * width for width in LEVELS)]))
    size = draw(st.integers(0, 120))
    steps = draw(st.lists(st.integers(0, top), min_size=size, max_size=size))
    steps += draw(st.lists(st.sampled_from(steps), max_size=10)) if steps else []  # twice
    rows = [(s, draw(VALUES)) for s in draw(st.permutations(steps))]
    window = draw(st.one_of(st.none(), st.tuples(st.integers(0, top), st.integers(0, top))))
    return {
        "rows": rows,
        "mlflow": draw(st.booleans()),  # keep every value of a step (seq) or the last one
        "batches": draw(st.integers(1, 4)),
        "window": None if window is None else tuple(sorted(window)),
        "half_open": draw(st.sampled_from([None, "lo", "hi"])),
        "max_buckets": draw(st.one_of(st.integers(1, 8), st.integers(1, 40))),
        "row_budget": draw(st.sampled_from([2, 5, 9, 30, 80, store_series.ROW_BUDGET])),
        # both layouts: rows only, sealed into chunks at the end, or after every batch (the
        # later batches then write over sealed steps)
        "seal": draw(st.sampled_from([None, "end", "each batch"])),
        "chunk_points": draw(st.integers(1, 12)),
    }


def stored_points(rows: Sequence[tuple[int, float]], mlflow: bool) -> list[Point]:
    """What the store keeps of ``rows`` (wall time = the row's position): every value of a
    step in the order logged (MLflow), or the last value logged at each step."""
    logged = [(step, wall, value) for wall, (step, value) in enumerate(rows)]
    if mlflow:
        return sorted(logged, key=lambda p: p[0])  # stable: the order logged within a step
    return sorted({p[0]: p for p in logged}.values())


def expected(points: Sequence[Point], source: str, lo: int, hi: int, n: int) -> Series:
    if source == "points":
        return downsample([p[0] for p in points], [p[2] for p in points], n, lo, hi)
    width = int(source.removeprefix("rollup-"))
    rollup = level([p[0] for p in points], [p[2] for p in points], width)
    return merge_buckets(rollup, n, lo, hi)


def comparable(series: Series) -> list[tuple[Any, ...]]:
    """Buckets as tuples in which NaN equals NaN."""
    return [
        (b.first_step, b.last_step, b.min, b.max, "nan" if math.isnan(b.last) else b.last,
         b.count, b.nan_count, b.posinf_count, b.neginf_count)
        for b in series.buckets
    ]  # fmt: skip


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(series_cases())
def test_sql_reads_equal_the_pure_rule(
    store: Store, monkeypatch: pytest.MonkeyPatch, case: dict[str, Any]
) -> None:
    monkeypatch.setattr(store_series, "ROW_BUDGET", case["row_budget"])
    run = create_run(store, "p")
    kid = intern_keys(store, ["m"])["m"]
    rows = [
        (run.id, kid, step, wall, None if math.isnan(value) else value)
        for wall, (step, value) in enumerate(case["rows"])
    ]
    size = -(-len(rows) // case["batches"]) or 1
    for i in range(0, len(rows), size):
        if case["mlflow"]:
            append_points(store, rows[i : i + size])
        else:
            write_points(store, rows[i : i + size])
        if case["seal"] == "each batch" or (case["seal"] and i + size >= len(rows)):
            chunks.seal(store, run.id, kid, chunk_points=case["chunk_points"])
    points = stored_points(case["rows"], case["mlflow"])
    lo = hi = None
    if case["window"] is not None:
        lo, hi = case["window"]
        lo = None if case["half_open"] == "lo" else lo
        hi = None if case["half_open"] == "hi" else hi

    if points:
        first, last = points[0][0], points[-1][0]
        if (first if lo is None else lo) > (last if hi is None else hi):
            with pytest.raises(DownsampleError):  # a half-open window past the data
                read_series(store, run.id, "m", lo=lo, hi=hi, max_buckets=case["max_buckets"])
            return

    got = read_series(store, run.id, "m", lo=lo, hi=hi, max_buckets=case["max_buckets"])
    event(f"source {got.source}, {'full' if got.series.full_resolution else 'grouped'}")

    if not points and (lo is None or hi is None):
        assert got.series.buckets == () and got.source == "points"
        return
    lo = points[0][0] if lo is None else lo
    hi = points[-1][0] if hi is None else hi
    want = expected(points, got.source, lo, hi, case["max_buckets"])
    assert (got.series.lo, got.series.hi) == (want.lo, want.hi)
    assert comparable(got.series) == comparable(want)
    last_wall = {p[0]: p[1] for p in points}  # the step's last value's wall time
    assert got.wall_ms == [last_wall[b.last_step] for b in want.buckets]
    within = [p for p in points if lo <= p[0] <= hi]
    assert sum(b.count for b in got.series.buckets) >= len(within)
    if got.source == "points":
        assert sum(b.count for b in got.series.buckets) == len(within)
