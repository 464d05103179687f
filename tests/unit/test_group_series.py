"""Group-by of the workspace (tracker.rules.group_series): which group a run falls in, and how
the members' series aggregate on a shared grid. Table-driven cases, then properties."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.rules.downsample import Grid, Series, downsample
from tracker.rules.group_series import GroupError, aggregate, check_group_by, group_runs

RUNS = [
    (1, {"lr": 0.01, "seed": 0, "model": {"width": 64}}, ["opt=adam", "baseline"]),
    (2, {"lr": 0.01, "seed": 1, "model": {"width": 64}}, ["opt=sgd"]),
    (3, {"lr": 0.1, "seed": 0, "model": {"width": 128}}, ["opt=adam"]),
    (4, {"lr": 1e-3, "seed": 0}, []),
    (5, {"seed": 2}, ["opt=adam", "baseline"]),
    (6, {"lr": 0.010, "seed": 3}, ["baseline"]),
]


@pytest.mark.parametrize(
    ("by", "expected"),
    [
        (
            "config.lr",
            [("lr=0.001", (4,)), ("lr=0.01", (1, 2, 6)), ("lr=0.1", (3,)), ("lr=(none)", (5,))],
        ),
        (
            "config.model.width",
            [
                ("model.width=64", (1, 2)),
                ("model.width=128", (3,)),
                ("model.width=(none)", (4, 5, 6)),
            ],
        ),
        ("tag.opt", [("opt=adam", (1, 3, 5)), ("opt=sgd", (2,)), ("opt=(none)", (4, 6))]),
        (
            "tags",
            [
                ("tags=baseline", (6,)),
                ("tags=baseline,opt=adam", (1, 5)),
                ("tags=opt=adam", (3,)),
                ("tags=opt=sgd", (2,)),
                ("tags=(none)", (4,)),
            ],
        ),
    ],
)
def test_runs_fall_in_the_group_of_their_value(
    by: str, expected: list[tuple[str, tuple[int, ...]]]
) -> None:
    groups = group_runs(by, RUNS)
    assert [(g.label, g.run_ids) for g in groups] == expected
    assert sum(g.size for g in groups) == len(RUNS)


def test_equal_settings_are_one_group_and_a_flag_is_not_a_count() -> None:
    runs = [(1, {"a": 1}, []), (2, {"a": 1.0}, []), (3, {"a": True}, []), (4, {"a": "1"}, [])]
    assert [g.run_ids for g in group_runs("config.a", runs)] == [(1, 2), (4,), (3,)]


@pytest.mark.parametrize("by", ["", "lr", "config.", "tag.", "metrics.loss", "tags.x", "config"])
def test_an_unknown_group_by_names_the_rule(by: str) -> None:
    with pytest.raises(GroupError, match=r"config\.<key>") as found:
        check_group_by(by)
    assert found.value.field == "group"


def series(points: dict[int, float], grid: Grid) -> Series:
    steps = sorted(points)
    return downsample(steps, [points[s] for s in steps], grid.count, grid.lo, grid.hi)


def test_members_aggregate_per_grid_bucket_mean_and_min_max() -> None:
    grid = Grid.over(0, 9, 5)  # buckets of 2 steps
    a = series({s: float(s) for s in range(10)}, grid)  # last of bucket i: 2i + 1
    b = series({s: 10.0 + s for s in range(0, 6)}, grid)  # ends at step 5: buckets 0..2
    out = aggregate([a, b], grid, center="mean", band="minmax")
    assert out.step == (1, 3, 5, 7, 9)
    assert out.n == (2, 2, 2, 1, 1)
    assert out.center == (6.0, 8.0, 10.0, 7.0, 9.0)
    assert out.lo == (1.0, 3.0, 5.0, 7.0, 9.0)
    assert out.hi == (11.0, 13.0, 15.0, 7.0, 9.0)


def test_median_std_and_no_band() -> None:
    grid = Grid.over(0, 0, 1)
    members = [series({0: v}, grid) for v in (1.0, 2.0, 10.0)]
    assert aggregate(members, grid, center="median", band="none").center == (2.0,)
    assert aggregate(members, grid, center="median", band="none").lo == (None,)
    out = aggregate(members, grid, center="mean", band="std")
    spread = statistics.pstdev([1.0, 2.0, 10.0])
    assert out.center == pytest.approx((13 / 3,))
    assert out.lo == pytest.approx((13 / 3 - spread,))
    assert out.hi == pytest.approx((13 / 3 + spread,))


def test_a_nan_member_does_not_count_and_an_all_nan_bucket_is_a_gap() -> None:
    grid = Grid.over(0, 1, 2)
    a = series({0: math.nan, 1: 3.0}, grid)
    b = series({0: math.nan, 1: math.inf}, grid)
    out = aggregate([a, b], grid)
    assert (out.step, out.center, out.n) == ((1,), (3.0,), (1,))


@pytest.mark.parametrize(
    ("center", "band", "field"), [("avg", "minmax", "agg"), ("mean", "iqr", "band")]
)
def test_an_unknown_aggregation_names_its_field(center: str, band: str, field: str) -> None:
    with pytest.raises(GroupError) as found:
        aggregate([], Grid.over(0, 1, 1), center=center, band=band)
    assert found.value.field == field


VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 0.0]),
)
MEMBER = st.dictionaries(st.integers(0, 200), VALUES, max_size=60)


@given(
    members=st.lists(MEMBER, max_size=6),
    count=st.integers(1, 40),
    center=st.sampled_from(["mean", "median"]),
    band=st.sampled_from(["minmax", "std", "none"]),
)
def test_aggregate_properties(
    members: list[dict[int, float]], count: int, center: str, band: str
) -> None:
    """Whatever the members hold: every number is finite, n counts the members with a finite
    last value in that grid bucket, the band holds the centre, steps rise."""
    grid = Grid.over(0, 200, count)
    out = aggregate([series(m, grid) for m in members], grid, center=center, band=band)
    assert list(out.step) == sorted(set(out.step))
    for i, step in enumerate(out.step):
        index = grid.index(step)
        lasts = []
        for m in members:
            inside = [s for s in sorted(m) if grid.index(s) == index]
            if inside and math.isfinite(m[inside[-1]]):
                lasts.append(m[inside[-1]])
        assert out.n[i] == len(lasts) > 0
        assert math.isfinite(out.center[i])
        assert (
            min(lasts) - 1e-9 * abs(min(lasts))
            <= out.center[i]
            <= max(lasts) + 1e-9 * abs(max(lasts))
        )
        if band == "minmax":
            assert (out.lo[i], out.hi[i]) == (min(lasts), max(lasts))
        if band == "std":
            assert out.lo[i] <= out.center[i] <= out.hi[i] or center == "median"
        if band == "none":
            assert out.lo[i] is None and out.hi[i] is None


CONFIG_VALUES = st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.booleans(), st.none())
RUN = st.tuples(
    st.dictionaries(st.text(max_size=3), CONFIG_VALUES, max_size=3),
    st.lists(st.text(min_size=1, max_size=5), max_size=3),
)


@given(st.lists(RUN, max_size=12), st.sampled_from(["config.a", "config.", "tag.k", "tags"]))
def test_group_runs_puts_every_run_in_exactly_one_group(runs: list, by: str) -> None:
    numbered = [(i, config, tags) for i, (config, tags) in enumerate(runs)]
    if by == "config.":
        with pytest.raises(GroupError):
            group_runs(by, numbered)
        return
    groups = group_runs(by, numbered)
    assert sorted(i for g in groups for i in g.run_ids) == list(range(len(runs)))
    assert len({g.label for g in groups}) <= len(groups)
