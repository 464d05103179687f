"""``-c`` override traps (issue 14, item 4): pure rules of tracker.rules.sweep, table-driven."""

from __future__ import annotations

import math

import pytest

from tracker.rules.sweep import (
    DISTRIBUTIONS,
    DISTRIBUTIONS_HELP,
    Choices,
    SweepSpecError,
    parse_override,
    parse_value,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nan", math.nan), ("NaN", math.nan), ("inf", math.inf), ("+inf", math.inf),
        ("-inf", -math.inf), ("Infinity", math.inf), ("-Infinity", -math.inf),
        ("'nan'", "nan"), ('"inf"', "inf"), ("nano", "nano"), ("info", "info"),
    ],
)  # fmt: skip
def test_nan_and_infinities_are_floats_like_other_numbers(text: str, expected: object) -> None:
    value = parse_value(text)
    if isinstance(expected, float) and math.isnan(expected):
        assert isinstance(value, float) and math.isnan(value)
    else:
        assert value == expected and type(value) is type(expected)


def test_nan_in_a_comma_list() -> None:
    spec = parse_override("lr=nan,0.1").spec
    assert isinstance(spec, Choices) and math.isnan(spec.values[0]) and spec.values[1] == 0.1


@pytest.mark.parametrize("text", ["lr=", "lr=  ", "model.width="])
def test_an_empty_value_is_refused(text: str) -> None:
    key = text.split("=")[0]
    with pytest.raises(SweepSpecError) as err:
        parse_override(text)
    assert f"-c {text}: the value is empty" in err.value.message
    assert f"-c {key}=''" in err.value.message


def test_an_explicitly_empty_string_is_accepted() -> None:
    assert parse_override("name=''").spec == Choices(("",))


@pytest.mark.parametrize(
    ("text", "guess"),
    [
        ("lr=logunifrom(1e-5,1e-3)", "did you mean loguniform(...)?"),
        ("lr=loguniorm(1e-5,1e-3)", "did you mean loguniform(...)?"),
        ("lr=unifrom(0,1)", "did you mean uniform(...)?"),
        ("seed=randit(0,9)", "did you mean randint(...)?"),
        ("opt=choise(adam,sgd)", "did you mean choice(...)?"),
        ("lr=LogUniform(1e-5,1e-3)", "did you mean loguniform(...)?"),
        ("x=gaussian(0,1)", "the distributions are"),
    ],
)
def test_an_unknown_distribution_is_refused_with_a_suggestion(text: str, guess: str) -> None:
    with pytest.raises(SweepSpecError) as err:
        parse_override(text)
    assert f"-c {text}: unknown distribution" in err.value.message
    assert guess in err.value.message and "quote the value" in err.value.message


def test_a_quoted_call_stays_a_string() -> None:
    assert parse_override("act='relu(x)'").spec == Choices(("relu(x)",))


def test_the_help_lists_every_distribution() -> None:
    for name in DISTRIBUTIONS:
        assert f"{name}(" in DISTRIBUTIONS_HELP
