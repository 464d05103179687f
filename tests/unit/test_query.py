from __future__ import annotations

import pytest

from tracker.errors import InvalidInput
from tracker.rules.query import (
    ATTRIBUTES,
    MAX_DEPTH,
    And,
    Compare,
    Field,
    Node,
    Not,
    Or,
    QueryError,
    fields_used,
    format_query,
    parse_query,
)


def cfg(*path: str) -> Field:
    return Field("config", path)


def met(name: str) -> Field:
    return Field("metrics", (name,))


def attr(name: str) -> Field:
    return Field("attr", (name,))


PARSES: list[tuple[str, Node]] = [
    ('config.optimizer == "adam"', Compare(cfg("optimizer"), "==", "adam")),
    ("config.optimizer = adam", Compare(cfg("optimizer"), "==", "adam")),
    ("metrics.val/acc > 0.9", Compare(met("val/acc"), ">", 0.9)),
    ("metrics.train/loss<=1e-3", Compare(met("train/loss"), "<=", 0.001)),
    ("metrics.lr-scale.x_y >= -2", Compare(met("lr-scale.x_y"), ">=", -2)),
    ('metrics."val acc" < 3', Compare(met("val acc"), "<", 3)),
    ("config.model.width >= 64", Compare(cfg("model", "width"), ">=", 64)),
    ('config."my key.sub" == 1', Compare(cfg("my key", "sub"), "==", 1)),
    ("config.lr == 3e-4", Compare(cfg("lr"), "==", 3e-4)),
    ("config.lr == .5", Compare(cfg("lr"), "==", 0.5)),
    ("config.steps != 1000", Compare(cfg("steps"), "!=", 1000)),
    ("config.amp == true", Compare(cfg("amp"), "==", True)),
    ("config.amp == FALSE", Compare(cfg("amp"), "==", False)),
    ("config.ckpt == null", Compare(cfg("ckpt"), "==", None)),
    ('config.amp == "true"', Compare(cfg("amp"), "==", "true")),
    ("config.layers contains 64", Compare(cfg("layers"), "contains", 64)),
    ("config.act ~ relu", Compare(cfg("act"), "~", "relu")),
    ("status != failed", Compare(attr("status"), "!=", "failed")),
    ("STATUS == Failed", Compare(attr("status"), "==", "Failed")),
    ('tags contains "baseline"', Compare(attr("tags"), "contains", "baseline")),
    ("tags CONTAINS baseline", Compare(attr("tags"), "contains", "baseline")),
    ('name ~ "lr"', Compare(attr("name"), "~", "lr")),
    ("project == digits", Compare(attr("project"), "==", "digits")),
    ("project == 2024", Compare(attr("project"), "==", "2024")),
    ("host == gpu-01", Compare(attr("host"), "==", "gpu-01")),
    ("host == null", Compare(attr("host"), "==", None)),
    ("name == true", Compare(attr("name"), "==", "true")),
    ("id == 42", Compare(attr("id"), "==", 42)),
    ("id in (1, 2, 3)", Compare(attr("id"), "in", (1, 2, 3))),
    ("status in (failed, crashed)", Compare(attr("status"), "in", ("failed", "crashed"))),
    ("status in ('failed')", Compare(attr("status"), "in", ("failed",))),
    ("created > 2024-05-01", Compare(attr("created"), ">", "2024-05-01")),
    ("created >= 2024-05-01T12:30:00", Compare(attr("created"), ">=", "2024-05-01T12:30:00")),
    ("created < 1700000000", Compare(attr("created"), "<", 1700000000)),
    ("duration > 3600", Compare(attr("duration"), ">", 3600)),
    ("duration > 1h30m", Compare(attr("duration"), ">", 5400.0)),
    ("duration <= 90s", Compare(attr("duration"), "<=", 90.0)),
    ("duration < 1.5d", Compare(attr("duration"), "<", 129600.0)),
    (r'name == "a \"q\" b\\c\n"', Compare(attr("name"), "==", 'a "q" b\\c\n')),
    (r"name == 'it\'s'", Compare(attr("name"), "==", "it's")),
    (r'name == "\u00e9t\u00e9"', Compare(attr("name"), "==", "été")),
    ('name == "a,b (c) == d"', Compare(attr("name"), "==", "a,b (c) == d")),
    ("name == ''", Compare(attr("name"), "==", "")),
]


@pytest.mark.parametrize(("text", "expected"), PARSES)
def test_parses_single_comparisons(text: str, expected: Node) -> None:
    assert parse_query(text) == expected


def test_readme_example() -> None:
    text = 'config.optimizer == "adam" and metrics.val/acc > 0.9 and status != failed'
    assert parse_query(text) == And(
        (
            Compare(cfg("optimizer"), "==", "adam"),
            Compare(met("val/acc"), ">", 0.9),
            Compare(attr("status"), "!=", "failed"),
        )
    )


A = Compare(attr("status"), "==", "a")
B = Compare(attr("status"), "==", "b")
C = Compare(attr("status"), "==", "c")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("status == a or status == b and status == c", Or((A, And((B, C))))),
        ("status == a and status == b or status == c", Or((And((A, B)), C))),
        ("(status == a or status == b) and status == c", And((Or((A, B)), C))),
        ("not status == a and status == b", And((Not(A), B))),
        ("not (status == a and status == b)", Not(And((A, B)))),
        ("not not status == a", Not(Not(A))),
        ("NOT status == a OR status == b", Or((Not(A), B))),
        ("((status == a))", A),
        ("status == a or status == b or status == c", Or((A, B, C))),
        ("(status == a or status == b) or status == c", Or((Or((A, B)), C))),
    ],
)
def test_precedence_and_grouping(text: str, expected: Node) -> None:
    assert parse_query(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_query_matches_all(text: str) -> None:
    assert parse_query(text) is None


ERRORS: list[tuple[str, int, str]] = [
    ("metrics.val/acc ==", 18, "expected a value after '==' (e.g. 0.9 or \"adam\")"),
    ("config.optimizer == ", 20, "expected a value after '=='"),
    ("status", 6, "expected an operator after 'status'"),
    ("status failed", 7, "expected an operator after 'status'"),
    ("foo == 1", 0, "unknown field 'foo'"),
    ("stauts == failed", 0, "did you mean 'status'?"),
    ("metric.loss < 1", 0, "keys start with 'config.', 'metrics.'"),
    ("config == 1", 0, "expected a key after 'config.'"),
    ("metrics. < 1", 0, "expected a key after 'metrics.'"),
    ("config.a..b == 1", 0, "empty part"),
    ("status == a and", 15, "expected a condition"),
    ("and status == a", 0, "expected a condition before 'and'"),
    ("status == a status == b", 12, "expected 'and', 'or' or the end of the query"),
    ("(status == a", 12, "expected ')' to close the '(' at position 0"),
    ("status == a)", 11, "unexpected ')' without a matching '('"),
    ('name == "abc', 8, 'not closed; add a matching "'),
    ("name == 'abc", 8, "not closed; add a matching '"),
    (r'name == "a\qb"', 10, "unknown escape '\\q'"),
    ("status == a && status == b", 12, "combine conditions with 'and'"),
    ("!status == a", 0, "use 'not' to negate"),
    ("status == a;", 11, "unexpected character ';'"),
    ("tags == baseline", 5, "'==' cannot be used with tags; it supports: contains"),
    ("status > a", 7, "it supports: == != ~ in"),
    ("metrics.loss ~ x", 13, "cannot be used with metrics.loss"),
    ("metrics.loss > high", 15, "metrics.loss compares with numbers"),
    ("config.lr ~ 5", 12, "'~' matches a substring and needs a string"),
    ("status in failed", 10, "expected '(' after 'in'"),
    ("status in (a b)", 13, "expected ',' or ')' in the list opened at position 10"),
    ("status in ()", 11, "expected a value in the list"),
    ("created > yesterday", 10, "created compares with a date like 2024-05-01"),
    ("duration > soon", 11, "duration compares with seconds"),
    ("config.lr > 1e999", 12, "out of range"),
    ("status == (a)", 10, "expected a value after '=='"),
]


@pytest.mark.parametrize(("text", "position", "fragment"), ERRORS)
def test_errors_name_position_and_rule(text: str, position: int, fragment: str) -> None:
    with pytest.raises(QueryError) as info:
        parse_query(text)
    err = info.value
    assert err.position == position
    assert str(err).startswith(f"position {position}: ")
    assert fragment in str(err)
    assert err.code == "invalid_query" and isinstance(err, InvalidInput)


def test_unknown_field_lists_allowed_attributes() -> None:
    with pytest.raises(QueryError) as info:
        parse_query("colour == red")
    for name in ATTRIBUTES:
        assert name in info.value.detail
    assert ATTRIBUTES == (
        "status", "name", "project", "tags", "host", "created", "started", "ended", "duration",
        "id", "diagnosis", "deleted", "notes", "starred",
    )  # fmt: skip


def test_value_error_example_from_spec() -> None:
    with pytest.raises(QueryError) as info:
        parse_query("metrics.val/acc == and status == x")
    assert info.value.position == 19
    assert str(info.value) == (
        "position 19: expected a value after '==' (e.g. 0.9 or \"adam\"), got 'and'"
    )


def test_too_deep_nesting_is_a_query_error_not_recursion_error() -> None:
    text = "(" * (MAX_DEPTH + 5) + "status == a" + ")" * (MAX_DEPTH + 5)
    with pytest.raises(QueryError, match="nested more than"):
        parse_query(text)
    with pytest.raises(QueryError, match="nested more than"):
        parse_query("not " * (MAX_DEPTH + 1) + "status == a")
    ok = "(" * MAX_DEPTH + "status == a" + ")" * MAX_DEPTH
    assert parse_query(ok) == A


def test_too_long_query() -> None:
    with pytest.raises(QueryError, match="longer than"):
        parse_query("status == a or " * 1000)


def test_fields_used_in_order_without_duplicates() -> None:
    node = parse_query(
        "(metrics.val/acc > 0.9 or status == failed) and not metrics.val/acc < 0.1 "
        "and config.model.width in (64, 128)"
    )
    assert fields_used(node) == (met("val/acc"), attr("status"), cfg("model", "width"))
    assert fields_used(None) == ()


def test_field_name_and_str() -> None:
    assert cfg("model", "width").name == "model.width"
    assert str(cfg("model", "width")) == "config.model.width"
    assert str(met("val acc")) == 'metrics."val acc"'
    assert str(attr("status")) == "status"


@pytest.mark.parametrize(
    "text",
    [
        'config.optimizer == "adam" and metrics.val/acc > 0.9 and status != failed',
        "(status == a or status == b) and not (config.x == 1 or config.y < -2.5e-07)",
        "not not tags contains 'x y' or (duration > 1h and created > 2024-01-01)",
        'metrics."val acc" in (1, 2.5) and config."a b" == null and id in (1, 7)',
        r'name ~ "quote \" and \\ and é and \u0001"',
    ],
)
def test_format_query_round_trips(text: str) -> None:
    tree = parse_query(text)
    assert tree is not None
    assert parse_query(format_query(tree)) == tree
    assert format_query(None) == ""


def test_format_query_canonical_text() -> None:
    tree = parse_query("status==failed AND NOT (name~lr OR tags contains b)")
    assert format_query(tree) == ('status == "failed" and not (name ~ "lr" or tags contains "b")')


def test_ast_is_frozen_and_hashable() -> None:
    tree = parse_query("status == a and config.x in (1, 2)")
    assert isinstance(tree, And)
    assert hash(tree) == hash(parse_query("status == a and config.x in (1, 2)"))
    with pytest.raises(AttributeError):
        tree.items = ()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("config.a = " + "9" * 30, "is out of range: integers go from"),
        ("config.a = -9223372036854775809", "is out of range: integers go from"),
        ("config.a = " + "9" * 5000, "is out of range: integers go from"),
        ("duration > " + "9" * 20, "is out of range: integers go from"),
        ("id == 2147483648", "id compares with run ids (integers 0 to 2147483647)"),
        ("id in (1, x)", "id compares with run ids"),
        ("id == null", "id compares with run ids"),
        ("created > 0001-01-01", "date 0001-01-01 is out of range"),
    ],
)
def test_values_out_of_range_are_query_errors(text: str, detail: str) -> None:
    with pytest.raises(QueryError, match="position ") as info:
        parse_query(text)
    assert detail in info.value.detail


def test_values_at_the_edges_of_their_range_parse() -> None:
    top = parse_query('config.a = 9223372036854775807 and id == 2147483647 and id == "5"')
    assert top == And(
        (
            Compare(cfg("a"), "==", 2**63 - 1),
            Compare(attr("id"), "==", 2**31 - 1),
            Compare(attr("id"), "==", 5),
        )
    )
    assert parse_query("config.a = 1e30") == Compare(cfg("a"), "==", 1e30)
