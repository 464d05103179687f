"""The tag rule (tracker/rules/tags.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tracker.errors import InvalidInput
from tracker.rules.tags import MAX_TAG_LENGTH, check_tags, join_tag, split_tag, tag_key


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ([], []),
        (["baseline"], ["baseline"]),
        ("baseline", ["baseline"]),
        (("a", "b=c"), ["a", "b=c"]),
        (["x" * MAX_TAG_LENGTH], ["x" * MAX_TAG_LENGTH]),
        (["ünïcode ok"], ["ünïcode ok"]),
    ],
)
def test_check_tags(tags: Any, expected: list[str]) -> None:
    assert check_tags(tags) == expected


@pytest.mark.parametrize(
    "tags", [[""], "", ["x" * (MAX_TAG_LENGTH + 1)], [1], [None], ["ok", ["nested"]]]
)
def test_check_tags_rejects(tags: Any) -> None:
    with pytest.raises(InvalidInput, match="non-empty strings of at most 100") as info:
        check_tags(tags, field="tag")
    assert info.value.field == "tag"


@pytest.mark.parametrize(
    ("tag", "key", "value"),
    [("a=b", "a", "b"), ("a", "a", ""), ("a=b=c", "a", "b=c"), ("a=", "a", ""), ("=b", "", "b")],
)
def test_key_value_tags(tag: str, key: str, value: str) -> None:
    assert split_tag(tag) == (key, value)
    assert tag_key(tag) == key
    if "=" in tag:
        assert join_tag(key, value) == tag
