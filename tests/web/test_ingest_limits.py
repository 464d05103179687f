"""Bounded ingest (issue 9): a body is bounded while it is inflated, the record and key
limits hold before anything is written, a run's metric keys are capped, and while an abusive
upload is refused the server keeps answering with little memory. The HTTP sink splits its
batches to stay inside the limits."""

from __future__ import annotations

import gzip
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.support.abuse import ABUSER_TOKEN, MIB, gzip_records, upload_while_probing
from tests.support.web import SCRIPTS, Proc, envelope
from tracker.client.http_sink import MAX_POINTS_PER_REQUEST, HttpSink
from tracker.store.metrics import count_points, metric_history, metric_keys
from tracker.store.runs import create_run, get_run
from tracker.web.core.ingest import MAX_KEYS_PER_REQUEST, MAX_KEYS_PER_RUN, MAX_RECORDS

GZIP = {"Content-Type": "application/json", "Content-Encoding": "gzip"}


@pytest.fixture
def run_id(store: Any) -> int:
    return int(create_run(store, project="p", name="r", config={}, tags=[]).id)


def post_gzip(client: FlaskClient, url: str, body: bytes) -> Any:
    return client.post(url, data=body, headers=GZIP)


def test_a_gzip_bomb_is_refused_while_inflating_with_bounded_memory(
    client: FlaskClient, app: Flask, run_id: int, store: Any
) -> None:
    bomb = gzip_records(64 * MIB, dense=False)  # ~1 MiB on the wire
    assert len(bomb) < app.config["MAX_CONTENT_LENGTH"]
    tracemalloc.start()
    try:
        response = post_gzip(client, f"/api/v1/runs/{run_id}/metrics", bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 413, response.data[:300]
    error = envelope(response)
    assert error["code"] == "payload_too_large" and error["field"] == "body"
    assert peak < app.config["MAX_INFLATED_BYTES"] * 3, f"peak {peak / MIB:.0f} MiB"
    assert count_points(store, run_id) == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (gzip.compress(b'{"records": []}', mtime=0)[:-9], "truncated"),
        (gzip.compress(b'{"records": []}', mtime=0) + b"junk", "after its end"),
        (b"not gzip at all", "corrupt"),
    ],
    ids=["truncated", "junk-after-its-end", "not-gzip"],  # the same in every xdist worker
)
def test_broken_gzip_is_400(client: FlaskClient, run_id: int, body: bytes, message: str) -> None:
    response = post_gzip(client, f"/api/v1/runs/{run_id}/metrics", body)
    assert response.status_code == 400
    assert message in envelope(response)["message"]


def test_a_plain_body_past_the_limit_is_413(make_app: Any, run_id: int) -> None:
    client = make_app(MAX_CONTENT_LENGTH=None, MAX_INFLATED_BYTES=1000).test_client()
    body = json.dumps({"records": [[i, 0, {"a": 1}] for i in range(200)]})
    response = client.post(f"/api/v1/runs/{run_id}/metrics", data=body,
                           content_type="application/json")  # fmt: skip
    assert response.status_code == 413
    assert envelope(response)["code"] == "payload_too_large"


def test_200000_new_keys_in_one_request_are_refused(
    client: FlaskClient, run_id: int, store: Any
) -> None:
    items = {f"k{i}": 1.0 for i in range(200_000)}
    body = gzip.compress(json.dumps({"records": [[0, 0, items]]}).encode())
    response = post_gzip(client, f"/api/v1/runs/{run_id}/metrics", body)
    assert response.status_code == 400, response.data[:300]
    error = envelope(response)
    assert error["field"] == "records"
    assert f"at most {MAX_KEYS_PER_REQUEST}" in error["message"]
    assert metric_keys(store, run_id) == []
    with store.engine.connect() as conn:  # not a single key was interned
        assert conn.exec_driver_sql("SELECT count(*) FROM metric_keys").scalar_one() == 0


def test_too_many_records_are_refused(client: FlaskClient, run_id: int) -> None:
    body = gzip.compress(json.dumps({"records": [[0, 0, {}]] * (MAX_RECORDS + 1)}).encode())
    response = post_gzip(client, f"/api/v1/runs/{run_id}/metrics", body)
    assert response.status_code == 400
    assert f"at most {MAX_RECORDS}" in envelope(response)["message"]


def test_a_run_has_at_most_max_keys_per_run(
    client: FlaskClient, make_app: Any, run_id: int, store: Any
) -> None:
    url = f"/api/v1/runs/{run_id}/metrics"
    half = MAX_KEYS_PER_RUN // 2
    for lo in (0, half):
        items = {f"k{i}": 1.0 for i in range(lo, lo + half)}
        assert client.post(url, json={"records": [[0, 0, items]]}).status_code == 200
    assert client.post(url, json={"records": [[1, 0, {"k0": 2.0}]]}).status_code == 200
    one_more = {"records": [[2, 0, {"k0": 3.0, "extra": 1.0}]]}
    for fresh in (client, make_app().test_client()):  # cached, and read from the store
        response = fresh.post(url, json=one_more)
        assert response.status_code == 400, response.data[:300]
        error = envelope(response)
        assert error["code"] == "too_many_keys"
        assert (
            f"run {run_id} would have {MAX_KEYS_PER_RUN + 1} distinct metric keys; at most "
            f"{MAX_KEYS_PER_RUN}" in error["message"]
        )
    assert len(metric_keys(store, run_id)) == MAX_KEYS_PER_RUN
    assert [p.step for p in metric_history(store, run_id, "k0")] == [0, 1]


def test_mlflow_log_batch_past_the_key_limit_stores_nothing(
    client: FlaskClient, run_id: int, store: Any
) -> None:
    metrics = [
        {"key": f"m{i}", "value": 1.0, "timestamp": 0, "step": 0}
        for i in range(MAX_KEYS_PER_RUN + 1)
    ]
    body = {"run_id": str(run_id), "metrics": metrics, "params": [{"key": "lr", "value": "1"}]}
    response = client.post("/api/2.0/mlflow/runs/log-batch", json=body)
    assert response.status_code == 400, response.data[:300]
    assert response.get_json()["error_code"] == "INVALID_PARAMETER_VALUE"
    assert get_run(store, run_id).config == {}
    assert metric_keys(store, run_id) == []


def test_the_http_sink_splits_big_batches_inside_the_limits(
    app: Flask, serve: Any, run_id: int, store: Any
) -> None:
    keys = 50
    steps = 3 * MAX_POINTS_PER_REQUEST // keys + 7
    records = [
        (s, 0, {f"layer{k:03d}/grad_norm": float(s) for k in range(keys)}) for s in range(steps)
    ]
    HttpSink(serve(app).url).write_metrics(run_id, records)
    assert count_points(store, run_id) == steps * keys


@pytest.mark.slow
@pytest.mark.parametrize("dense", [True, False], ids=["38MiB-body", "zip-bomb"])
def test_health_answers_and_memory_stays_flat_during_an_abusive_upload(
    store_url: str, tmp_path: Path, dense: bool
) -> None:
    body = gzip_records(200 * MIB, dense=dense)  # both inflate to ~200 MiB of JSON
    server = Proc([sys.executable, str(SCRIPTS / "serve_dashboard.py"), store_url, ABUSER_TOKEN],
                  {"PYTHONUNBUFFERED": "1", **_env()}, tmp_path)  # fmt: skip
    try:
        port = int(server.wait_for_line("LISTENING", 60).split()[1])
        url = f"http://127.0.0.1:{port}"
        run = HttpSink(url, ABUSER_TOKEN).create_run("abuse", None, {}, [])
        report = upload_while_probing(url, server.popen.pid, f"/api/v1/runs/{run.id}/metrics",
                                      body)  # fmt: skip
    finally:
        server.kill()
    assert report.upload_status in (413, "ConnectionResetError", "BrokenPipeError"), report
    assert report.health_failures == 0, report
    worst = max(report.health_s)
    # Generous: the machines are noisy. bench/bench_abuse.py reports the distribution.
    assert worst < 2.0, f"health took {worst:.2f} s during the upload"
    assert report.rss_growth < 300 * MIB, f"server RSS grew {report.rss_growth / MIB:.0f} MiB"


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_TOKEN")}
