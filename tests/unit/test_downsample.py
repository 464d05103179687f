from __future__ import annotations

import json
import math
import random

import pytest

from tracker.errors import InvalidInput
from tracker.rules.downsample import (
    LAST_FINITE,
    LAST_NAN,
    LAST_NEGINF,
    LAST_POSINF,
    Bucket,
    DownsampleError,
    Grid,
    Series,
    combine,
    downsample,
    level,
    level_bucket,
    level_buckets,
    level_steps,
    merge_buckets,
    point_bucket,
    reduce_buckets,
    to_payload,
)

NAN = math.nan
INF = math.inf


def test_points_that_fit_come_back_at_full_resolution() -> None:
    series = downsample([0, 1, 2], [1.0, NAN, 3.0], max_buckets=3)
    assert series.full_resolution
    assert [b.first_step for b in series.buckets] == [0, 1, 2]
    assert series.buckets[0] == Bucket(0, 0, 1.0, 1.0, 1.0, 1, 0, 0, 0)
    nan_bucket = series.buckets[1]
    assert nan_bucket.min is None and nan_bucket.max is None
    assert math.isnan(nan_bucket.last) and nan_bucket.nan_count == 1 and nan_bucket.has_nan
    assert (series.lo, series.hi) == (0, 2)


def test_empty_input_gives_empty_series() -> None:
    series = downsample([], [], max_buckets=10)
    assert series == Series(buckets=(), lo=None, hi=None)
    assert series.point_count == 0


def test_equal_width_buckets_in_step_space() -> None:
    steps = list(range(100))
    values = [float(s) for s in steps]
    series = downsample(steps, values, max_buckets=4)
    assert [(b.first_step, b.last_step) for b in series.buckets] == [
        (0, 24),
        (25, 49),
        (50, 74),
        (75, 99),
    ]
    assert [b.count for b in series.buckets] == [25, 25, 25, 25]
    assert [(b.min, b.max, b.last) for b in series.buckets][1] == (25.0, 49.0, 49.0)
    assert not series.full_resolution


def test_buckets_follow_steps_not_point_index() -> None:
    # Dense logging early, sparse later: bucket boundaries stay at equal step widths.
    steps = [*range(0, 50), 100, 150, 199]
    series = downsample(steps, [1.0] * len(steps), max_buckets=4, lo=0, hi=199)
    assert [(b.first_step, b.last_step, b.count) for b in series.buckets] == [
        (0, 49, 50),
        (100, 100, 1),
        (150, 199, 2),
    ]


def test_single_step_spike_survives_as_bucket_max() -> None:
    steps = list(range(10_000))
    values = [1.0] * 10_000
    values[7_777] = 1e6
    series = downsample(steps, values, max_buckets=50)
    assert len(series.buckets) == 50
    assert max(b.max for b in series.buckets if b.max is not None) == 1e6
    spiky = [b for b in series.buckets if b.max == 1e6]
    assert len(spiky) == 1 and spiky[0].first_step <= 7_777 <= spiky[0].last_step
    assert spiky[0].last == 1.0  # last value of the bucket, not the spike


def test_negative_spike_survives_as_bucket_min() -> None:
    values = [0.5] * 1000
    values[3] = -42.0
    series = downsample(list(range(1000)), values, max_buckets=10)
    assert series.buckets[0].min == -42.0
    assert all(b.min == 0.5 for b in series.buckets[1:])


@pytest.mark.parametrize(
    ("bad", "nan", "posinf", "neginf", "has_inf"),
    [(NAN, 1, 0, 0, False), (INF, 0, 1, 0, True), (-INF, 0, 0, 1, True), (None, 1, 0, 0, False)],
)
def test_nonfinite_values_are_counted_and_excluded_from_min_max(
    bad: float | None, nan: int, posinf: int, neginf: int, has_inf: bool
) -> None:
    values: list[float | None] = [float(i) for i in range(1000)]
    values[500] = bad
    series = downsample(list(range(1000)), values, max_buckets=10)
    bucket = series.buckets[5]
    assert (bucket.nan_count, bucket.posinf_count, bucket.neginf_count) == (nan, posinf, neginf)
    assert bucket.has_inf is has_inf and bucket.has_nonfinite
    assert (bucket.min, bucket.max) == (501.0, 599.0)
    assert sum(b.nan_count + b.posinf_count + b.neginf_count for b in series.buckets) == 1


def test_bucket_of_only_nan_has_no_min_max_and_nan_last() -> None:
    steps = list(range(20))
    values = [1.0] * 10 + [NAN] * 10
    series = downsample(steps, values, max_buckets=2)
    second = series.buckets[1]
    assert second.min is None and second.max is None
    assert math.isnan(second.last) and second.nan_count == 10


def test_last_value_may_be_nonfinite() -> None:
    series = downsample([0, 1, 2, 3], [1.0, 2.0, 3.0, INF], max_buckets=2)
    assert series.buckets[1].last == INF
    assert series.buckets[1].max == 3.0


def test_window_keeps_only_points_inside_and_zoom_returns_full_resolution() -> None:
    steps = list(range(1000))
    values = [float(s) for s in steps]
    zoomed = downsample(steps, values, max_buckets=100, lo=200, hi=249)
    assert zoomed.full_resolution
    assert [b.first_step for b in zoomed.buckets] == list(range(200, 250))
    assert (zoomed.lo, zoomed.hi) == (200, 249)


def test_window_with_no_points_inside() -> None:
    series = downsample([0, 1, 2], [1.0, 2.0, 3.0], max_buckets=5, lo=10, hi=20)
    assert series.buckets == () and (series.lo, series.hi) == (10, 20)


def test_duplicate_steps_are_kept() -> None:
    series = downsample([0, 0, 1], [1.0, 5.0, 2.0], max_buckets=1)
    assert series.buckets == (Bucket(0, 1, 1.0, 5.0, 2.0, 3),)


def test_bucket_count_never_exceeds_max_and_counts_add_up() -> None:
    rng = random.Random(7)
    steps = sorted(rng.randrange(0, 10**6) for _ in range(5000))
    values = [rng.choice([rng.gauss(0, 1), NAN, INF]) for _ in steps]
    for max_buckets in (1, 3, 17, 256, 4999):
        series = downsample(steps, values, max_buckets)
        assert len(series.buckets) <= max_buckets
        assert series.point_count == 5000
        firsts = [b.first_step for b in series.buckets]
        assert firsts == sorted(firsts)
        for a, b in zip(series.buckets, series.buckets[1:], strict=False):
            assert a.last_step <= b.first_step


@pytest.mark.parametrize(
    ("kwargs", "field", "fragment"),
    [
        ({"steps": [0, 1], "values": [1.0]}, "values", "lengths differ"),
        ({"steps": [0, 2, 1], "values": [1.0, 2.0, 3.0]}, "steps", "steps[2]"),
        ({"steps": [0], "values": [1.0], "max_buckets": 0}, "max_buckets", ">= 1"),
        ({"steps": [0], "values": [1.0], "max_buckets": True}, "max_buckets", ">= 1"),
        ({"steps": [0], "values": [1.0], "lo": 5, "hi": 4}, "lo", "lo must be <= hi"),
    ],
)
def test_invalid_input_raises_downsample_error(kwargs: dict, field: str, fragment: str) -> None:
    kwargs.setdefault("max_buckets", 10)
    with pytest.raises(DownsampleError) as info:
        downsample(**kwargs)
    assert info.value.field == field
    assert fragment in str(info.value)
    assert isinstance(info.value, InvalidInput) and info.value.code == "invalid_downsample_request"


def test_combine_takes_min_of_mins_max_of_maxes_last_of_lasts() -> None:
    a = Bucket(0, 9, -1.0, 5.0, 2.0, 10, nan_count=1)
    b = Bucket(10, 19, None, None, INF, 3, posinf_count=2, neginf_count=1)
    c = Bucket(20, 29, 0.0, 9.0, 4.0, 10)
    assert combine([a, b, c]) == Bucket(0, 29, -1.0, 9.0, 4.0, 23, 1, 2, 1)
    assert combine([a, b]).last == INF


def test_combine_empty_raises() -> None:
    with pytest.raises(DownsampleError):
        combine([])


def test_merge_buckets_equals_downsampling_the_raw_points() -> None:
    rng = random.Random(3)
    steps = list(range(0, 20_000, 2))
    values = [rng.gauss(0, 1) for _ in steps]
    values[1234] = NAN
    values[4321] = 99.0
    fine = downsample(steps, values, max_buckets=1000)
    coarse = merge_buckets(fine.buckets, max_buckets=100)
    direct = downsample(steps, values, max_buckets=100)
    # Over the same window, fine bucket k falls inside coarse bucket k // 10 exactly.
    assert coarse.buckets == direct.buckets
    assert sum(b.nan_count for b in coarse.buckets) == 1
    assert max(b.max for b in coarse.buckets if b.max is not None) == 99.0


def test_merge_buckets_keeps_buckets_in_distinct_targets_and_filters_window() -> None:
    buckets = (Bucket(0, 9, 0.0, 1.0, 1.0, 10), Bucket(10, 19, 0.0, 2.0, 2.0, 10))
    assert merge_buckets(buckets, max_buckets=5).buckets == buckets
    only_second = merge_buckets(buckets, max_buckets=5, lo=12, hi=30)
    assert only_second.buckets == buckets[1:]
    # A bucket that straddles the window edge is kept whole.
    straddling = merge_buckets(buckets, max_buckets=26, lo=5, hi=30)
    assert straddling.buckets == buckets


def test_merge_buckets_combines_buckets_of_one_target_even_when_they_fit() -> None:
    # Two buckets whose first steps fall in one target bucket are combined, as the database
    # groups rollup rows (tracker.store.series), although two buckets would fit in five.
    buckets = (Bucket(0, 9, 0.0, 1.0, 1.0, 10), Bucket(10, 19, -1.0, 2.0, 2.0, 10))
    (merged,) = merge_buckets(buckets, max_buckets=5, lo=5, hi=30).buckets
    assert merged == Bucket(0, 19, -1.0, 2.0, 2.0, 20)


@pytest.mark.parametrize(
    ("lo", "hi", "count", "step", "index"),
    [
        (0, 9, 5, 0, 0),
        (0, 9, 5, 1, 0),
        (0, 9, 5, 2, 1),
        (0, 9, 5, 9, 4),
        (10, 12, 5, 11, 1),  # fewer steps than buckets: some buckets stay empty
        (100, 199, 3, 133, 0),
        (100, 199, 3, 134, 1),
        (100, 199, 3, 50, 0),  # before the window: the first bucket
        (0, 2**52, 1500, 2**52, 1499),  # the widest window the store reads stays exact
    ],
)
def test_grid_index_is_integer_arithmetic_over_the_window(
    lo: int, hi: int, count: int, step: int, index: int
) -> None:
    grid = Grid.over(lo, hi, count)
    assert grid.span == hi - lo + 1
    assert grid.index(step) == index


def test_grid_refuses_an_empty_window_or_no_buckets() -> None:
    with pytest.raises(DownsampleError, match="lo must be <= hi"):
        Grid.over(5, 4, 1)
    with pytest.raises(DownsampleError, match="integer >= 1") as info:
        Grid.over(0, 4, 0)
    assert info.value.field == "max_buckets"


@pytest.mark.parametrize(
    ("lo", "hi", "width", "buckets", "steps"),
    [
        (0, 0, 256, (0, 0), (0, 255)),
        (255, 256, 256, (0, 1), (0, 511)),
        (300, 9000, 8192, (0, 1), (0, 16383)),
        (8192, 8192, 8192, (1, 1), (8192, 16383)),
    ],
)
def test_level_buckets_and_the_steps_they_cover(
    lo: int, hi: int, width: int, buckets: tuple[int, int], steps: tuple[int, int]
) -> None:
    assert level_bucket(lo, width) == buckets[0]
    assert level_buckets(lo, hi, width) == buckets
    assert level_steps(lo, hi, width) == steps


def test_level_reduces_each_fixed_width_bucket_to_min_max_last() -> None:
    got = level([0, 3, 4, 9, 10], [2.0, NAN, -1.0, 7.0, INF], 4)
    assert got == (
        combine([point_bucket(0, 2.0), point_bucket(3, NAN)]),
        point_bucket(4, -1.0),
        combine([point_bucket(9, 7.0), point_bucket(10, INF)]),
    )
    assert got[0].min == got[0].max == 2.0 and math.isnan(got[0].last)
    assert got[2].max == 7.0 and got[2].last == INF and got[2].posinf_count == 1


def test_reduce_buckets_groups_by_index_of_first_step_in_index_order() -> None:
    points = [point_bucket(s, float(s)) for s in (1, 2, 5, 6, 7)]
    got = reduce_buckets(points, lambda step: step // 5)
    assert [(b.first_step, b.last_step, b.min, b.max, b.last) for b in got] == [
        (1, 2, 1.0, 2.0, 2.0),
        (5, 7, 5.0, 7.0, 7.0),
    ]
    assert point_bucket(3, None).nan_count == 1  # None is NaN, as the store keeps it


def test_merge_buckets_rejects_unsorted_input() -> None:
    with pytest.raises(DownsampleError, match="sorted by first_step"):
        merge_buckets([Bucket(10, 19, 0, 0, 0, 1), Bucket(0, 9, 0, 0, 0, 1)], max_buckets=1)


def test_merge_buckets_empty() -> None:
    assert merge_buckets([], max_buckets=3) == Series((), None, None)


def test_to_payload_is_json_safe_with_flags_for_nonfinite() -> None:
    series = downsample([0, 1, 2, 3], [1.5, NAN, INF, -INF], max_buckets=10)
    payload = to_payload(series)
    text = json.dumps(payload, allow_nan=False)  # raises if any NaN/Inf leaked through
    assert json.loads(text) == payload
    assert payload["resolution"] == "full"
    assert payload["first_step"] == [0, 1, 2, 3]
    assert payload["last"] == [1.5, None, None, None]
    assert payload["last_kind"] == [LAST_FINITE, LAST_NAN, LAST_POSINF, LAST_NEGINF]
    assert payload["min"] == [1.5, None, None, None]
    assert payload["nan"] == [0, 1, 0, 0]
    assert payload["posinf"] == [0, 0, 1, 0]
    assert payload["neginf"] == [0, 0, 0, 1]
    assert payload["count"] == [1, 1, 1, 1]


def test_to_payload_bucketed_columns_have_equal_length() -> None:
    series = downsample(list(range(100)), [float(i % 7) for i in range(100)], max_buckets=8)
    payload = to_payload(series)
    assert payload["resolution"] == "bucketed"
    columns = [v for v in payload.values() if isinstance(v, list)]
    assert len(columns) == 10
    assert {len(c) for c in columns} == {len(series.buckets)}
    assert payload["max"][0] == 6.0 and payload["min"][0] == 0.0
