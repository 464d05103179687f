"""NaN and ±Inf in JSON: the wire form (tracker/rules/jsonvalues.py)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pytest

from tracker.rules.jsonvalues import decode_special, dumps, encode, encode_float

INF = math.inf


@dataclass(frozen=True)
class _Point:
    step: int
    value: float


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (1.5, 1.5),
        (0.0, 0.0),
        (-2.0, -2.0),
        (math.nan, "NaN"),
        (INF, "Infinity"),
        (-INF, "-Infinity"),
    ],
)
def test_encode_float(value: float, wire: float | str) -> None:
    assert encode_float(value) == wire


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (math.nan, "NaN"),
        ({"a": [1, INF, (-INF, 2.5)]}, {"a": [1, "Infinity", ["-Infinity", 2.5]]}),
        ({1: math.nan}, {1: "NaN"}),
        (_Point(3, math.nan), {"step": 3, "value": "NaN"}),
        ([_Point(1, 0.5)], [{"step": 1, "value": 0.5}]),
        ("NaN", "NaN"),  # strings stay strings
        (None, None),
        (True, True),
        (7, 7),
    ],
)
def test_encode(value: Any, wire: Any) -> None:
    assert encode(value) == wire


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"v": 1.0}, '{"v":1.0}'),
        ({"v": math.nan, "w": [INF, -INF]}, '{"v":"NaN","w":["Infinity","-Infinity"]}'),
        ([], "[]"),
    ],
)
def test_dumps_never_writes_bare_tokens(value: Any, text: str) -> None:
    out = dumps(value, separators=(",", ":"))
    assert out == text
    json.loads(out, parse_constant=lambda token: pytest.fail(f"bare {token} in {out}"))


def test_dumps_keeps_type_errors() -> None:
    with pytest.raises(TypeError):
        dumps({"v": object()})


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("NaN", math.nan),
        ("nan", math.nan),
        ("Infinity", INF),
        ("+Infinity", INF),
        ("inf", INF),
        ("-Infinity", -INF),
        ("-inf", -INF),
        ("NAN", None),
        ("1.5", None),
        ("", None),
        ("name", None),
    ],
)
def test_decode_special(text: str, value: float | None) -> None:
    got = decode_special(text)
    if value is None:
        assert got is None
    elif math.isnan(value):
        assert got is not None and math.isnan(got)
    else:
        assert got == value


@pytest.mark.parametrize("value", [math.nan, INF, -INF, 0.25])
def test_round_trip(value: float) -> None:
    wire = json.loads(dumps([value]))[0]
    back = decode_special(wire) if isinstance(wire, str) else wire
    assert back == value or (math.isnan(value) and back is not None and math.isnan(back))
