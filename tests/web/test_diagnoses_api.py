"""Diagnoses over the JSON API and the run search: stored at finish and live after ingest,
read with GET, re-run with POST (idempotent), searched with ``diagnosis == "code"`` and
``metrics.loss == nan``; on SQLite and PostgreSQL."""

from __future__ import annotations

import math
import time
from typing import Any

from flask.testing import FlaskClient

from tests.support.web import envelope
from tracker.store import Store
from tracker.store.diagnoses import LiveSweep, diagnose_run
from tracker.store.events import list_events
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run, finish_run


def _create(client: FlaskClient, name: str) -> int:
    response = client.post("/api/v1/runs", json={"project": "p", "name": name})
    assert response.status_code in (200, 201), response.json
    return int(response.json["id"])


def _send(client: FlaskClient, run_id: int, points: list[tuple[int, dict[str, Any]]]) -> None:
    now = int(time.time() * 1000)
    records = [[s, now + s, m] for s, m in points]
    response = client.post(f"/api/v1/runs/{run_id}/metrics", json={"records": records})
    assert response.status_code == 200, response.json


def _nan_run(client: FlaskClient) -> int:
    run_id = _create(client, "nan")
    points = [(s, {"loss": 1.0 / (s + 1) if s < 30 else "NaN"}) for s in range(40)]
    _send(client, run_id, points)
    return run_id


def _live_pass(store: Store) -> None:
    """One pass of the dashboard's live doctor (``tracker ui`` runs it every 5 s; never
    inside the ingest request)."""
    LiveSweep(store).once()


def test_live_after_ingest_then_final_at_finish(client: FlaskClient, store: Store) -> None:
    run_id = _nan_run(client)
    assert client.get(f"/api/v1/runs/{run_id}/diagnoses").json["diagnoses"] == []  # no pass yet
    _live_pass(store)  # 10 NaN points in a row are persistent already
    live = client.get(f"/api/v1/runs/{run_id}/diagnoses").json["diagnoses"]
    assert [(d["code"], d["metric"], d["step"]) for d in live] == [("nonfinite", "loss", 30)]
    assert live[0]["severity"] == "error" and "learning rate" in live[0]["hint"]
    assert live[0]["evidence"]["values"][-1] == "NaN"  # the JSON wire form
    assert client.post(f"/api/v1/runs/{run_id}/finish", json={"status": "finished"}).json["ok"]
    final = client.get(f"/api/v1/runs/{run_id}/diagnoses").json["diagnoses"]
    assert [d["id"] for d in final] == [d["id"] for d in live]  # updated, not duplicated


def test_post_reruns_idempotently(client: FlaskClient, store: Store) -> None:
    run_id = _nan_run(client)
    first = client.post(f"/api/v1/runs/{run_id}/diagnoses", json={}).json["diagnoses"]
    again = client.post(f"/api/v1/runs/{run_id}/diagnoses", json={}).json["diagnoses"]
    assert len(first) == len(again) == 1 and first[0]["id"] == again[0]["id"]
    assert [e.kind for e in list_events(store, run_id)].count("diagnosis") == 1


def test_healthy_run_has_an_empty_list(client: FlaskClient) -> None:
    run_id = _create(client, "ok")
    _send(client, run_id, [(s, {"loss": 2.0 - s / 100}) for s in range(60)])
    client.post(f"/api/v1/runs/{run_id}/finish", json={"status": "finished"})
    assert client.get(f"/api/v1/runs/{run_id}/diagnoses").json == {
        "run_id": run_id,
        "diagnoses": [],
    }


def test_unknown_run_is_a_404_envelope(client: FlaskClient) -> None:
    for response in (
        client.get("/api/v1/runs/999999/diagnoses"),
        client.post("/api/v1/runs/999999/diagnoses", json={}),
    ):
        assert response.status_code == 404
        assert envelope(response)["code"] == "not_found"


def test_search_by_diagnosis_and_nan(client: FlaskClient, store: Store) -> None:
    nan_id = _nan_run(client)
    _live_pass(store)
    leak = create_run(store, "p", "leak")
    log_metrics(store, leak.id, 0, {"loss": 1.0})
    for s in range(1, 50):
        log_metrics(store, leak.id, s, {"sys/rss_bytes": 1e9 + s * 5e6, "loss": 1.0})
    finish_run(store, leak.id, "finished")
    diagnose_run(store, leak.id)
    inf = create_run(store, "p", "inf")
    log_metrics(store, inf.id, 0, {"loss": math.inf})
    healthy = create_run(store, "p", "healthy")
    log_metrics(store, healthy.id, 0, {"loss": 0.5})

    def names(q: str) -> list[str]:
        response = client.get("/api/v1/runs", query_string={"q": q})
        assert response.status_code == 200, response.json
        return sorted(r["name"] for r in response.json["runs"])

    assert names('diagnosis == "memory_growth"') == ["leak"]
    assert names("diagnosis == nonfinite") == ["nan"]
    assert names("diagnosis in (nonfinite, memory_growth)") == ["leak", "nan"]
    assert names("diagnosis == null") == ["healthy", "inf"]
    assert "leak" not in names("diagnosis != memory_growth")
    assert names("metrics.loss == nan") == ["nan"]
    assert names("metrics.loss == inf") == ["inf"]
    assert names("metrics.loss != nan") == ["healthy", "inf", "leak"]
    assert nan_id
    bad = client.get("/api/v1/runs", query_string={"q": "metrics.loss > nan"})
    assert bad.status_code == 400 and "only works with == and !=" in envelope(bad)["message"]


def test_run_listing_gives_each_code_once_with_severity_and_onset(
    client: FlaskClient, store: Store
) -> None:
    """The runs table's chips: one per code, by onset; of a code's diagnoses (one per
    metric) the most severe, earliest one gives the severity, step and message."""
    run = create_run(store, "p", "chips")
    for s in range(60):
        grad = math.nan if s >= 40 else 1.0  # a warning (not a loss) from step 40
        loss = math.nan if s >= 50 else 1.0 / (s + 1)  # an error from step 50
        log_metrics(store, run.id, s, {"loss": loss, "grad_norm": grad})
    finish_run(store, run.id, "failed")
    found = diagnose_run(store, run.id)
    assert sorted((d.metric, d.severity, d.step) for d in found) == [
        ("grad_norm", "warning", 40), ("loss", "error", 50)]  # fmt: skip
    [hit] = client.get("/api/v1/runs", query_string={"q": "name == chips"}).json["runs"]
    assert hit["diagnoses"] == ["nonfinite"]
    [chip] = hit["health"]
    loss_message = next(d.message for d in found if d.metric == "loss")
    assert chip == {"code": "nonfinite", "severity": "error", "step": 50, "metric": "loss",
                    "message": loss_message, "count": 2}  # fmt: skip
