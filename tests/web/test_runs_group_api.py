"""``GET /api/v1/runs?group=...`` on a real SQLite file and a real PostgreSQL database: the
runs table grouped by a config key or a tag (one group row per value, status counts, the
metric columns' mean/min/max), following the table's query and sort, the "(none)" group,
the bound on the runs read, and the error for a bad key."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.support.web import envelope
from tests.support.workspace_seed import seed_sweep
from tracker.store import Store
from tracker.store.run_groups import MAX_GROUPED_RUNS
from tracker.store.runs import create_run

LRS = (0.1, 0.01, 0.001)


@pytest.fixture
def sweep(store: Store) -> dict[str, int]:
    # 3 lrs x 3 seeds; the last run (lr=0.001, seed 2) still running
    return seed_sweep(store, lrs=LRS, seeds=3, steps=40, running=1)


def get(client: FlaskClient, **params: Any) -> dict[str, Any]:
    response = client.get("/api/v1/runs", query_string=params)
    assert response.status_code == 200, response.json
    return response.json


def test_one_group_row_per_value_with_counts_and_metric_summaries(
    client: FlaskClient, sweep: dict[str, int]
) -> None:
    doc = get(client, group="config.lr", metrics="val/acc", sort="config.lr", order="asc")
    assert doc["group"] == "config.lr" and doc["total"] == 9 and doc["truncated"] is False
    assert [g["label"] for g in doc["groups"]] == ["lr=0.001", "lr=0.01", "lr=0.1"]
    assert [g["size"] for g in doc["groups"]] == [3, 3, 3]
    assert doc["groups"][0]["statuses"] == {"finished": 2, "running": 1}
    assert doc["groups"][1]["statuses"] == {"finished": 3}
    by_id = {r["id"]: r for r in doc["runs"]}
    assert sorted(by_id) == sorted(sweep.values())
    for group in doc["groups"]:
        members = [by_id[i] for i in group["run_ids"]]
        assert {m["config"]["lr"] for m in members} == {group["value"]}
        values = [m["metrics"]["val/acc"] for m in members]
        acc = group["metrics"]["val/acc"]
        assert acc["n"] == 3
        assert acc["mean"] == pytest.approx(statistics.fmean(values))
        assert (acc["min"], acc["max"]) == (min(values), max(values))


def test_groups_follow_the_query_and_the_sort(client: FlaskClient, sweep: dict[str, int]) -> None:
    doc = get(client, group="config.lr", q="config.seed < 2", sort="config.lr", order="desc")
    assert [g["label"] for g in doc["groups"]] == ["lr=0.1", "lr=0.01", "lr=0.001"]
    assert [g["size"] for g in doc["groups"]] == [2, 2, 2]
    # members in the table's order: by the sort, then ties by id in the same direction
    order = [r["id"] for r in doc["runs"]]
    for group in doc["groups"]:
        assert list(group["run_ids"]) == sorted(group["run_ids"], key=order.index)
    by_seed = get(client, group="config.lr", sort="config.seed", order="desc")
    first = by_seed["runs"][0]["id"]
    assert first in by_seed["groups"][0]["run_ids"]


def test_runs_without_the_key_form_the_none_group_last(
    client: FlaskClient, store: Store, sweep: dict[str, int]
) -> None:
    odd = create_run(store, "sweep", "no-lr", {"seed": 9}, ["opt=adam"])
    nulled = create_run(store, "sweep", "null-lr", {"lr": None}, [])
    doc = get(client, group="config.lr", project="sweep")
    assert doc["groups"][-1]["label"] == "lr=(none)"
    assert sorted(doc["groups"][-1]["run_ids"]) == sorted([odd.id, nulled.id])
    assert doc["groups"][-1]["value"] is None
    tags = get(client, group="tag.opt")
    assert {g["label"]: g["size"] for g in tags["groups"]} == {
        "opt=adam": 7,
        "opt=sgd": 3,
        "opt=(none)": 1,
    }


def test_grouping_reads_at_most_the_bound_and_says_when_more_matched(
    client: FlaskClient, store: Store
) -> None:
    assert MAX_GROUPED_RUNS == 500
    seed_sweep(store, lrs=(0.1, 0.01), seeds=1, steps=5)
    doc = get(client, group="config.lr", limit=1, offset=1)  # pages do not apply
    assert doc["limit"] == MAX_GROUPED_RUNS and doc["offset"] == 0
    assert len(doc["runs"]) == 2 and doc["truncated"] is False


@pytest.mark.parametrize("bad", ["lr", "tags.opt", "config.", "metrics.val/acc"])
def test_a_bad_group_key_is_a_400_naming_the_field(
    client: FlaskClient, sweep: dict[str, int], bad: str
) -> None:
    response = client.get("/api/v1/runs", query_string={"group": bad})
    assert response.status_code == 400
    error = envelope(response)
    assert error["code"] == "invalid_group" and error["field"] == "group"
    assert "config.<key>" in error["message"]


def test_the_csv_ignores_the_grouping(client: FlaskClient, sweep: dict[str, int]) -> None:
    plain = client.get("/api/v1/runs.csv", query_string={"config": "lr"})
    grouped = client.get("/api/v1/runs.csv", query_string={"config": "lr", "group": "config.lr"})
    assert plain.status_code == grouped.status_code == 200
    assert grouped.data == plain.data
