"""A run's name, tags, notes and star: the pure rules, and the query language's ``notes``
and ``starred`` (tracker.rules.annotations, tracker.rules.query)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.errors import InvalidInput
from tracker.rules.annotations import (
    MAX_NOTES_LENGTH,
    add_tags,
    check_name,
    check_notes,
    remove_tags,
)
from tracker.rules.query import Compare, Field, Not, QueryError, format_query, parse_query

STARRED = Field("attr", ("starred",))
NOTES = Field("attr", ("notes",))


@pytest.mark.parametrize(
    ("given_name", "stored"),
    [("nice run", "nice run"), ("  padded  ", "padded"), ("x" * 250, "x" * 250),
     ("größe/lr=3e-4 ☃", "größe/lr=3e-4 ☃")],
)  # fmt: skip
def test_names_kept(given_name: str, stored: str) -> None:
    assert check_name(given_name) == stored


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [("", "is empty"), ("   ", "is empty"), ("x" * 251, "251 characters"),
     ("two\nlines", "control character"), ("tab\there", "control character"),
     (None, "must be a string"), (7, "must be a string")],
)  # fmt: skip
def test_names_refused(bad: object, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment) as info:
        check_name(bad)
    assert info.value.field == "name"


def test_notes_rule() -> None:
    assert check_notes("line 1\nline 2\n") == "line 1\nline 2\n"  # kept as written
    assert check_notes("") is None and check_notes(" \n\t") is None and check_notes(None) is None
    assert check_notes("x" * MAX_NOTES_LENGTH) == "x" * MAX_NOTES_LENGTH
    with pytest.raises(InvalidInput, match="65,537 characters; at most 65,536") as info:
        check_notes("x" * (MAX_NOTES_LENGTH + 1))
    assert info.value.field == "notes"
    with pytest.raises(InvalidInput, match="must be a string"):
        check_notes(["a"])


@pytest.mark.parametrize(
    ("current", "new", "after"),
    [([], ["baseline"], ["baseline"]),
     (["a", "owner=ana"], ["owner=bob"], ["a", "owner=bob"]),  # replaced where it stood
     (["a"], ["a", "a"], ["a"]),  # once
     (["lr=0.1"], ["lr"], ["lr"]),  # a plain tag is the key with an empty value
     (["x"], ["k=v=w"], ["x", "k=v=w"])],  # split at the first '='
)  # fmt: skip
def test_add_tags(current: list[str], new: list[str], after: list[str]) -> None:
    assert add_tags(current, new) == after


@pytest.mark.parametrize(
    ("new", "fragment"),
    [(["=v"], "key before '=' is empty"), (["mlflow.note.content=x"], "MLflow's own tags"),
     ([""], "non-empty"), (["x" * 101], "at most 100"), ([3], "non-empty strings")],
)  # fmt: skip
def test_add_tags_refused(new: list[object], fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment):
        add_tags(["kept"], new)


def test_remove_tags_by_key_or_whole_tag() -> None:
    tags = ["a", "owner=ana", "lr=0.1"]
    assert remove_tags(tags, ["owner"]) == ["a", "lr=0.1"]
    assert remove_tags(tags, ["lr=0.1", "a"]) == ["owner=ana"]
    assert remove_tags(tags, ["lr=0.2", "absent"]) == tags  # nothing named: unchanged


# ------------------------------------------------------------------- the query language


@pytest.mark.parametrize(
    ("text", "tree"),
    [("starred", Compare(STARRED, "==", True)),
     ("STARRED", Compare(STARRED, "==", True)),
     ("not starred", Not(Compare(STARRED, "==", True))),
     ("starred == false", Compare(STARRED, "==", False)),
     ("starred != true", Compare(STARRED, "!=", True)),
     ('notes ~ "warm up"', Compare(NOTES, "~", "warm up")),
     ("notes == null", Compare(NOTES, "==", None)),
     ('notes ilike "%lr%"', Compare(NOTES, "ilike", "%lr%")),
     ('tags.owner = "ana"', Compare(Field("tag", ("owner",)), "==", "ana"))],
)  # fmt: skip
def test_notes_and_starred_parse(text: str, tree: object) -> None:
    assert parse_query(text) == tree
    assert parse_query(format_query(parse_query(text))) == tree


def test_starred_alone_combines_like_any_condition() -> None:
    tree = parse_query('starred and (notes ~ "nan" or not starred)')
    assert format_query(tree) == 'starred and (notes ~ "nan" or not starred)'


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [("starrd", 0, "did you mean 'starred'?"),
     ("note ~ 'x'", 0, "did you mean 'notes'?"),
     ("starred > 1", 8, "'>' cannot be used with starred; it supports: == !="),
     ("starred == 1", 11, "starred compares with true or false"),
     ("notes > 'a'", 6, "'>' cannot be used with notes"),
     ("notes contains 'x'", 6, "'contains' cannot be used with notes"),
     ("starred starred", 8, "expected 'and', 'or' or the end of the query")],
)  # fmt: skip
def test_notes_and_starred_errors_name_the_position(text: str, position: int,
                                                     fragment: str) -> None:  # fmt: skip
    with pytest.raises(QueryError) as info:
        parse_query(text)
    assert info.value.position == position
    assert fragment in info.value.detail


WORDS = st.sampled_from(
    ["starred", "notes", "not", "and", "or", "(", ")", "~", "==", "!=", "=", ">", '"warm"',
     "'x'", "true", "false", "null", "tags.owner", "tags contains", "ilike", "in", ",", " "]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(WORDS, max_size=12).map(" ".join)))
def test_untrusted_queries_parse_or_say_where(text: str) -> None:
    """Any text: a tree that survives being written out and read back, or a QueryError
    with a position inside the query (never another exception)."""
    try:
        tree = parse_query(text)
    except QueryError as exc:
        assert 0 <= exc.position <= len(text)
        return
    assert parse_query(format_query(tree)) == tree


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.text(max_size=300), st.none(), st.integers(), st.lists(st.text(max_size=5))),
    st.lists(st.one_of(st.text(max_size=120), st.integers()), max_size=5),
)
def test_untrusted_annotations_are_kept_or_refused_by_the_rule(
    name: object, tags: list[object]
) -> None:
    """Whatever a request body holds: a stored value that meets the rule, or InvalidInput."""
    try:
        stored = check_name(name)
    except InvalidInput as exc:
        assert exc.field == "name"
    else:
        assert 1 <= len(stored) <= 250 and stored == stored.strip()
    try:
        after = add_tags(["base"], tags)
    except InvalidInput as exc:
        assert exc.field == "add"
    else:
        assert after[0] == "base" or after[0].split("=")[0] == "base"
        assert all(0 < len(t) <= 100 and not t.startswith("mlflow.") for t in after)
