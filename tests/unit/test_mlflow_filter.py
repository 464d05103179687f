"""MLflow's search grammar read into the query tree (``tracker.rules.mlflow_filter``): what each
filter means (as the canonical text of the dashboard's query language), what is refused and
why, and that no text at all makes the parser fail with anything but ``MlflowFilterError``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.rules.mlflow_filter import (
    MlflowFilterError,
    OrderKey,
    like_match,
    parse_filter,
    parse_order_by,
)
from tracker.rules.query import Field, format_query, parse_query

MEANINGS = [
    ("", ""),
    ("   ", ""),
    ("metrics.loss < 0.5", "metrics.loss < 0.5"),
    ("metric.loss >= 1", "metrics.loss >= 1.0"),
    ("metrics.loss = -2", "metrics.loss == -2.0"),
    ("metrics.acc != 0.9", "metrics.acc exists and not metrics.acc == 0.9"),
    ("metrics.`val loss` < 1e-3", 'metrics."val loss" < 0.001'),
    ('metrics."val:acc" > .5', "metrics.val:acc > 0.5"),
    ("params.lr = '0.01'", 'params.lr == "0.01"'),
    ('param.lr = "0.01"', 'params.lr == "0.01"'),
    ("parameters.optimizer LIKE 'a%'", 'params.optimizer like "a%"'),
    ("params.optimizer ILIKE '%AD%'", 'params.optimizer ilike "%AD%"'),
    ("params.`optimizer.lr` = '0.5'", 'params.optimizer.lr == "0.5"'),
    ("params.optimizer.lr = '0.5'", 'params.optimizer.lr == "0.5"'),
    ("params.lr IS NULL", "not params.lr exists"),
    ("params.lr is not null", "params.lr exists"),
    ("params.lr != 'x'", 'params.lr exists and not params.lr == "x"'),
    ("tags.team = 'vision'", 'tags.team == "vision"'),
    ("tags.`mlflow.parentRunId` = '12'", 'tags.mlflow.parentRunId == "12"'),
    ("tags.mlflow.parentRunId = '12'", 'tags.mlflow.parentRunId == "12"'),
    ("attributes.status = 'FINISHED'", 'status in ("finished")'),
    ("status = 'FAILED'", 'status in ("failed", "crashed")'),
    ("status != 'RUNNING'", 'not status in ("running")'),
    ("attr.status LIKE '%ED'", 'status in ("queued", "finished", "failed", "crashed", "killed")'),
    ("run.status ILIKE 'run%'", 'status in ("running")'),
    ("status = 'running'", "status in ()"),  # statuses are upper case: nothing matches
    ("run_name = 'r1'", 'name == "r1"'),
    ("attributes.run_name LIKE 'lr-%'", 'name like "lr-%"'),
    ("`run name` != 'x'", 'not name == "x"'),
    ("run_id = '12'", "id in (12)"),
    ("run_id IN ('1', '2', 'abc')", "id in (1, 2)"),
    ("attributes.run_id NOT IN ('3')", "not id in (3)"),
    ("start_time > 1700000000000", "started > 1700000000.0"),
    ("created <= 1700000000500", "started <= 1700000000.5"),
    ("attributes.end_time != 5000", "not ended == 5.0"),
    ("user_id = 'alice'", 'tags.mlflow.user == "alice"'),
    (
        "metrics.loss < 1 and params.lr = '0.1' AND tags.k LIKE 'v%'",
        'metrics.loss < 1.0 and params.lr == "0.1" and tags.k like "v%"',
    ),
    ("run_name = 'a' AND", 'name == "a"'),  # MLflow accepts a trailing AND
    ("params.p = 'it''s'", "params.p == \"it''s\""),  # kept verbatim, as MLflow does
]


@pytest.mark.parametrize(("text", "meaning"), MEANINGS)
def test_filter_means(text: str, meaning: str) -> None:
    node = parse_filter(text)
    assert format_query(node) == meaning
    if meaning and "()" not in meaning:  # the tree is one the query language has too
        assert parse_query(meaning) == node


REFUSED = [
    ("metrics.loss < 1 OR metrics.loss > 2", "OR is not supported"),
    ("metrics.loss = 'x'", "compares with a number"),
    ("params.lr = 0.01", "quoted string"),
    ("params.lr > '1'", "invalid comparator '>' for params"),
    ("tags.k IN ('a')", "invalid comparator 'IN' for tags"),
    ("status IN ('FINISHED')", "only run_id supports IN"),
    ("run_id IN '1'", "needs a list"),
    ("run_id = ('1')", "needs IN or NOT IN"),
    ("run_id IN ('1' '2')", "expected ',' or ')'"),
    ("run_id IN (1)", "expected a quoted string in the list"),
    ("metrics.loss IS NULL", "only work with params and tags"),
    ("foo.bar = '1'", "invalid entity type 'foo'"),
    ("attributes.color = 'red'", "invalid attribute key 'color'"),
    ("artifact_uri = 'x'", "not supported by this server"),
    ("datasets.name = 'd'", "datasets.* filters are not supported"),
    ("run_id LIKE '1%'", "run_id LIKE is not supported"),
    ("start_time > 'yesterday'", "epoch milliseconds"),
    ("start_time LIKE '1'", "invalid comparator 'LIKE' for start_time"),
    ("metrics.loss", "expected a comparison operator"),
    ("metrics.loss <", "expected a value"),
    ("(metrics.loss < 1)", "expected an identifier"),
    ("metrics.loss < 1 metrics.acc > 2", "expected AND"),
    ("params.lr = 'open", "unexpected character"),
    ("metrics.loss < 1e999", "out of range"),
    ("params.`` = 'x'", "names no key"),
    ("params. = 'x'", "unexpected character '.'"),
    ("params.lr IS 'x'", "expected NULL or NOT NULL"),
    ("metrics.loss ! 1", "unexpected character '!'"),
    ("params.`\x00` = ''", "must not contain NUL"),  # PostgreSQL text cannot hold it
]


@pytest.mark.parametrize(("text", "fragment"), REFUSED)
def test_filter_refused(text: str, fragment: str) -> None:
    with pytest.raises(MlflowFilterError) as info:
        parse_filter(text)
    assert fragment in info.value.message
    assert info.value.code == "invalid_filter" and info.value.field == "filter"


def test_filter_limits_and_types() -> None:
    assert parse_filter(None) is None
    with pytest.raises(MlflowFilterError, match="must be a string"):
        parse_filter(5)
    with pytest.raises(MlflowFilterError, match="at most 10000"):
        parse_filter("metrics.a < 1 AND " * 1000)
    with pytest.raises(MlflowFilterError, match="more than 100 conditions"):
        parse_filter(" AND ".join(["metrics.a < 1"] * 101))


ORDERS = [
    (["metrics.loss"], [(Field("metrics", ("loss",)), True)]),
    (["metrics.`val loss` DESC"], [(Field("metrics", ("val loss",)), False)]),
    (["params.lr asc", "tags.team DESC"],
     [(Field("param", ("lr",)), True), (Field("tag", ("team",)), False)]),
    (["start_time DESC", "attributes.run_name"],
     [(Field("attr", ("started",)), False), (Field("attr", ("name",)), True)]),
    (["end_time", "status", "run_id DESC"],
     [(Field("attr", ("ended",)), True), (Field("attr", ("status",)), True),
      (Field("attr", ("id",)), False)]),
    (["created"], [(Field("attr", ("started",)), True)]),
    (["user_id"], [(Field("tag", ("mlflow.user",)), True)]),
    ("metrics.loss", [(Field("metrics", ("loss",)), True)]),
    (None, []),
    ([], []),
]  # fmt: skip


@pytest.mark.parametrize(("items", "keys"), ORDERS)
def test_order_by_means(items: object, keys: list[tuple[Field, bool]]) -> None:
    assert parse_order_by(items) == tuple(OrderKey(f, a) for f, a in keys)


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        (["metrics.loss UP"], "use <key> [ASC|DESC]"),
        (["metrics.loss ASC DESC"], "use <key> [ASC|DESC]"),
        (["foo.bar"], "invalid entity type"),
        (["artifact_uri"], "cannot be ordered by"),
        (["metrics.loss", "metrics.loss DESC"], "duplicate fields"),
        ([5], "list of strings"),
        (["metrics.loss ~"], "could not be parsed"),
        (["params.`\x00`"], "must not contain NUL"),
        ([""], "use <key>"),
    ],
)
def test_order_by_refused(items: object, fragment: str) -> None:
    with pytest.raises(MlflowFilterError) as info:
        parse_order_by(items)
    assert fragment in info.value.message and info.value.field == "order_by"


@pytest.mark.parametrize(
    ("text", "pattern", "sensitive", "expected"),
    [
        ("adam", "a%", True, True),
        ("Adam", "a%", True, False),
        ("Adam", "a%", False, True),
        ("adam", "a_am", True, True),
        ("adam", "a_m", True, False),
        ("50%", "%\\%", True, False),  # no escape character: '\' is a literal
        ("a.b", "a.b", True, True),
        ("axb", "a.b", True, False),  # '.' is not a wildcard
        ("line\nbreak", "line%", True, True),
    ],
)
def test_like_match(text: str, pattern: str, sensitive: bool, expected: bool) -> None:
    assert like_match(text, pattern, case_sensitive=sensitive) is expected


GRAMMAR = st.sampled_from(
    ["metrics.loss", "params.lr", "tags.`a b`", "status", "run_id", "start_time", " AND ",
     " OR ", "=", "!=", "<", " LIKE ", " IN ", " NOT ", " IS ", "NULL", "'x'", '"y"', "(",
     ")", ",", "1.5", "-3", "`", "'", ".", " "]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), st.lists(GRAMMAR, max_size=12).map("".join)))
def test_parser_never_crashes(text: str) -> None:
    try:
        node = parse_filter(text)
    except MlflowFilterError as exc:
        assert exc.message and exc.code == "invalid_filter"
        return
    format_query(node)  # any tree it returns can be written out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=30), GRAMMAR), max_size=4))
def test_order_by_never_crashes(items: list[str]) -> None:
    try:
        parse_order_by(items)
    except MlflowFilterError as exc:
        assert exc.message
