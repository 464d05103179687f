"""The workspace's API on a real SQLite file and a real PostgreSQL database: the batch series
endpoint (many runs x many metrics in one request: the table's query, aligned windows,
bounds, unknown metrics, deleted runs, group-by) and named views (save, list, replace,
delete, audit, scopes)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.web import envelope
from tests.support.workspace_seed import seed_sweep
from tracker.errors import InvalidInput
from tracker.store import lifecycle
from tracker.store.series import read_series
from tracker.store.tokens import create_token
from tracker.store.views import check_view, list_views, view_events
from tracker.store.workspace import MAX_CELLS, MAX_KEYS, MAX_RUNS

LRS = (0.1, 0.01, 0.001)
URL = "/api/v1/workspace/series"


@pytest.fixture
def sweep(store: Any) -> dict[str, int]:
    return seed_sweep(store, lrs=LRS, seeds=3, steps=120)


def get(client: FlaskClient, **params: Any) -> dict[str, Any]:
    response = client.get(URL, query_string=params)
    assert response.status_code == 200, response.json
    return response.json


def test_one_request_draws_every_run_and_metric_on_one_window(
    client: FlaskClient, store: Any, sweep: dict[str, int]
) -> None:
    doc = get(client, keys="train/loss,val/acc", max_buckets=30, project="sweep")
    assert doc["total"] == 9
    assert [r["id"] for r in doc["runs"]] == sorted(
        sweep.values(), reverse=True
    )  # the table's order
    assert doc["differing"] == ["lr", "seed"]  # model.width is the same in every run
    assert doc["runs"][0]["config"] == {"lr": 0.001, "seed": 2}
    assert [k["key"] for k in doc["keys"]] == ["train/loss", "val/acc"]
    loss, acc = doc["keys"]
    assert (loss["lo"], loss["hi"], acc["lo"], acc["hi"]) == (0, 119, 9, 119)
    assert sorted(map(int, loss["series"])) == sorted(sweep.values())
    # each run's series is what the run page reads for the same window (one bucket rule)
    for run_id, got in loss["series"].items():
        one = read_series(store, int(run_id), "train/loss", lo=0, hi=119, max_buckets=30)
        assert got["step"] == [b.last_step for b in one.series.buckets]
        assert got["last"] == pytest.approx([b.last for b in one.series.buckets], rel=1e-6)
        assert got["nonfinite"] == [0] * len(got["step"])
    assert set(acc["series"]["1"]) == {"step", "last", "nonfinite"}
    assert "groups" not in loss and doc["groups"] == []


def test_extra_columns_come_when_asked(client: FlaskClient, sweep: dict[str, int]) -> None:
    doc = get(client, keys="val/acc", fields="min,max,wall_time", runs=str(sweep["lr0.1-s0"]))
    got = doc["keys"][0]["series"][str(sweep["lr0.1-s0"])]
    assert set(got) == {"step", "last", "nonfinite", "min", "max", "wall_time"}
    assert len(got["wall_time"]) == len(got["step"]) == 12  # every 10th step: full resolution
    assert got["min"] == got["max"] == got["last"]
    response = client.get(URL, query_string={"keys": "val/acc", "fields": "median"})
    assert envelope(response)["field"] == "fields"


def test_the_query_project_tags_and_limit_of_the_table_are_respected(
    client: FlaskClient, store: Any, sweep: dict[str, int]
) -> None:
    doc = get(client, keys="train/loss", q="config.lr == 0.01")
    assert sorted(r["name"] for r in doc["runs"]) == ["lr0.01-s0", "lr0.01-s1", "lr0.01-s2"]
    assert doc["total"] == 3
    doc = get(client, keys="train/loss", tag="opt=sgd")
    assert {r["name"] for r in doc["runs"]} == {f"lr{lr:g}-s1" for lr in LRS}
    doc = get(client, keys="train/loss", limit=4, sort="name", order="asc")
    assert [r["name"] for r in doc["runs"]] == [
        "lr0.001-s0",
        "lr0.001-s1",
        "lr0.001-s2",
        "lr0.01-s0",
    ]
    assert (doc["total"], len(doc["keys"][0]["series"])) == (9, 4)
    assert get(client, keys="train/loss", project="other")["runs"] == []
    response = client.get(URL, query_string={"keys": "train/loss", "q": "config.lr =="})
    assert envelope(response)["field"] == "q"


def test_deleted_runs_are_left_out(client: FlaskClient, store: Any, sweep: dict[str, int]) -> None:
    gone = sweep["lr0.1-s0"]
    lifecycle.delete_runs(store, [gone])
    doc = get(client, keys="train/loss")
    assert gone not in [r["id"] for r in doc["runs"]] and doc["total"] == 8
    assert str(gone) not in doc["keys"][0]["series"]
    doc = get(client, keys="train/loss", runs=f"{gone},{sweep['lr0.1-s1']}")
    assert [r["id"] for r in doc["runs"]] == [sweep["lr0.1-s1"]]
    assert list(doc["keys"][0]["series"]) == [str(sweep["lr0.1-s1"])]


def test_unknown_metrics_are_named_and_the_rest_is_drawn(
    client: FlaskClient, sweep: dict[str, int]
) -> None:
    doc = get(client, keys="nope/loss,val/acc,train/nope")
    assert doc["unknown_keys"] == ["nope/loss", "train/nope"]
    assert [k["key"] for k in doc["keys"]] == ["val/acc"]
    response = client.get(URL, query_string={"keys": "val/acc", "runs": "987654"})
    assert response.status_code == 404


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({}, "keys", "keys is required"),
        ({"keys": ",".join(f"k{i}" for i in range(MAX_KEYS + 1))}, "keys", f"at most {MAX_KEYS}"),
        ({"keys": "a", "limit": MAX_RUNS + 1}, "limit", f"1 to {MAX_RUNS}"),
        ({"keys": "a", "limit": 0}, "limit", f"1 to {MAX_RUNS}"),
        ({"keys": "a", "max_buckets": 1001}, "max_buckets", "1 to 1000"),
        ({"keys": "a", "max_buckets": "x"}, "max_buckets", ""),
        ({"keys": "a,b,c,d", "limit": 500, "max_buckets": 1000}, "max_buckets", f"{MAX_CELLS:,}"),
        ({"keys": "a", "group": "lr"}, "group", "config.<key>"),
        ({"keys": "a", "group": "config.lr", "agg": "mode"}, "agg", "mean, median"),
        ({"keys": "a", "band": "iqr"}, "band", "minmax, std, none"),
        ({"keys": "a", "runs": "1,x"}, "runs", "ids"),
    ],
)  # fmt: skip
def test_requests_over_the_bounds_get_a_clear_400(
    client: FlaskClient, params: dict[str, Any], field: str, words: str
) -> None:
    response = client.get(URL, query_string=params)
    assert response.status_code == 400, response.json
    error = envelope(response)
    assert error["field"] == field
    assert words in error["message"]


def test_group_by_a_config_key_aggregates_the_seeds(
    client: FlaskClient, sweep: dict[str, int]
) -> None:
    doc = get(client, keys="train/loss", group="config.lr", max_buckets=12, band="std")
    assert [(g["label"], g["size"]) for g in doc["groups"]] == [
        ("lr=0.001", 3), ("lr=0.01", 3), ("lr=0.1", 3),
    ]  # fmt: skip
    assert set(doc["groups"][1]["runs"]) == {sweep[f"lr0.01-s{s}"] for s in range(3)}
    loss = doc["keys"][0]
    assert len(loss["groups"]) == 3
    for group in loss["groups"]:
        assert len(group["step"]) == 12 and group["n"] == [3] * 12
        for lo, mid, hi in zip(group["lo"], group["center"], group["hi"], strict=True):
            assert lo <= mid <= hi
    # the group's centre is the mean of its members' values in each bucket
    members = [loss["series"][str(i)]["last"] for i in doc["groups"][0]["runs"]]
    means = [sum(v) / 3 for v in zip(*members, strict=True)]
    assert loss["groups"][0]["center"] == pytest.approx(means, rel=1e-5)
    alone = get(client, keys="train/loss", group="config.lr", max_buckets=12, band="std", series=0)
    assert alone["keys"][0]["series"] == {}
    assert alone["keys"][0]["groups"] == loss["groups"]
    by_tag = get(client, keys="train/loss", group="tag.opt", agg="median", band="none")
    assert [(g["label"], g["size"]) for g in by_tag["groups"]] == [("opt=adam", 6), ("opt=sgd", 3)]
    assert by_tag["keys"][0]["groups"][0]["lo"][0] is None


# ---------------------------------------------------------------------- named views


def test_views_are_saved_listed_replaced_and_deleted_with_an_audit_trail(
    client: FlaskClient, store: Any
) -> None:
    state = {"ws": "1", "ws_keys": "train/loss,val/acc", "ws_group": "config.lr", "q": "lr > 0"}
    response = client.post(
        "/api/v1/views", json={"project": "sweep", "name": "lr bands", "state": state}
    )
    assert response.status_code == 201, response.json
    assert response.json["state"] == state and response.json["updated_by"] == "no-auth"
    client.post("/api/v1/views", json={"name": "all", "state": {"ws": "1"}})
    listed = client.get("/api/v1/views").json["views"]
    assert [(v["project"], v["name"]) for v in listed] == [("", "all"), ("sweep", "lr bands")]
    assert [v["name"] for v in client.get("/api/v1/views?project=sweep").json["views"]] == [
        "lr bands"
    ]
    again = client.post(
        "/api/v1/views", json={"project": "sweep", "name": "lr bands", "state": {"ws_cols": 2}}
    )
    assert again.status_code == 201 and again.json["id"] == response.json["id"]
    assert list_views(store, "sweep")[0].state == {"ws_cols": 2}
    deleted = client.post("/api/v1/views/delete", json={"project": "sweep", "name": "lr bands"})
    assert deleted.json == {"deleted": True, "project": "sweep", "name": "lr bands"}
    assert [v.name for v in list_views(store)] == ["all"]
    missing = client.post("/api/v1/views/delete", json={"project": "sweep", "name": "lr bands"})
    assert missing.status_code == 404 and envelope(missing)["field"] == "name"
    events = [(e.action, e.project, e.name, e.by) for e in reversed(view_events(store))]
    assert events == [
        ("created", "sweep", "lr bands", "no-auth"),
        ("created", "", "all", "no-auth"),
        ("updated", "sweep", "lr bands", "no-auth"),
        ("deleted", "sweep", "lr bands", "no-auth"),
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "", "state": {}}, "name"),
        ({"name": " padded", "state": {}}, "name"),
        ({"name": "two\nlines", "state": {}}, "name"),
        ({"name": "x" * 101, "state": {}}, "name"),
        ({"name": 7, "state": {}}, "name"),
        ({"state": {}}, "name"),
        ({"name": "v", "state": []}, "state"),
        ({"name": "v"}, "state"),
        ({"name": "v", "state": {"a": {"nested": 1}}}, "state"),
        ({"name": "v", "state": {"a": "x" * 20_000}}, "state"),
        ({"name": "v", "project": 3, "state": {}}, "project"),
    ],
)
def test_a_bad_view_is_refused_naming_the_field(
    client: FlaskClient, store: Any, body: dict[str, Any], field: str
) -> None:
    response = client.post("/api/v1/views", json=body)
    assert response.status_code == 400, response.json
    assert envelope(response)["field"] == field
    assert list_views(store) == [] and view_events(store) == []


def test_saving_and_deleting_views_need_admin_and_a_json_body(
    make_app: Any,
) -> None:
    app: Flask = make_app(NO_AUTH=False)
    store = app.extensions["tracker"].store
    log = {"Authorization": f"Bearer {create_token(store, 'log', 'reader')[1]}"}
    admin_token = create_token(store, "admin", "lead")
    admin = {"Authorization": f"Bearer {admin_token[1]}"}
    client = app.test_client()
    body = {"name": "v", "state": {"ws": "1"}}
    refused = client.post("/api/v1/views", json=body, headers=log)
    assert refused.status_code == 403
    assert client.get("/api/v1/views", headers=log).json == {"views": []}
    saved = client.post("/api/v1/views", json=body, headers=admin)
    assert saved.status_code == 201 and saved.json["updated_by"] == f"token {admin_token[0].id}"
    form = client.post("/api/v1/views", data="name=v", headers=admin)
    assert form.status_code in (400, 415)
    assert client.post("/api/v1/views/delete", json=body, headers=log).status_code == 403
    assert client.post("/api/v1/views/delete", json=body, headers=admin).status_code == 200
    assert [e.by for e in view_events(store)] == [f"token {admin_token[0].id}"] * 2


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(project=JSON, name=JSON, state=JSON)
@settings(max_examples=300, deadline=None)
def test_any_json_body_is_a_view_or_a_400_naming_its_field(
    project: Any, name: Any, state: Any
) -> None:
    """Untrusted input: whatever the JSON body holds, the rule answers a view or
    InvalidInput naming project, name or state (never another exception: no 500)."""
    try:
        checked = check_view(project, name, state)
    except InvalidInput as exc:
        assert exc.field in {"project", "name", "state"}
    else:
        assert checked == (project, name, state)
