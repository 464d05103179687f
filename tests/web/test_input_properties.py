"""Property-based: no input gets a 500 (issue 9). Hypothesis drives the query language (any
text, and structured near-valid queries nested past the limit), every route with an id in
its path, and the MLflow parameters (ids, page tokens, page sizes, filters), through the
Flask test client on SQLite and PostgreSQL; after the examples the server still answers
``/api/v1/health``. The known cases that answered 500 are in ``test_malformed_input.py``."""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.routing import IntegerConverter

from tracker.rules.query import MAX_DEPTH, QueryError, parse_query
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run

EXAMPLES = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MLFLOW = "/api/2.0/mlflow"

# --------------------------------------------------------------------------- strategies

big_ints = st.integers(min_value=-(2**80), max_value=2**80)
digit_text = st.text(alphabet="0123456789²³¹٣٤۵߀१０９-+ ", min_size=1, max_size=30)
id_text = st.one_of(big_ints.map(str), digit_text, st.text(max_size=20))

FIELDS = [
    "config.a",
    "config.a.b",
    'config."x y"',
    "metrics.loss",
    'metrics."val acc"',
    "status",
    "name",
    "project",
    "tags",
    "host",
    "created",
    "duration",
    "id",
]
OPS = ["==", "=", "!=", "<", "<=", ">", ">=", "~", "contains", "in"]
values = st.one_of(
    big_ints.map(str),
    st.floats(allow_nan=False).map(repr),
    st.sampled_from(
        [
            "0001-01-01",
            "9999-12-31",
            "2024-05-01T12:00+14:00",
            "1h30m",
            "99999999999h",
            "null",
            "true",
            "adam",
            "1e999",
            "-0",
            ".5",
        ]
    ),
    st.text(max_size=20).map(lambda t: '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'),
)


@st.composite
def comparison(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(OPS))
    value = draw(values)
    if op == "in":
        value = "(" + ", ".join(draw(st.lists(values, min_size=1, max_size=4))) + ")"
    return f"{draw(st.sampled_from(FIELDS))} {op} {value}"


def _combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        children.map(lambda q: f"not {q}"),
        children.map(lambda q: f"({q})"),
        st.tuples(children, st.sampled_from(["and", "or", "AND"]), children).map(" ".join),
    )


queries = st.recursive(comparison(), _combine, max_leaves=40)
deep_queries = st.tuples(
    st.integers(min_value=1, max_value=MAX_DEPTH + 3),
    st.lists(
        st.sampled_from(["not ", "(", "not (", "config.x = 1 or (", "config.y = 2 and ("]),
        min_size=1,
        max_size=4,
    ),
    comparison(),
).map(lambda t: _nest(*t))


def _nest(levels: int, openers: list[str], leaf: str) -> str:
    text, closers = "", ""
    for i in range(levels):
        opener = openers[i % len(openers)]
        text += opener
        closers = ")" * opener.count("(") + closers
    return text + leaf + closers


# ------------------------------------------------------------------------------ helpers


@pytest.fixture
def seeded(client: FlaskClient, store: Any) -> FlaskClient:
    run = create_run(store, project="p", name="r", config={"a": {"b": 1}}, tags=["t"])
    log_metrics(store, run.id, 0, {"loss": 1.0, "val acc": 0.5})
    return client


def no_500(response: Any, what: str) -> None:
    assert response.status_code < 500, f"{what} -> {response.status_code}: {response.data[:300]}"


def still_healthy(client: FlaskClient) -> None:
    assert client.get("/api/v1/health").status_code == 200


# --------------------------------------------------------------------- query language


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=300))
def test_parse_raises_only_query_errors_on_any_text(text: str) -> None:
    with contextlib.suppress(QueryError):  # anything else (RecursionError, ValueError) fails
        parse_query(text)


@settings(max_examples=500, deadline=None)
@given(st.one_of(queries, deep_queries))
def test_parse_raises_only_query_errors_on_near_valid_queries(text: str) -> None:
    with contextlib.suppress(QueryError):  # anything else (RecursionError, ValueError) fails
        parse_query(text)


@EXAMPLES
@given(text=st.one_of(queries, deep_queries, st.text(max_size=100)))
def test_runs_search_never_answers_500(seeded: FlaskClient, text: str) -> None:
    for path in ("/api/v1/runs?", "/api/v1/runs/columns?"):
        url = path + urlencode({"q": text, "sort": "metrics.loss"})
        no_500(seeded.get(url), f"GET {url}")
    still_healthy(seeded)


# ------------------------------------------------------------------------------- ids


def id_routes(app: Flask) -> list[tuple[str, str, list[str]]]:
    """(method, rule text, names of its integer arguments) for every route with an id."""
    out = []
    for rule in app.url_map.iter_rules():
        ints = [a for a, c in rule._converters.items() if isinstance(c, IntegerConverter)]
        if ints:
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                out.append((method, rule.rule, ints))
    return out


@EXAMPLES
@given(data=st.data())
def test_every_id_route_answers_below_500(app: Flask, seeded: FlaskClient, data: Any) -> None:
    routes = id_routes(app)
    assert len(routes) >= 15
    method, rule, names = data.draw(st.sampled_from(routes))
    url = rule
    for name in names:
        url = url.replace(f"<int:{name}>", quote(data.draw(id_text), safe=""))
    response = seeded.open(url, method=method, json={})
    no_500(response, f"{method} {url}")
    still_healthy(seeded)


# ----------------------------------------------------------------------------- MLflow

mlflow_value = st.one_of(
    st.none(),
    big_ints,
    st.floats(),
    id_text,
    st.booleans(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
like_filters = st.one_of(
    st.text(max_size=200),
    st.tuples(
        st.sampled_from(["name", "attributes.name", "tags.x"]),
        st.sampled_from(["=", "LIKE", "ILIKE", "!="]),
        st.text(max_size=60),
        st.integers(min_value=0, max_value=3000),
    ).map(lambda t: f"{t[0]} {t[1]} '{t[2] * (1 + t[3] // max(1, len(t[2]) or 1))}'"),
)


@EXAMPLES
@given(
    run_id=id_text,
    experiment_id=id_text,
    page_token=id_text,
    max_results=id_text,
    metric_key=st.text(max_size=20),
    text_filter=like_filters,
)
def test_mlflow_get_parameters_never_answer_500(
    seeded: FlaskClient,
    run_id: str,
    experiment_id: str,
    page_token: str,
    max_results: str,
    metric_key: str,
    text_filter: str,
) -> None:
    gets = {
        "/runs/get": {"run_id": run_id},
        "/experiments/get": {"experiment_id": experiment_id},
        "/experiments/search": {
            "filter": text_filter,
            "page_token": page_token,
            "max_results": max_results,
        },
        "/metrics/get-history": {
            "run_id": run_id,
            "metric_key": metric_key,
            "page_token": page_token,
            "max_results": max_results,
        },
    }
    for path, args in gets.items():
        url = f"{MLFLOW}{path}?{urlencode(args)}"
        no_500(seeded.get(url), f"GET {url}")
    still_healthy(seeded)


@EXAMPLES
@given(
    run_id=mlflow_value,
    experiment_ids=st.one_of(mlflow_value, st.lists(mlflow_value, max_size=3)),
    page_token=mlflow_value,
    max_results=mlflow_value,
    text_filter=st.one_of(mlflow_value, like_filters),
    step=mlflow_value,
    timestamp=mlflow_value,
)
def test_mlflow_post_bodies_never_answer_500(
    seeded: FlaskClient,
    run_id: Any,
    experiment_ids: Any,
    page_token: Any,
    max_results: Any,
    text_filter: Any,
    step: Any,
    timestamp: Any,
) -> None:
    posts = {
        "/experiments/search": {
            "filter": text_filter,
            "page_token": page_token,
            "max_results": max_results,
        },
        "/runs/search": {
            "experiment_ids": experiment_ids,
            "page_token": page_token,
            "max_results": max_results,
        },
        "/runs/log-metric": {
            "run_id": run_id,
            "key": "m",
            "value": 1.0,
            "step": step,
            "timestamp": timestamp,
        },
        "/runs/update": {"run_id": run_id, "status": "FINISHED", "end_time": timestamp},
        "/runs/create": {"experiment_id": experiment_ids, "start_time": timestamp},
    }
    for path, body in posts.items():
        no_500(seeded.post(MLFLOW + path, json=body), f"POST {path} {body!r:.300}")
    still_healthy(seeded)
