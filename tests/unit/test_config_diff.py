from __future__ import annotations

import math
from typing import Any

import pytest

from tracker.rules.config_diff import MISSING, DiffRow, diff_configs


def test_diff_reports_values_per_run_sorted_by_key() -> None:
    rows = diff_configs(
        {
            "r1": {"lr": 0.1, "model": {"width": 64, "depth": 2}, "seed": 0},
            "r2": {"lr": 0.01, "model": {"width": 64, "depth": 2}, "seed": 0},
        }
    )
    assert [r.key for r in rows] == ["lr", "model.depth", "model.width", "seed"]
    assert rows[0] == DiffRow("lr", {"r1": 0.1, "r2": 0.01}, differs=True)
    assert rows[2] == DiffRow("model.width", {"r1": 64, "r2": 64}, differs=False)


def test_values_follow_run_order_of_input() -> None:
    rows = diff_configs({"z": {"a": 1}, "a": {"a": 2}, "m": {"a": 3}})
    assert list(rows[0].values) == ["z", "a", "m"]


def test_sort_keeps_nested_groups_together() -> None:
    rows = diff_configs({"r": {"model_x": 1, "model": {"b": 1, "a": 1}, "a": 1}})
    assert [r.key for r in rows] == ["a", "model.a", "model.b", "model_x"]


@pytest.mark.parametrize(
    ("a", "b", "differs"),
    [
        (1, 1.0, False),
        (0, -0.0, False),
        (1, 1.5, True),
        (True, 1, True),
        (False, 0, True),
        (True, True, False),
        ("1", 1, True),
        ([1, 2], [1, 2], False),
        ([1, 2], (1, 2), False),
        ([1, 2], [2, 1], True),
        ([1, [2, 3]], [1.0, [2, 3.0]], False),
        ([{"a": 1}], [{"a": 1.0}], False),
        ([{"a": 1}], [{"a": 2}], True),
        (None, None, False),
        (None, 0, True),
        (math.nan, math.nan, False),
        (math.inf, math.inf, False),
        (math.inf, -math.inf, True),
        ({}, {}, False),
        ("adam", "Adam", True),
        (10**20, 1e20, False),
        (2**53 + 1, float(2**53), True),
    ],
)
def test_value_equality_rules(a: Any, b: Any, differs: bool) -> None:
    rows = diff_configs({"r1": {"k": a}, "r2": {"k": b}})
    assert len(rows) == 1
    assert rows[0].differs is differs


def test_missing_versus_present_is_a_difference() -> None:
    rows = diff_configs({"r1": {"a": 1, "b": None}, "r2": {"a": 1}})
    b_row = next(r for r in rows if r.key == "b")
    assert b_row.differs
    assert b_row.values["r1"] is None
    assert b_row.values["r2"] is MISSING


def test_key_missing_in_all_but_one_of_three_runs() -> None:
    rows = diff_configs({"a": {}, "b": {}, "c": {"x": 1}})
    assert rows == [DiffRow("x", {"a": MISSING, "b": MISSING, "c": 1}, differs=True)]


def test_nested_versus_leaf_differs() -> None:
    rows = diff_configs({"r1": {"opt": {"lr": 1}}, "r2": {"opt": "sgd"}})
    by_key = {r.key: r for r in rows}
    assert by_key["opt"].values == {"r1": MISSING, "r2": "sgd"}
    assert by_key["opt.lr"].values == {"r1": 1, "r2": MISSING}
    assert by_key["opt"].differs and by_key["opt.lr"].differs


def test_only_differing_filters_rows() -> None:
    configs = {
        "r1": {"lr": 0.1, "seed": 0, "model": {"width": 64}},
        "r2": {"lr": 0.1, "seed": 1, "model": {"width": 64.0}},
    }
    assert [r.key for r in diff_configs(configs, only_differing=True)] == ["seed"]
    assert len(diff_configs(configs)) == 3


def test_single_run_and_no_runs() -> None:
    rows = diff_configs({"only": {"a": 1, "b": [1]}})
    assert [r.differs for r in rows] == [False, False]
    assert diff_configs({}) == []
    assert diff_configs({"only": {"a": 1}}, only_differing=True) == []


def test_missing_sentinel() -> None:
    assert repr(MISSING) == "MISSING"
    assert not MISSING
    assert type(MISSING)() is MISSING


def test_input_configs_are_not_modified() -> None:
    inner = {"width": 64}
    config = {"model": inner, "opt": {}}
    rows = diff_configs({"r": config})
    rows[1].values["r"]["new"] = 1  # the empty-dict leaf is a copy
    assert config == {"model": {"width": 64}, "opt": {}}
