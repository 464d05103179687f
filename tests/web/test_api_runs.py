"""API tests for runs, metrics, series, checkpoints, events, logs, compare and ingest, on a
real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from tests.support.web import envelope
from tracker.entities import JobSpec
from tracker.store import models as m
from tracker.store import queue
from tracker.store.metrics import count_points, metric_history


def new_run(client: FlaskClient, **body: Any) -> dict[str, Any]:
    payload = {"project": "p", "config": {"lr": 0.1}, "tags": ["t"], **body}
    response = client.post("/api/v1/runs", json=payload)
    assert response.status_code == 201, response.json
    return response.json


def post_metrics(client: FlaskClient, run_id: int, records: list[Any], **kw: Any) -> Any:
    return client.post(f"/api/v1/runs/{run_id}/metrics", json={"records": records}, **kw)


def test_health_and_projects(client: FlaskClient) -> None:
    assert client.get("/api/v1/health").json["ok"] is True
    new_run(client, project="alpha")
    new_run(client, project="beta")
    assert client.get("/api/v1/projects").json == {"projects": ["alpha", "beta"]}


def test_run_lifecycle_over_the_api(client: FlaskClient) -> None:
    run = new_run(client, name="r1", host="h", pid=12, command=["python", "t.py"])
    assert (run["status"], run["name"], run["config"], run["tags"]) == (
        "running",
        "r1",
        {"lr": 0.1},
        ["t"],
    )
    queued = new_run(client, status="queued")
    started = client.post(
        f"/api/v1/runs/{queued['id']}/start", json={"config": {"lr": 0.5}, "pid": 7}
    ).json
    assert (started["status"], started["config"], started["pid"]) == ("running", {"lr": 0.5}, 7)
    assert client.post(f"/api/v1/runs/{run['id']}/heartbeat", json={}).status_code == 200
    done = client.post(
        f"/api/v1/runs/{run['id']}/finish",
        json={"status": "failed", "exit_code": 3, "error": "boom", "failure_class": "oom"},
    )
    assert done.status_code == 200
    detail = client.get(f"/api/v1/runs/{run['id']}").json
    assert (detail["status"], detail["exit_code"], detail["failure_class"]) == ("failed", 3, "oom")
    assert detail["job"] is None and detail["duration"] is not None


@pytest.mark.parametrize(
    ("raw", "field"),
    [('{"project": "p", "name": "a\\ud800b"}', "name"),
     ('{"project": "p", "config": {"opt": {"x": ["ok", "\\udfff"]}}}', "config.opt.x[1]"),
     ('{"project": "p", "config": {"\\udc00": 1}}', "config"),
     ('{"project": "p", "tags": ["\\ud83d"]}', "tags[0]")],
)  # fmt: skip
def test_a_lone_surrogate_is_refused_by_name_not_a_500(
    client: FlaskClient, raw: str, field: str
) -> None:
    """JSON may escape half of a UTF-16 pair; no database stores one: 400 naming where."""
    response = client.post("/api/v1/runs", data=raw, content_type="application/json")
    assert response.status_code == 400, response.data
    error = envelope(response)
    assert (error["code"], error["field"]) == ("invalid_input", field)
    assert "surrogate" in error["message"]
    paired = '{"project": "p", "name": "rocket \\ud83d\\ude80"}'  # one character, escaped
    response = client.post("/api/v1/runs", data=paired, content_type="application/json")
    assert response.status_code == 201 and response.json["name"] == "rocket \U0001f680"


def test_bad_run_bodies_are_named(client: FlaskClient) -> None:
    error = envelope(client.post("/api/v1/runs", json={"config": [1, 2]}))
    assert (error["code"], error["field"]) == ("invalid_input", "config")
    raw = '{"config": {"x": Infinity}}'  # Python's JSON reads it; configs must be finite
    error = envelope(client.post("/api/v1/runs", data=raw, content_type="application/json"))
    assert error["field"] == "config.x"
    assert envelope(client.post("/api/v1/runs", data="{", content_type="application/json"))
    assert envelope(client.post("/api/v1/runs", data="[1]", content_type="application/json"))
    run = new_run(client)
    error = envelope(client.post(f"/api/v1/runs/{run['id']}/finish", json={"status": "done"}))
    assert error["field"] == "status"
    response = client.post("/api/v1/runs/999/finish", json={"status": "finished"})
    assert response.status_code == 404 and envelope(response)["code"] == "not_found"


def test_metrics_ingest_is_idempotent_and_keeps_nan_and_inf(client: FlaskClient, store) -> None:
    run = new_run(client)
    records = [[i, 1_700_000_000_000 + i, {"train/loss": 1.0 / (i + 1)}] for i in range(100)]
    records[7][2]["train/loss"] = "NaN"
    records[8][2]["train/loss"] = "Infinity"
    records[9][2]["train/loss"] = None  # also NaN
    for _ in range(2):  # a retried batch must not duplicate anything
        response = post_metrics(client, run["id"], records)
        assert response.json == {"run_id": run["id"], "points": 100}
    history = metric_history(store, run["id"], "train/loss")
    assert [p.step for p in history] == list(range(100))
    assert math.isnan(history[7].value) and history[8].value == math.inf
    assert math.isnan(history[9].value) and history[10].value == 1 / 11
    summary = client.get(f"/api/v1/runs/{run['id']}/metrics").json["metrics"]
    assert summary == [
        {
            "key": "train/loss",
            "last_step": 99,
            "last_wall_time": 1_700_000_000.099,
            "last_value": 0.01,
        }
    ]


def test_gzip_ingest(client: FlaskClient, store) -> None:
    run = new_run(client)
    records = [[i, 1, {"a": float(i), "b": -float(i)}] for i in range(5000)]
    body = gzip.compress(json.dumps({"records": records}).encode())
    response = client.post(
        f"/api/v1/runs/{run['id']}/metrics",
        data=body,
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert response.json["points"] == 10_000
    assert count_points(store, run["id"]) == 10_000
    corrupt = client.post(
        f"/api/v1/runs/{run['id']}/metrics",
        data=b"\x1f\x8bnot gzip",
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert envelope(corrupt)["field"] == "body"


def test_bad_metric_batches_change_nothing(client: FlaskClient, store) -> None:
    run = new_run(client)
    cases = [
        ({"records": "x"}, "records"),
        ({"records": [[1, 2]]}, "records"),
        ({"records": [[-1, 2, {"a": 1}]]}, "step"),
        ({"records": [[True, 2, {"a": 1}]]}, "step"),
        ({"records": [[1, "now", {"a": 1}]]}, "wall_ms"),
        ({"records": [[1, 2, {"a//b": 1}]]}, "a//b"),
        ({"records": [[0, 2, {"ok": 1.0}], [1, 2, {"a": "high"}]]}, "a"),
        ({"records": [[1, 2, {"a": True}]]}, "a"),
    ]
    for body, field in cases:
        response = client.post(f"/api/v1/runs/{run['id']}/metrics", json=body)
        assert response.status_code == 400, body
        assert envelope(response)["field"] == field, body
    assert count_points(store, run["id"]) == 0
    missing = post_metrics(client, 12345, [[0, 0, {"a": 1.0}]])
    assert missing.status_code == 404


def test_series_full_resolution_and_buckets(client: FlaskClient, store) -> None:
    run = new_run(client)
    values = [0.0] * 3000
    values[1234] = 99.0  # a one-step spike
    values[2000] = math.nan
    post_metrics(client, run["id"], [[i, 1000 * i, {"loss": v}] for i, v in enumerate(values)])
    series = client.get(f"/api/v1/runs/{run['id']}/series?key=loss&max_buckets=100").json
    (payload,) = series["series"]
    assert payload["resolution"] == "bucketed" and len(payload["count"]) == 100
    assert sum(payload["count"]) == 3000 and max(payload["max"]) == 99.0
    assert sum(payload["nan"]) == 1 and payload["wall_time"][-1] == 2999.0
    zoom = client.get(f"/api/v1/runs/{run['id']}/series?key=loss&lo=1200&hi=1299").json
    (payload,) = zoom["series"]
    assert payload["resolution"] == "full" and payload["first_step"] == list(range(1200, 1300))
    assert payload["last"][34] == 99.0
    empty = client.get(f"/api/v1/runs/{run['id']}/series?key=loss&lo=5000&hi=6000").json
    assert empty["series"][0]["count"] == []
    assert envelope(client.get(f"/api/v1/runs/{run['id']}/series?key=nope"))["field"] == "key"
    bad = client.get(f"/api/v1/runs/{run['id']}/series?key=loss&lo=9&hi=1")
    assert bad.status_code == 400 and envelope(bad)["field"] == "lo"
    assert envelope(client.get(f"/api/v1/runs/{run['id']}/series?key=loss&max_buckets=0"))
    assert client.get("/api/v1/runs/999/series?key=loss").status_code == 404


def test_series_of_several_runs(client: FlaskClient) -> None:
    ids = []
    for scale in (1.0, 2.0, 3.0):
        run = new_run(client)
        post_metrics(client, run["id"], [[i, i, {"acc": scale * i}] for i in range(10)])
        ids.append(run["id"])
    doc = client.get(f"/api/v1/series?key=acc&runs={','.join(map(str, ids))}").json
    assert list(doc["series"]) == [str(i) for i in ids]
    assert [doc["series"][str(i)]["last"][-1] for i in ids] == [9.0, 18.0, 27.0]
    assert envelope(client.get("/api/v1/series?key=acc&runs=a,b"))["field"] == "runs"


def test_checkpoints_events_and_state(make_app: Callable[..., Flask], tmp_path: Path) -> None:
    client = make_app(CHECKPOINT_ROOTS=[str(tmp_path / "ckpts")]).test_client()
    run = new_run(client)
    body = {"step": 10, "path": str(tmp_path / "ckpts" / "x.pt"), "bytes": 5, "sha256": "ab" * 32}
    created = client.post(f"/api/v1/runs/{run['id']}/checkpoints", json=body)
    assert created.status_code == 201
    cid = created.json["id"]
    listed = client.get(f"/api/v1/runs/{run['id']}/checkpoints").json["checkpoints"]
    assert [(c["id"], c["step"], c["state"]) for c in listed] == [(cid, 10, "ok")]
    assert listed[0]["download_url"] == f"/api/v1/checkpoints/{cid}/download"
    patched = client.patch(f"/api/v1/checkpoints/{cid}", json={"state": "corrupt"})
    assert patched.json == {"id": cid, "state": "corrupt"}
    assert client.patch("/api/v1/checkpoints/999", json={"state": "ok"}).status_code == 404
    assert envelope(client.patch(f"/api/v1/checkpoints/{cid}", json={"state": "x"}))
    for i in range(3):
        client.post(f"/api/v1/runs/{run['id']}/events", json={"kind": "note", "message": f"m{i}"})
    first = client.get(f"/api/v1/runs/{run['id']}/events?limit=2").json
    assert [e["message"] for e in first["events"]] == ["m0", "m1"]
    rest = client.get(f"/api/v1/runs/{run['id']}/events?after={first['next_after']}").json
    assert [e["message"] for e in rest["events"]] == ["m2"]
    missing = client.post("/api/v1/runs/999/events", json={"kind": "k", "message": "m"})
    assert missing.status_code == 404


def test_run_logs_follow_the_job_chunks(client: FlaskClient, store) -> None:
    run = new_run(client)
    assert client.get(f"/api/v1/runs/{run['id']}/logs").json == {
        "job_id": None,
        "chunks": [],
        "next_after": 0,
    }
    with store.engine.begin() as conn:
        job_id = conn.execute(
            sa.insert(m.JobRow)
            .values(
                project="p",
                status="running",
                argv=["x"],
                config={},
                resources={},
                env={},
                run_id=run["id"],
                created_at=0.0,
            )
            .returning(m.JobRow.id)
        ).scalar_one()
        for i in range(5):
            stream = "stderr" if i == 3 else "stdout"
            conn.execute(
                sa.insert(m.JobLogChunkRow).values(
                    job_id=job_id, attempt=1, stream=stream, at=float(i), text=f"line {i}\n"
                )
            )
    doc = client.get(f"/api/v1/runs/{run['id']}/logs?limit=2").json
    assert doc["job_id"] == job_id and [c["text"] for c in doc["chunks"]] == [
        "line 0\n",
        "line 1\n",
    ]
    more = client.get(f"/api/v1/runs/{run['id']}/logs?after={doc['next_after']}").json
    assert [c["text"] for c in more["chunks"]] == ["line 2\n", "line 3\n", "line 4\n"]
    tail = client.get(f"/api/v1/jobs/{job_id}/logs?tail=1&limit=2").json
    assert [c["text"] for c in tail["chunks"]] == ["line 3\n", "line 4\n"]
    err = client.get(f"/api/v1/jobs/{job_id}/logs?stream=stderr").json
    assert [c["text"] for c in err["chunks"]] == ["line 3\n"]
    assert envelope(client.get(f"/api/v1/jobs/{job_id}/logs?stream=both"))["field"] == "stream"


def test_compare_shows_only_differing_keys(client: FlaskClient) -> None:
    a = new_run(client, config={"lr": 0.1, "model": {"width": 64}, "seed": 1})
    b = new_run(client, config={"lr": 0.2, "model": {"width": 64}, "seed": 1})
    c = new_run(client, config={"lr": 0.1, "model": {"width": 64}})
    doc = client.get(f"/api/v1/compare?runs={a['id']},{b['id']},{c['id']}").json
    assert [r["id"] for r in doc["runs"]] == [a["id"], b["id"], c["id"]]
    assert doc["rows"] == [
        {"key": "lr", "differs": True, "values": [0.1, 0.2, 0.1], "missing": [False] * 3},
        {"key": "seed", "differs": True, "values": [1, 1, None], "missing": [False, False, True]},
    ]
    every = client.get(f"/api/v1/compare?runs={a['id']},{b['id']}&all=1").json
    assert [r["key"] for r in every["rows"]] == ["lr", "model.width", "seed"]
    assert client.get(f"/api/v1/compare?runs={a['id']},999").status_code == 404


def test_columns_for_the_column_chooser(client: FlaskClient) -> None:
    run = new_run(client, project="x", config={"lr": 0.1, "model": {"width": 64}})
    new_run(client, project="y", config={"other": 1})
    post_metrics(client, run["id"], [[0, 0, {"val/acc": 0.5}]])
    doc = client.get("/api/v1/runs/columns?project=x").json
    assert doc["config"] == ["lr", "model.width"] and doc["metrics"] == ["val/acc"]
    assert "duration" in doc["attributes"]


def test_clone_run_copies_its_job_with_an_edited_config(client: FlaskClient) -> None:
    """A run is cloned through the job that ran it; a run no job ran is refused (409): see
    tests/web/test_launch_provenance.py for why."""
    store = client.application.extensions["tracker"].store
    spec = JobSpec(["python", "train.py", "--x"], "p", config={"lr": 0.1, "m": {"w": 1}},
                   tags=("t",))  # fmt: skip
    run = client.get(f"/api/v1/runs/{queue.enqueue(store, spec).run_id}").json
    response = client.post(
        f"/api/v1/runs/{run['id']}/clone",
        json={"config": {"lr": 0.3, "m": {"w": 1}}, "grid": {"m.w": [2, 4]}, "priority": 5},
    )
    assert response.status_code == 201
    ids = response.json["job_ids"]
    jobs = [client.get(f"/api/v1/jobs/{i}").json for i in ids]
    assert [j["config"] for j in jobs] == [{"lr": 0.3, "m": {"w": 2}}, {"lr": 0.3, "m": {"w": 4}}]
    assert all(j["argv"] == ["python", "train.py", "--x"] for j in jobs)
    assert all(j["status"] == "queued" and j["priority"] == 5 for j in jobs)
    new_runs = [client.get(f"/api/v1/runs/{j['run_id']}").json for j in jobs]
    assert all(r["status"] == "queued" and r["tags"] == ["t"] for r in new_runs)
    assert new_runs[0]["name"] == f"train-job{ids[0]}"
    by_hand = new_run(client, command=["python", "train.py", "--x"])
    assert client.post(f"/api/v1/runs/{by_hand['id']}/clone", json={}).status_code == 409
