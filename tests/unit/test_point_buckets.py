"""The bucket rule over packed points (tracker.rules.point_buckets) is downsample's: for any
points -- NaN, +-Inf, -0.0, several MLflow values at a step, steps outside the window --
and any window and bucket count, the buckets equal ``downsample``'s and each bucket's wall
time is its last point's (what the SQL read of the head rows answers)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.rules.chunk_codec import Points
from tracker.rules.downsample import Bucket, BucketColumns, Grid, Series, downsample
from tracker.rules.point_buckets import downsample_points

VALUES = st.sampled_from([0.0, -0.0, 1.5, -2.0, 7.0, math.nan, math.inf, -math.inf, 1e300])


@st.composite
def series(draw: st.DrawFn) -> Points:
    n = draw(st.integers(0, 60))
    steps: list[int] = []
    seqs: list[int] = []
    step = draw(st.integers(0, 50))
    for _ in range(n):
        if steps and draw(st.integers(0, 4)) == 0:  # another MLflow value at this step
            seqs.append(seqs[-1] + 1)
        else:
            step += draw(st.integers(1, 40)) if steps else 0
            seqs.append(0)
        steps.append(step)
    values = draw(st.lists(VALUES, min_size=n, max_size=n))
    walls = draw(st.lists(st.integers(0, 10**12), min_size=n, max_size=n))
    return Points.of(steps, values, walls, seqs)


def _key(b: Bucket) -> tuple[Any, ...]:
    last = "nan" if math.isnan(b.last) else (b.last, math.copysign(1, b.last))
    return (b.first_step, b.last_step, b.min, b.max, last, b.count, b.nan_count,
            b.posinf_count, b.neginf_count)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(p=series(), lo=st.integers(0, 900), width=st.integers(0, 1500), count=st.integers(1, 40))
def test_the_buckets_are_downsamples(p: Points, lo: int, width: int, count: int) -> None:
    grid = Grid.over(lo, lo + width, count)
    got, walls = downsample_points(p, grid)
    values = [None if math.isnan(v) else v for v in p.values.tolist()]
    want = downsample(p.steps.tolist(), values, count, grid.lo, grid.hi)
    assert (got.lo, got.hi) == (want.lo, want.hi)
    assert [_key(b) for b in got.buckets] == [_key(b) for b in want.buckets]
    # the wall time of each bucket's last point: at its last step, the last value's
    last_wall = {s: w for s, w in zip(p.steps.tolist(), p.walls.tolist(), strict=True)}
    assert walls == [last_wall[b.last_step] for b in want.buckets]
    # the columns the workspace sends, read before any Bucket object is built: the buckets'
    fresh, _ = downsample_points(p, grid)
    assert _columns(fresh.columns()) == _columns(want.columns())


def _columns(c: BucketColumns) -> tuple[Any, ...]:
    numbers = c.last_step + c.nonfinite
    assert all(type(x) is int for x in numbers)  # JSON numbers, not numpy's or bools
    assert all(x is None or type(x) is float for x in c.min + c.max + c.last)
    last = ["nan" if math.isnan(v) else (v, math.copysign(1, v)) for v in c.last]
    return c.last_step, last, c.min, c.max, c.nonfinite


def test_a_series_of_columns_equals_the_series_of_its_buckets() -> None:
    p = Points.of([1, 2, 3, 5, 8], [0.5, math.inf, 2.0, -1.0, 3.0], [10, 20, 30, 40, 50])
    for count in (2, 10):  # grouped, and a bucket per point
        grid = Grid.over(0, 9, count)
        got, _ = downsample_points(p, grid)
        want = downsample(p.steps.tolist(), p.values.tolist(), count, grid.lo, grid.hi)
        assert type(got) is not Series
        assert got == want and want == got and hash(got) == hash(want)
        assert got.point_count == 5 and got.buckets is got.buckets  # built once
    other, _ = downsample_points(Points.of([1], [0.25], [1]), Grid.over(0, 9, 2))
    assert other != want


def test_a_hundred_thousand_points_group_into_a_thousand_buckets() -> None:
    steps = np.arange(100_000, dtype=np.int64)
    p = Points.of(steps, np.sin(steps / 1000.0), steps * 10)
    got, walls = downsample_points(p, Grid.over(0, 99_999, 1000))
    assert len(got.buckets) == 1000 and got.point_count == 100_000
    assert got.buckets[0].count == 100 and walls[-1] == 999_990


@settings(max_examples=300, deadline=None)
@given(p=series(), width=st.sampled_from([1, 3, 16, 256]))
def test_level_rows_are_the_rollup_rule(p: Points, width: int) -> None:
    from tracker.rules.downsample import level
    from tracker.rules.point_buckets import level_rows

    rows = level_rows(p, width)
    values = [None if math.isnan(v) else v for v in p.values.tolist()]
    want = level(p.steps.tolist(), values, width)
    assert [r[0] for r in rows] == [b.first_step // width for b in want]
    got = [
        Bucket(first, last, lo, hi, math.nan if v is None else v, c, a, b, d)
        for _i, first, last, _w, lo, hi, v, c, a, b, d in rows
    ]
    assert [_key(b) for b in got] == [_key(b) for b in want]
    last_wall = {s: w for s, w in zip(p.steps.tolist(), p.walls.tolist(), strict=True)}
    assert [r[3] for r in rows] == [last_wall[b.last_step] for b in want]


@settings(max_examples=300, deadline=None)
@given(
    runs=st.lists(series(), min_size=1, max_size=3),
    width=st.sampled_from([1, 3, 16, 256]),
    lo=st.integers(0, 900),
    span=st.integers(0, 1500),
    count=st.integers(1, 40),
)
def test_level_rows_grouped_onto_a_grid_are_merge_buckets(
    runs: list[Points], width: int, lo: int, span: int, count: int
) -> None:
    """What a chart reads from a rollup level (tracker.store.series._group_level): the
    level's rows in the window, per run, grouped as merge_buckets groups them."""
    from tracker.rules.downsample import level, merge_buckets
    from tracker.rules.point_buckets import level_rows, series_by_run

    grid = Grid.over(lo, lo + span, count)
    rows = [
        (run_id, *row[1:])
        for run_id, p in enumerate(runs, start=7)
        for row in level_rows(p, width)
        if row[2] >= grid.lo and row[1] <= grid.hi  # the store's window filter
    ]
    got = series_by_run(rows, grid)
    for run_id, p in enumerate(runs, start=7):
        values = [None if math.isnan(v) else v for v in p.values.tolist()]
        buckets = list(level(p.steps.tolist(), values, width))
        want = merge_buckets(buckets, count, grid.lo, grid.hi) if buckets else Series((), 0, 0)
        if not want.buckets:
            assert run_id not in got
            continue
        series, walls = got[run_id]
        assert [_key(b) for b in series.buckets] == [_key(b) for b in want.buckets]
        assert _columns(series_by_run(rows, grid)[run_id][0].columns()) == _columns(want.columns())
        last_wall = {s: w for s, w in zip(p.steps.tolist(), p.walls.tolist(), strict=True)}
        assert walls == [last_wall[b.last_step] for b in want.buckets]
