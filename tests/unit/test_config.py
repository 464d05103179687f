"""Config rules (tracker/rules/config.py): flatten (one rule for the runs table, the
comparison, the CLI and the MLflow params)."""

from __future__ import annotations

from typing import Any

import pytest

from tracker.errors import InvalidInput
from tracker.rules.config import ConfigFlattenError, flatten


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, {}),
        ({"lr": 0.1}, {"lr": 0.1}),
        ({"model": {"width": 64, "act": "relu"}}, {"model.width": 64, "model.act": "relu"}),
        ({"a": {"b": {"c": [1, 2]}}}, {"a.b.c": [1, 2]}),
        ({"opt": {}}, {"opt": {}}),
        ({"x": None, "y": {"z": None}}, {"x": None, "y.z": None}),
        ({1: "one", "n": {2: "two"}}, {"1": "one", "n.2": "two"}),
        ({"a.b": 1}, {"a.b": 1}),
    ],
)
def test_flatten(config: dict[Any, Any], expected: dict[str, Any]) -> None:
    assert flatten(config) == expected


def test_flatten_rejects_colliding_keys() -> None:
    with pytest.raises(ConfigFlattenError) as info:
        flatten({"a.b": 1, "a": {"b": 2}})
    assert "'a.b'" in str(info.value) and info.value.field == "a.b"
    assert isinstance(info.value, InvalidInput) and info.value.code == "invalid_config"


def test_flatten_copies_empty_mappings() -> None:
    empty: dict[str, Any] = {}
    out = flatten({"opt": empty})
    assert out == {"opt": {}} and out["opt"] is not empty


@pytest.mark.parametrize(
    ("config", "prefix", "expected"),
    [({"a": 1}, "config.", {"config.a": 1}), ({"a": {"b": 1}}, "x.", {"x.a.b": 1})],
)
def test_flatten_prefix(config: dict[str, Any], prefix: str, expected: dict[str, Any]) -> None:
    assert flatten(config, prefix) == expected
