"""The runs table's group rows (tracker.rules.group_series.group_table and summarize): which
group each run falls in, the groups' order, status counts and metric summaries; and, for any
runs, that every run lands in exactly one group and each summary bounds its mean."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.rules.group_series import (
    GroupError,
    MetricSummary,
    TableRun,
    group_table,
    summarize,
)


def run(
    run_id: int,
    status: str = "finished",
    config: dict[str, Any] | None = None,
    tags: list[str] | None = None,
    **metrics: Any,
) -> TableRun:
    return TableRun(run_id, status, config or {}, tags or [], metrics)


def test_groups_follow_the_tables_order_and_none_comes_last() -> None:
    runs = [
        run(1, config={"lr": 0.1}, acc=0.5),
        run(2, config={}, acc=0.9),
        run(3, config={"lr": 0.01}, acc=0.7),
        run(4, "failed", config={"lr": 0.1}, acc=0.3),
        run(5, config={"lr": 1e-1}, acc=float("nan")),
    ]
    groups = group_table("config.lr", runs, ["acc", "loss"])
    assert [g.label for g in groups] == ["lr=0.1", "lr=0.01", "lr=(none)"]
    first = groups[0]
    assert first.run_ids == (1, 4, 5) and first.size == 3 and first.value == 0.1
    assert first.statuses == {"finished": 2, "failed": 1}
    assert first.metrics["acc"] == MetricSummary(mean=pytest.approx(0.4), min=0.3, max=0.5, n=2)
    assert first.metrics["loss"] == MetricSummary(None, None, None, 0)
    assert groups[2].run_ids == (2,) and groups[2].value is None


def test_equal_numbers_form_one_group_and_tags_group_by_value() -> None:
    runs = [run(1, config={"n": 1}), run(2, config={"n": 1.0}), run(3, config={"n": "1"})]
    assert [g.run_ids for g in group_table("config.n", runs)] == [(1, 2), (3,)]
    tagged = [run(1, tags=["opt=sgd"]), run(2, tags=["opt=adam", "x"]), run(3, tags=["x"])]
    assert [(g.label, g.run_ids) for g in group_table("tag.opt", tagged)] == [
        ("opt=sgd", (1,)),
        ("opt=adam", (2,)),
        ("opt=(none)", (3,)),
    ]


def test_a_text_value_none_in_parentheses_is_not_the_missing_group() -> None:
    runs = [run(1, config={}), run(2, config={"k": "(none)"})]
    assert [g.run_ids for g in group_table("config.k", runs)] == [(2,), (1,)]


def test_statuses_most_first() -> None:
    runs = [run(1, "failed"), run(2, "finished"), run(3, "finished"), run(4, "crashed")]
    (only,) = group_table("config.lr", runs)
    assert list(only.statuses.items()) == [("finished", 2), ("crashed", 1), ("failed", 1)]


@pytest.mark.parametrize("by", ["", "config", "config.", "lr", "tags.opt", "metrics.acc"])
def test_a_bad_key_names_the_field(by: str) -> None:
    with pytest.raises(GroupError) as caught:
        group_table(by, [run(1)])
    assert caught.value.field == "group" and "config.<key>" in str(caught.value)


def test_summary_leaves_out_what_is_not_a_finite_number() -> None:
    got = summarize([1.0, None, float("inf"), "NaN", True, 3, float("-inf")])
    assert got == MetricSummary(mean=2.0, min=1.0, max=3.0, n=2)
    assert summarize([1e308, 1e308]).mean == 1e308  # the sum overflows; the mean does not


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["a", "b", "(none)", ""]),
)
runs_st = st.lists(
    st.tuples(
        st.sampled_from(["finished", "failed", "running", "crashed"]),
        st.one_of(st.just({}), st.builds(lambda v: {"k": v}, values)),
        st.lists(st.sampled_from(["opt=a", "opt=b", "x", "opt="]), max_size=3),
        st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=1),
    ),
    max_size=30,
)


@given(runs_st, st.sampled_from(["config.k", "tag.opt", "tags"]))
def test_every_run_in_exactly_one_group_in_table_order(raw: list[Any], by: str) -> None:
    runs = [
        run(i, status, config, tags, m=metric[0])
        for i, (status, config, tags, metric) in enumerate(raw)
    ]
    groups = group_table(by, runs, ["m"])
    ids = [i for g in groups for i in g.run_ids]
    assert sorted(ids) == list(range(len(runs)))
    for g in groups:
        assert list(g.run_ids) == sorted(g.run_ids)  # members in the table's order
        assert sum(g.statuses.values()) == g.size
        s = g.metrics["m"]
        finite = [x for x in (runs[i].metrics["m"] for i in g.run_ids) if math.isfinite(x)]
        assert s.n == len(finite)
        if finite:
            assert s.min is not None and s.max is not None and s.mean is not None
            assert (
                s.min <= s.mean <= s.max
                or math.isclose(s.mean, s.min)
                or math.isclose(s.mean, s.max)
            )
        else:
            assert s.mean is None
    firsts = [g.run_ids[0] for g in groups if not (g.value is None and g.label.endswith("(none)"))]
    assert firsts == sorted(firsts)
