"""``GET /api/v1/runs/<id>/points`` (raw points a page at a time, for `runs export` over
HTTP) and the ``attempt`` filter of ``GET /api/v1/jobs/<id>/logs``."""

from __future__ import annotations

import math

from flask.testing import FlaskClient

from tests.support.web import envelope
from tracker.entities import JobSpec
from tracker.store import Store, logs, queue
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run


def test_points_page_by_step_with_nan_in_wire_form(client: FlaskClient, store: Store) -> None:
    run = create_run(store, "p", "r")
    for step, value in [(0, 1.0), (5, math.nan), (9, math.inf), (12, -2.5)]:
        log_metrics(store, run.id, step, {"loss": value}, wall_time=100.0 + step)
    first = client.get(f"/api/v1/runs/{run.id}/points?key=loss&limit=2").json
    assert first["points"] == [[0, 100.0, 1.0], [5, 105.0, "NaN"]]
    assert first["next_after_step"] == 5
    rest = client.get(f"/api/v1/runs/{run.id}/points?key=loss&after_step=5&limit=2").json
    assert rest["points"] == [[9, 109.0, "Infinity"], [12, 112.0, -2.5]]
    end = client.get(f"/api/v1/runs/{run.id}/points?key=loss&after_step=12").json
    assert end["points"] == [] and end["next_after_step"] == 12
    assert client.get(f"/api/v1/runs/{run.id}/points?key=other").json["points"] == []


def test_points_errors(client: FlaskClient, store: Store) -> None:
    run = create_run(store, "p", "r")
    missing = client.get(f"/api/v1/runs/{run.id}/points")
    assert missing.status_code == 400 and envelope(missing)["field"] == "key"
    assert client.get("/api/v1/runs/999/points?key=loss").status_code == 404
    for bad in ("after_step=-2", "after_step=x", "limit=0", "limit=100001"):
        response = client.get(f"/api/v1/runs/{run.id}/points?key=loss&{bad}")
        assert response.status_code == 400, bad
        assert envelope(response)["field"] == bad.split("=")[0]


def test_job_logs_keep_one_attempt(client: FlaskClient, store: Store) -> None:
    queue.enqueue(store, JobSpec(argv=["python", "x.py"]))
    first, _ = queue.claim(store, "w", lease_s=60) or (None, ())
    assert first is not None
    logs.append(store, first, [("stdout", 1.0, "attempt one\n")])
    queue.finish(store, first, exit_code=0, failure=None)
    from tracker.store.jobs import requeue

    requeue(store, first.job.id, reason="again")
    second, _ = queue.claim(store, "w", lease_s=60) or (None, ())
    assert second is not None
    logs.append(store, second, [("stdout", 2.0, "attempt two\n")])

    def texts(query: str) -> list[str]:
        doc = client.get(f"/api/v1/jobs/{first.job.id}/logs?{query}").json
        return [c["text"] for c in doc["chunks"]]

    assert texts("") == ["attempt one\n", "attempt two\n"]
    assert texts("attempt=1") == ["attempt one\n"]
    assert texts("attempt=2") == ["attempt two\n"]
    assert client.get(f"/api/v1/jobs/{first.job.id}/logs?attempt=x").status_code == 400
