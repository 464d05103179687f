"""A queued job's MLflow calls log into its own run, with its own token (issue 31): a real
worker started with ``--job-uri http://...`` against a real ``tracker ui`` that needs a token
gives the job ``MLFLOW_TRACKING_URI``, ``MLFLOW_RUN_ID`` and ``MLFLOW_TRACKING_TOKEN`` (its
``TRACKER_TOKEN``: ``log`` scope, its run only). An unchanged MLflow script --
``mlflow.start_run()``, ``log_param``, ``log_metric`` with steps, ``set_tag``, ``end_run``
-- logs into the job's run, and the same script's ``MlflowClient`` calls on another run, and
calls that name no run, are refused 403 with nothing written. Then the guard's reading of the
MLflow run fields (``security.MLFLOW_RUN_FIELD_ENDPOINTS``) case by case on a real app: query
and JSON body (gzip too) must all name the token's run. SQLite and PostgreSQL."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from tests.support.polling import wait_for
from tests.support.web import TOKEN
from tests.web.test_remote_submit import (  # noqa: F401 - the fixture
    Dashboard,
    WorkerProcs,
    dashboard,
)
from tracker.entities import JobSpec
from tracker.rules.tags import join_tag
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.store.metrics import metric_history
from tracker.store.runs import create_run, get_run, list_runs
from tracker.store.tokens import create_job_token
from tracker.web.plumbing.security import MLFLOW_RUN_FIELD_ENDPOINTS

TRAIN = """\
import json, os, sys
import mlflow
from mlflow import MlflowClient
from mlflow.exceptions import RestException
from mlflow.utils.credentials import get_default_host_creds
from mlflow.utils.rest_utils import http_request

other, report = sys.argv[1:3]
seen = {k: os.environ.get(k) for k in (
    "MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_TRACKING_TOKEN", "TRACKER_TOKEN",
    "TRACKER_RUN_ID")}
# the training code itself: unchanged MLflow
run = mlflow.start_run()
mlflow.log_param("lr", 0.1)
for step in range(3):
    mlflow.log_metric("loss", 1.0 / 2 ** step, step=step)
mlflow.set_tag("phase", "warmup")
mlflow.end_run()
seen["active_run"] = run.info.run_id

# the same client on another run: refused
client = MlflowClient()
refused = {}
for name, call in {
    "get_run": lambda: client.get_run(other),
    "log_metric": lambda: client.log_metric(other, "loss", 9.0, step=0),
    "log_param": lambda: client.log_param(other, "lr", "9"),
    "set_tag": lambda: client.set_tag(other, "phase", "stolen"),
    "terminated": lambda: client.set_terminated(other),
}.items():
    try:
        call()
        refused[name] = None
    except RestException as exc:
        refused[name] = exc.error_code
seen["client_on_other_run"] = refused

# the HTTP status of each, through MLflow's own transport and credentials
creds = get_default_host_creds(os.environ["MLFLOW_TRACKING_URI"])
def status(endpoint, method, **kw):
    answer = http_request(creds, "/api/2.0/mlflow/" + endpoint, method, max_retries=0,
                          raise_on_status=False, **kw)
    return answer.status_code
own = os.environ["TRACKER_RUN_ID"]
seen["status"] = {
    "own_get": status("runs/get", "GET", params={"run_id": own}),
    "own_history": status("metrics/get-history", "GET",
                          params={"run_id": own, "metric_key": "loss"}),
    "other_get": status("runs/get", "GET", params={"run_id": other}),
    "other_history": status("metrics/get-history", "GET",
                            params={"run_id": other, "metric_key": "loss"}),
    "other_log_batch": status("runs/log-batch", "POST", json={"run_id": other, "metrics": [
        {"key": "loss", "value": 9.0, "timestamp": 0, "step": 0}]}),
    "own_in_query_other_in_body": status("runs/log-metric?run_id=" + own, "POST", json={
        "run_id": other, "key": "loss", "value": 9.0, "timestamp": 0, "step": 0}),
    "no_run_experiment": status("experiments/get-by-name", "GET",
                                params={"experiment_name": "Default"}),
    "no_run_search": status("runs/search", "POST", json={"experiment_ids": ["0"]}),
    "no_run_create": status("runs/create", "POST", json={"experiment_id": "0"}),
}
with open(report, "w") as f:
    json.dump(seen, f)
"""


def test_a_jobs_mlflow_calls_log_into_its_own_run_and_no_other(
    store_url: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    del store_url  # parametrizes the dashboard's store: SQLite and PostgreSQL
    dash: Dashboard = request.getfixturevalue("dashboard")
    train = tmp_path / "train.py"
    train.write_text(TRAIN)
    report = tmp_path / "report.json"
    store = Store(dash.store_url)
    other = create_run(store, "private", "someone-else")
    job = queue.enqueue(
        store, JobSpec(argv=[sys.executable, str(train), str(other.id), str(report)])
    )

    procs = WorkerProcs(dash, tmp_path / "worker")
    (tmp_path / "worker").mkdir()
    env = procs.env
    # the worker's own admin token; no MLflow setting of its own
    procs.env = lambda: {  # type: ignore[method-assign]
        **{k: v for k, v in env().items() if not k.startswith("MLFLOW_")},
        "TRACKER_TOKEN": TOKEN,
    }
    try:
        procs.worker("--gpus", "none", "--job-uri", dash.url, "--exit-when-idle")
        done = wait_for(
            lambda: (j := store_jobs.get_job(store, job.id)).is_final and j, 120, "the job"
        )
    finally:
        procs.close()
    assert done.status == "succeeded", (done.failure_hint, [p.output() for p in procs.started])
    seen = json.loads(report.read_text())
    own = str(done.run_id)
    token = seen["MLFLOW_TRACKING_TOKEN"]
    assert seen["MLFLOW_TRACKING_URI"] == dash.url and seen["MLFLOW_RUN_ID"] == own
    assert token == seen["TRACKER_TOKEN"] and token.startswith("trk_") and token != TOKEN
    assert seen["active_run"] == own == seen["TRACKER_RUN_ID"]
    assert seen["client_on_other_run"] == dict.fromkeys(
        ("get_run", "log_metric", "log_param", "set_tag", "terminated"), "PERMISSION_DENIED"
    )
    assert seen["status"] == {
        "own_get": 200,
        "own_history": 200,
        "other_get": 403,
        "other_history": 403,
        "other_log_batch": 403,
        "own_in_query_other_in_body": 403,
        "no_run_experiment": 403,
        "no_run_search": 403,
        "no_run_create": 403,
    }
    # what MLflow logged is in the job's run
    points = metric_history(store, done.run_id or 0, "loss")
    assert [(p.step, p.value) for p in points] == [(0, 1.0), (1, 0.5), (2, 0.25)]
    logged = get_run(store, done.run_id or 0)
    assert logged.config.get("lr") == "0.1"
    assert join_tag("phase", "warmup") in logged.tags
    # and nothing in the other run
    untouched = get_run(store, other.id)
    assert metric_history(store, other.id, "loss") == []
    assert (untouched.status, untouched.config, untouched.tags) == (
        other.status, other.config, other.tags,
    )  # fmt: skip
    # no run of MLflow's own
    assert {r.id for r in list_runs(store, deleted=None)} == {other.id, done.run_id}
    store.close()


# ------------------------------------------------------------ the guard, case by case


def _metric(run: Any, step: int = 0) -> dict[str, Any]:
    return {"run_id": run, "key": "loss", "value": 1.0, "timestamp": 0, "step": step}


OWN, OTHER = "{own}", "{other}"
# (method, path, body, gzip it, the answer to a job's own token)
CASES: list[tuple[str, str, Any, bool, int]] = [
    ("GET", f"runs/get?run_id={OWN}", None, False, 200),
    ("GET", f"runs/get?run_uuid={OWN}&run_id={OWN}", None, False, 200),
    ("GET", f"runs/get?run_id={OTHER}", None, False, 403),
    ("GET", f"runs/get?run_uuid={OTHER}&run_id={OWN}", None, False, 403),
    ("GET", f"runs/get?run_id={OWN}&run_id={OTHER}", None, False, 403),
    ("GET", "runs/get?run_id=abc", None, False, 403),
    ("GET", "runs/get", None, False, 403),
    ("GET", f"metrics/get-history?run_id={OWN}&metric_key=loss", None, False, 200),
    ("GET", f"metrics/get-history?run_id={OTHER}&metric_key=loss", None, False, 403),
    ("POST", "runs/log-metric", _metric(OWN), False, 200),
    ("POST", "runs/log-metric", _metric(OTHER), False, 403),
    ("POST", "runs/log-metric", {**_metric(OWN), "run_uuid": OTHER}, False, 403),
    ("POST", "runs/log-metric", {**_metric("", 1), "run_uuid": OWN}, False, 200),  # as MLflow 1
    ("POST", f"runs/log-metric?run_id={OWN}", _metric(OTHER), False, 403),
    ("POST", "runs/log-metric", _metric(" 0x1 "), False, 403),
    ("POST", "runs/log-metric", [_metric(OWN)], False, 403),  # not a JSON object
    ("POST", "runs/log-batch", {"run_id": OWN, "metrics": [_metric(OWN, 2)]}, True, 200),
    ("POST", "runs/log-batch", {"run_id": OTHER, "metrics": [_metric(OTHER)]}, True, 403),
    ("POST", "runs/log-parameter", {"run_id": OWN, "key": "lr", "value": "0.1"}, False, 200),
    ("POST", "runs/set-tag", {"run_id": OTHER, "key": "a", "value": "b"}, False, 403),
    ("POST", "runs/update", {"run_id": OWN, "status": "RUNNING"}, False, 200),
    ("POST", "runs/update", {"run_id": OTHER, "status": "KILLED"}, False, 403),
    # routes that take their target from another field: a run_id opens none of them
    ("POST", f"experiments/update?run_id={OWN}", {"experiment_id": "1", "new_name": "x"},
     False, 403),
    ("POST", "experiments/set-experiment-tag",
     {"run_id": OWN, "experiment_id": "1", "key": "a", "value": "b"}, False, 403),
    ("POST", "runs/create", {"run_id": OWN, "experiment_id": "0"}, False, 403),
    ("POST", "runs/search", {"run_id": OWN, "experiment_ids": ["0"]}, False, 403),
    ("GET", f"experiments/get?experiment_id=1&run_id={OWN}", None, False, 403),
]  # fmt: skip


def test_the_guard_reads_the_mlflow_run_fields(token_app: Flask) -> None:
    store: Store = token_app.extensions["tracker"].store
    queue.enqueue(store, JobSpec(argv=["python", "train.py"], project="jobs"))
    claimed = queue.claim(store, "w", lease_s=600)
    assert claimed is not None
    claim = claimed[0]
    token = create_job_token(store, claim.run_id, claim.job.id, claim.attempt)[1]
    other = create_run(store, "private", "someone-else")
    ids = {"own": claim.run_id, "other": other.id}
    client = token_app.test_client()
    got = []
    for method, path, body, zipped, _ in CASES:
        headers = {"Authorization": f"Bearer {token}"}
        data = None
        if body is not None:
            text = json.dumps(body).replace(OWN, str(ids["own"]))
            data = text.replace(OTHER, str(ids["other"])).encode()
            headers["Content-Type"] = "application/json"
            if zipped:
                data = gzip.compress(data)
                headers["Content-Encoding"] = "gzip"
        url = "/api/2.0/mlflow/" + path.format(**ids)
        answer = client.open(url, method=method, data=data, headers=headers)
        got.append((method, path, answer.status_code))
    assert got == [(m, p, status) for m, p, _, _, status in CASES]
    assert metric_history(store, other.id, "loss") == []
    assert [p.step for p in metric_history(store, claim.run_id, "loss")] == [0, 1, 2]


def test_every_mlflow_run_field_endpoint_is_a_route(token_app: Flask) -> None:
    """The table names real endpoints of the MLflow blueprints (a rename would otherwise
    silently refuse a job's MLflow calls)."""
    endpoints = {rule.endpoint for rule in token_app.url_map.iter_rules()}
    assert endpoints >= MLFLOW_RUN_FIELD_ENDPOINTS
    assert all(e.split(".")[0].startswith("mlflow") for e in MLFLOW_RUN_FIELD_ENDPOINTS)
