"""A per-run artifact quota (MAX_RUN_ARTIFACT_BYTES, `tracker ui --max-run-artifact-bytes`):
every upload path -- the /api/v1 PUT, MLflow's single PUT and its multipart upload -- refuses
what a run has no room left for (413, the run and the quota named), counting the run's other
artifacts and not the one being replaced, and keeps nothing of a refused upload."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from tracker.store import artifacts as astore
from tracker.store.runs import create_run

KIB = 1024
QUOTA = 100 * KIB
MLFLOW = "/api/2.0/mlflow-artifacts"


@pytest.fixture
def quota(make_app: Any, tmp_path: Path) -> tuple[Any, Any, int, int]:
    app = make_app(MAX_RUN_ARTIFACT_BYTES=QUOTA, ARTIFACT_ROOT=str(tmp_path / "blobs"))
    store = app.extensions["tracker"].store
    run = create_run(store, "p", "quota")
    other = create_run(store, "p", "other")
    return app.test_client(), store, run.id, other.id


def _stored(store: Any, run_id: int) -> dict[str, int]:
    return {a.path: a.size for a in astore.list_artifacts(store, run_id)}


def test_api_v1_uploads_stop_at_the_runs_quota(quota: Any) -> None:
    client, store, run_id, other = quota
    url = f"/api/v1/runs/{run_id}/artifacts"
    assert client.put(f"{url}/a.bin", data=b"a" * (60 * KIB)).status_code == 201
    refused = client.put(f"{url}/b.bin", data=b"b" * (60 * KIB))
    assert refused.status_code == 413, refused.json
    message = (
        refused.json["error"]["message"] if "error" in refused.json else refused.json["message"]
    )
    assert f"run {run_id} has {40 * KIB} of its {QUOTA}" in message, message
    assert "--max-run-artifact-bytes" in message
    streamed = client.put(  # no Content-Length: cut off while streaming
        f"{url}/c.bin", input_stream=io.BytesIO(b"c" * (60 * KIB)),
        headers={"Transfer-Encoding": "chunked"}, environ_overrides={"wsgi.input_terminated": True},
    )  # fmt: skip
    assert streamed.status_code == 413, streamed.json
    assert _stored(store, run_id) == {"a.bin": 60 * KIB}  # nothing of the refused ones
    # replacing a file counts its new size, not both
    assert client.put(f"{url}/a.bin", data=b"A" * (90 * KIB)).status_code == 201
    assert client.put(f"{url}/b.bin", data=b"b" * (10 * KIB)).status_code == 201
    assert _stored(store, run_id) == {"a.bin": 90 * KIB, "b.bin": 10 * KIB}
    # the quota is per run: another run has its own
    assert (
        client.put(f"/api/v1/runs/{other}/artifacts/x", data=b"x" * (90 * KIB)).status_code == 201
    )


def test_mlflow_uploads_stop_at_the_runs_quota(quota: Any) -> None:
    client, store, run_id, _ = quota
    single = f"{MLFLOW}/artifacts/0/{run_id}/artifacts"
    assert client.put(f"{single}/a.bin", data=b"a" * (70 * KIB)).status_code == 200
    assert client.put(f"{single}/b.bin", data=b"b" * (40 * KIB)).status_code == 413
    where = f"0/{run_id}/artifacts/d"
    created = client.post(f"{MLFLOW}/mpu/create/{where}", json={"path": "/x/m.bin", "num_parts": 2})
    assert created.status_code == 200, created.json
    part = f"{MLFLOW}/mpu/part/{created.json['upload_id']}"
    for n in (1, 2):  # 2 x 20 KiB: each part fits the global limit, together not the quota
        assert client.put(f"{part}/{n}", data=b"p" * (20 * KIB)).status_code == 200
    done = client.post(
        f"{MLFLOW}/mpu/complete/{where}",
        json={"path": "/x/m.bin", "upload_id": created.json["upload_id"],
              "parts": [{"part_number": n, "etag": ""} for n in (1, 2)]},
    )  # fmt: skip
    assert done.status_code == 413, done.json
    assert _stored(store, run_id) == {"a.bin": 70 * KIB}


def test_no_quota_by_default(make_app: Any, tmp_path: Path) -> None:
    app = make_app(ARTIFACT_ROOT=str(tmp_path / "blobs"))
    store = app.extensions["tracker"].store
    run = create_run(store, "p", "free")
    client = app.test_client()
    for name in ("a", "b", "c"):
        put = client.put(f"/api/v1/runs/{run.id}/artifacts/{name}", data=b"x" * (100 * KIB))
        assert put.status_code == 201
    assert astore.run_bytes(store, run.id) == 300 * KIB
    assert astore.run_bytes(store, run.id, besides="a") == 200 * KIB
