"""Runs search with the query language, translated to SQL, on SQLite and PostgreSQL."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.support.web import envelope
from tracker.store import Store
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run, finish_run

NOW = time.time()


@pytest.fixture
def runs(store: Store) -> dict[str, int]:
    """Six runs with mixed config types, metrics (NaN and Inf too), statuses and tags."""
    specs: list[tuple[str, dict[str, Any], dict[str, float], str, list[str]]] = [
        ("adam-a", {"optimizer": "adam", "lr": 0.001, "model": {"width": 64}, "layers": [1, 2]},
         {"val/acc": 0.95, "train/loss": 0.1}, "finished", ["baseline"]),
        ("adam-b", {"optimizer": "adam", "lr": 0.01, "model": {"width": 128}, "flag": True},
         {"val/acc": 0.80, "train/loss": 0.3}, "failed", []),
        ("sgd-a", {"optimizer": "sgd", "lr": 0.1, "model": {"width": 64}, "flag": False},
         {"val/acc": 0.91, "train/loss": math.inf}, "finished", ["baseline", "sgd"]),
        ("sgd-b", {"optimizer": "SGD", "lr": "0.5", "model": {"width": "wide"}},
         {"val/acc": math.nan}, "crashed", []),
        ("plain", {"lr": None, "layers": ["a", 2]}, {}, "running", ["x"]),
        ("other", {"optimizer": "adam"}, {"val/acc": 0.99}, "finished", []),
    ]  # fmt: skip
    ids = {}
    for i, (name, config, metrics, status, tags) in enumerate(specs):
        project = "other" if name == "other" else "main"
        run = create_run(store, project, name, config, tags, now=NOW - 100 * (6 - i))
        if metrics:
            log_metrics(store, run.id, 10, metrics)
        if status != "running":
            finish_run(store, run.id, status, now=NOW - 100 * (6 - i) + 10 * (i + 1))
        ids[name] = run.id
    return ids


def names(client: FlaskClient, query: str, **params: Any) -> list[str]:
    response = client.get("/api/v1/runs", query_string={"q": query, **params})
    assert response.status_code == 200, response.json
    return [r["name"] for r in response.json["runs"]]


QUERIES = [
    ('config.optimizer == "adam"', ["other", "adam-b", "adam-a"]),
    ("config.optimizer == adam and project == main", ["adam-b", "adam-a"]),
    ("config.optimizer != adam", ["plain", "sgd-b", "sgd-a"]),
    ("config.lr > 0.005", ["sgd-b", "sgd-a", "adam-b"]),  # the string "0.5" reads as a number
    ("config.model.width < 1e9", ["sgd-a", "adam-b", "adam-a"]),  # "wide" is not a number
    ("config.lr <= 0.01 and config.lr >= 0.01", ["adam-b"]),
    ("config.lr == null", ["other", "plain"]),  # missing or null
    ("config.model.width == 64", ["sgd-a", "adam-a"]),
    ("config.model.width >= 100", ["adam-b"]),
    ('config.model.width == "wide"', ["sgd-b"]),
    ("config.flag == true", ["adam-b"]),
    ("config.flag == false", ["sgd-a"]),
    ("config.optimizer ~ sg", ["sgd-b", "sgd-a"]),  # case-insensitive substring
    ("config.layers contains 2", ["plain", "adam-a"]),
    ('config.layers contains "a"', ["plain"]),
    ("config.optimizer in (sgd, SGD)", ["sgd-b", "sgd-a"]),
    ("metrics.val/acc > 0.9", ["other", "sgd-a", "adam-a"]),
    ("metrics.val/acc > 0.9 and config.optimizer == adam", ["other", "adam-a"]),
    ("not metrics.val/acc > 0.9", ["plain", "sgd-b", "adam-b"]),  # NaN and missing included
    ("metrics.train/loss > 1e9", ["sgd-a"]),  # +Inf
    ("metrics.no/such > 0", []),
    ("status == failed or status == crashed", ["sgd-b", "adam-b"]),
    ("status in (failed, crashed)", ["sgd-b", "adam-b"]),
    ("status != finished", ["plain", "sgd-b", "adam-b"]),
    ('tags contains "baseline"', ["sgd-a", "adam-a"]),
    ("name ~ ADAM", ["adam-b", "adam-a"]),
    ("duration > 25", ["other", "sgd-b", "sgd-a"]),  # 60, 40 and 30 s
    ("(status == finished or status == failed) and not config.optimizer == adam", ["sgd-a"]),
]


@pytest.mark.parametrize(("query", "expected"), QUERIES)
def test_query_language_matches(
    client: FlaskClient, runs: dict[str, int], query: str, expected: list[str]
) -> None:
    assert names(client, query) == expected


@pytest.mark.filterwarnings("error::sqlalchemy.exc.SADeprecationWarning")
@pytest.mark.parametrize(("query", "expected"), QUERIES)
def test_not_selects_every_other_run(
    client: FlaskClient, runs: dict[str, int], query: str, expected: list[str]
) -> None:
    """``not q`` is every run ``q`` does not select (an unknown comparison counts as false),
    built without operators SQLAlchemy deprecates for the compared column's type."""
    assert sorted(names(client, f"not ({query})")) == sorted(set(runs) - set(expected))


def test_id_and_created_attributes(client: FlaskClient, runs: dict[str, int]) -> None:
    assert names(client, f"id == {runs['plain']}") == ["plain"]
    assert names(client, f"id in ({runs['plain']}, {runs['other']})") == ["other", "plain"]
    assert names(client, f"created > {NOW - 250}") == ["other", "plain"]
    assert len(names(client, "created > 2000-01-01")) == 6
    assert names(client, "created < 2000-01-01") == []


def test_sorting_by_config_and_metric_keeps_missing_last(
    client: FlaskClient, runs: dict[str, int]
) -> None:
    by_acc = names(client, "", sort="metrics.val/acc", order="desc")
    assert by_acc[:4] == ["other", "adam-a", "sgd-a", "adam-b"]
    assert set(by_acc[4:]) == {"sgd-b", "plain"}  # NaN and missing last
    ascending = names(client, "", sort="metrics.val/acc", order="asc")
    assert ascending[:4] == ["adam-b", "sgd-a", "adam-a", "other"]
    width = names(client, "config.model.width >= 0", sort="config.model.width", order="asc")
    assert width == ["adam-a", "sgd-a", "adam-b"]  # ties by id, in the same direction
    assert names(client, "", sort="name", order="asc")[0] == "adam-a"
    assert names(client, "", sort="duration", order="desc")[:2] == ["other", "sgd-b"]


def test_pagination_total_and_projection(client: FlaskClient, runs: dict[str, int]) -> None:
    params = {
        "q": "project == main",
        "sort": "created",
        "order": "asc",
        "limit": 2,
        "offset": 2,
        "config": "model.width,lr,missing.key",
        "metrics": "val/acc",
    }
    doc = client.get("/api/v1/runs", query_string=params).json
    assert doc["total"] == 5 and (doc["limit"], doc["offset"]) == (2, 2)
    assert [r["name"] for r in doc["runs"]] == ["sgd-a", "sgd-b"]
    first, second = doc["runs"]
    assert first["config"] == {"model.width": 64, "lr": 0.1, "missing.key": None}
    assert second["config"] == {"model.width": "wide", "lr": "0.5", "missing.key": None}
    assert first["metrics"] == {"val/acc": 0.91} and second["metrics"] == {"val/acc": "NaN"}
    assert "optimizer" not in str(doc)  # only the chosen columns leave the database
    assert doc["query"] == 'project == "main"'


def test_project_and_tag_pickers(client: FlaskClient, runs: dict[str, int]) -> None:
    assert names(client, "", project="other") == ["other"]
    assert names(client, "", tag=["baseline", "sgd"]) == ["sgd-a"]


@pytest.mark.parametrize(
    ("params", "field", "fragment"),
    [
        ({"q": "config.lr >"}, "q", "position 11"),
        ({"q": "metrics.acc > high"}, "q", "position 14"),
        ({"q": "bogus == 1"}, "q", "unknown field"),
        ({"q": "config.flag > true"}, "q", "only work with == and !="),
        ({"sort": "colour"}, "sort", "not sortable"),
        ({"order": "up"}, "order", "asc or desc"),
        ({"limit": "0"}, "limit", "out of range"),
        ({"limit": "ten"}, "limit", "not an integer"),
    ],
)
def test_bad_searches_name_the_problem(
    client: FlaskClient, runs: dict[str, int], params: dict[str, str], field: str, fragment: str
) -> None:
    response = client.get("/api/v1/runs", query_string=params)
    assert response.status_code == 400
    error = envelope(response)
    assert error["field"] == field and fragment in error["message"], error
