"""The MLflow artifact routes obey the dashboard's one upload limit (MAX_ARTIFACT_BYTES,
`tracker ui --max-artifact-bytes`) on every path -- a single PUT, each multipart part and a
multipart upload's parts together -- while streaming, so a `log` token cannot fill the disk;
and multipart parts are staged privately under the artifact root, never in the system's
shared temporary directory where another local account could swap them."""

from __future__ import annotations

import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tracker.store import artifacts as astore
from tracker.store.runs import create_run

MIB = 1024 * 1024
BASE = "/api/2.0/mlflow-artifacts"


@pytest.fixture
def limited(make_app: Any, tmp_path: Path) -> tuple[Any, Any, int, Path]:
    root = tmp_path / "blobs"
    app = make_app(MAX_ARTIFACT_BYTES=MIB, ARTIFACT_ROOT=str(root))
    store = app.extensions["tracker"].store
    run = create_run(store, "p", "uploads")
    return app.test_client(), store, run.id, root


def _streamed(client: Any, url: str, size: int) -> Any:
    """A PUT without Content-Length (a chunked body): the limit must hold while streaming."""
    return client.put(
        url, input_stream=io.BytesIO(b"x" * size), headers={"Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True},
    )  # fmt: skip


def test_a_single_put_past_the_limit_is_refused_and_nothing_is_kept(limited: Any) -> None:
    client, store, run_id, root = limited
    url = f"{BASE}/artifacts/0/{run_id}/artifacts/big.bin"
    announced = client.put(url, data=b"x" * (16 * MIB))
    assert announced.status_code == 413, announced.json
    streamed = _streamed(client, url, 16 * MIB)
    assert streamed.status_code == 413, streamed.json
    assert f"limit of {MIB} bytes" in streamed.json["message"]
    assert astore.list_artifacts(store, run_id) == []
    assert client.put(url, data=b"x" * (MIB // 2)).status_code == 200  # within: stored
    assert [a.path for a in astore.list_artifacts(store, run_id)] == ["big.bin"]
    leftovers = [p for p in (root / "tmp").rglob("*") if p.is_file()] if root.exists() else []
    assert leftovers == []


def test_multipart_parts_add_up_to_the_limit(limited: Any) -> None:
    client, store, run_id, root = limited
    where = f"0/{run_id}/artifacts/d"
    created = client.post(f"{BASE}/mpu/create/{where}", json={"path": "/x/m.bin", "num_parts": 3})
    assert created.status_code == 200, created.json
    upload_id = created.json["upload_id"]
    part = f"{BASE}/mpu/part/{upload_id}"
    assert client.put(f"{part}/1", data=b"a" * (MIB // 2)).status_code == 200
    assert client.put(f"{part}/2", data=b"b" * (MIB // 2 - 10)).status_code == 200
    over = client.put(f"{part}/3", data=b"c" * (MIB // 2))  # 3 x 1/2 MiB > 1 MiB in all
    assert over.status_code == 413, over.json
    too_big = client.put(f"{part}/3", data=b"c" * (2 * MIB))  # and one part alone
    assert too_big.status_code == 413
    staged = root / "tmp" / "multipart"
    assert staged.is_dir() and stat.S_IMODE(staged.stat().st_mode) == 0o700
    assert not (Path(tempfile.gettempdir()) / "tracker-multipart" / upload_id).exists()
    assert client.put(f"{part}/3", data=b"c" * 10).status_code == 200
    done = client.post(
        f"{BASE}/mpu/complete/{where}",
        json={"path": "/x/m.bin", "upload_id": upload_id,
              "parts": [{"part_number": n, "etag": ""} for n in (1, 2, 3)]},
    )  # fmt: skip
    assert done.status_code == 200, done.json
    [info] = astore.list_artifacts(store, run_id)
    assert (info.path, info.size) == ("d/m.bin", MIB)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory another user owns")
def test_a_staging_root_another_user_made_is_refused(limited: Any) -> None:
    client, _, run_id, root = limited
    staged = root / "tmp" / "multipart"
    staged.mkdir(parents=True)
    os.chown(staged, 65534, 65534)  # nobody's: made first by another local account
    created = client.post(
        f"{BASE}/mpu/create/0/{run_id}/artifacts/d", json={"path": "/x/m.bin", "num_parts": 1}
    )
    assert created.status_code == 400, created.json
    assert "belongs to another user" in created.json["message"]
