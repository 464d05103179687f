"""The query language's health terms: ``diagnosis == "code"`` and non-finite metric values
(``metrics.loss == nan``)."""

from __future__ import annotations

import math

import pytest

from tracker.rules.query import Compare, Field, QueryError, format_query, parse_query

DIAGNOSIS = Field("attr", ("diagnosis",))
LOSS = Field("metrics", ("loss",))


@pytest.mark.parametrize(
    ("text", "op", "value"),
    [
        ('diagnosis == "memory_growth"', "==", "memory_growth"),
        ("diagnosis != nonfinite", "!=", "nonfinite"),
        ("diagnosis in (nonfinite, divergence)", "in", ("nonfinite", "divergence")),
        ("diagnosis == null", "==", None),
    ],
)
def test_diagnosis_terms(text: str, op: str, value: object) -> None:
    assert parse_query(text) == Compare(DIAGNOSIS, op, value)


@pytest.mark.parametrize(("word", "inf"), [("nan", False), ("NaN", False), ("inf", True),
                                          ("Infinity", True)])  # fmt: skip
def test_nonfinite_metric_values(word: str, inf: bool) -> None:
    node = parse_query(f"metrics.loss == {word}")
    assert isinstance(node, Compare) and node.field == LOSS and node.op == "=="
    assert isinstance(node.value, float)
    assert math.isinf(node.value) if inf else math.isnan(node.value)
    assert parse_query(format_query(node)) is not None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("metrics.loss > nan", "nan only works with == and != (e.g. metrics.loss == nan)"),
        ("diagnosis > nonfinite", "'>' cannot be used with diagnosis"),
        ("diagnosis contains x", "cannot be used with diagnosis"),
    ],
)
def test_health_term_errors(text: str, fragment: str) -> None:
    with pytest.raises(QueryError) as info:
        parse_query(text)
    assert fragment in str(info.value)
