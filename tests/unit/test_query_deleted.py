"""The ``deleted`` field of the run query language: true or false, ``==`` and ``!=`` only."""

from __future__ import annotations

import pytest

from tracker.rules.query import Compare, Field, QueryError, format_query, parse_query


def test_deleted_compares_with_booleans() -> None:
    deleted = Field("attr", ("deleted",))
    assert parse_query("deleted == true") == Compare(deleted, "==", True)
    assert parse_query("DELETED != false") == Compare(deleted, "!=", False)
    assert format_query(parse_query("deleted == true")) == "deleted == true"


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("deleted == 1", "deleted compares with true or false, got 1"),
        ('deleted == "yes"', "deleted compares with true or false"),
        ("deleted == null", "deleted compares with true or false, got null"),
        ("deleted ~ true", "'~' cannot be used with deleted; it supports: == !="),
        ("deleted > false", "'>' cannot be used with deleted"),
    ],
)
def test_deleted_refuses_other_values_and_operators(query: str, detail: str) -> None:
    with pytest.raises(QueryError) as info:
        parse_query(query)
    assert detail in info.value.detail
