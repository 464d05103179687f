"""-0.0 keeps its sign from log() to every read: the store's reads and the JSON API, on
SQLite (whose REAL columns used to hand it back as +0.0) and PostgreSQL."""

from __future__ import annotations

import json
import math
from typing import Any

from flask.testing import FlaskClient

import tracker
from tracker.store import Store
from tracker.store.metrics import metric_history
from tracker.store.runs import get_run
from tracker.store.series import read_series


def negative(value: Any) -> bool:
    """True for -0.0 exactly (a float zero whose sign bit is set)."""
    return value == 0.0 and math.copysign(1.0, value) == -1.0


def positive(value: Any) -> bool:
    return value == 0.0 and math.copysign(1.0, value) == 1.0


def test_minus_zero_keeps_its_sign_in_the_store_and_the_json_api(
    store_url: str, client: FlaskClient
) -> None:
    run = tracker.init(project="zero", uri=store_url, system_interval=None)
    for step in range(4):
        run.log({"z": -0.0, "p": 0.0, "i": 0}, step=step)
    run.finish()
    store = Store(store_url)
    assert all(negative(p.value) for p in metric_history(store, run.id, "z"))
    assert all(positive(p.value) for p in metric_history(store, run.id, "p"))
    assert positive(metric_history(store, run.id, "i")[0].value)
    last = get_run(store, run.id).last_metrics
    assert negative(last["z"]) and positive(last["p"])
    full = read_series(store, run.id, "z")  # every point
    assert full.source == "points" and all(negative(b.last) for b in full.series.buckets)
    grouped = read_series(store, run.id, "z", max_buckets=1)  # min/max/last grouped in SQL
    (bucket,) = grouped.series.buckets
    assert negative(bucket.min) and negative(bucket.max) and negative(bucket.last)

    def api(url: str) -> Any:
        response = client.get(url)
        assert response.status_code == 200, response.data
        return json.loads(response.data)  # parsed from the bytes: "-0.0" stays -0.0

    (series,) = api(f"/api/v1/runs/{run.id}/series?key=z")["series"]
    assert len(series["last"]) == 4 and all(negative(v) for v in series["last"])
    (grouped_json,) = api(f"/api/v1/runs/{run.id}/series?key=z&max_buckets=1")["series"]
    assert negative(grouped_json["min"][0]) and negative(grouped_json["max"][0])
    assert negative(grouped_json["last"][0])
    metrics = {m["key"]: m["last_value"] for m in api(f"/api/v1/runs/{run.id}/metrics")["metrics"]}
    assert negative(metrics["z"]) and positive(metrics["p"])
    assert negative(api(f"/api/v1/runs/{run.id}")["last_metrics"]["z"])
