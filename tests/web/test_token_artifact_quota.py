"""A per-token artifact quota (MAX_TOKEN_ARTIFACT_BYTES, `tracker ui
--max-token-artifact-bytes`): what the uploads of one stored token hold over every run is
capped, so a `log` token cannot fill the disk by spreading files over many runs (each within
the per-run quota). Every upload path -- the /api/v1 PUT, MLflow's single PUT and its
multipart upload -- refuses what the token has no room left for (413, the token and the
quota named) and keeps nothing of it; another token has its own room; the configured token
and a dashboard without authentication are not counted."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.web import envelope
from tracker.cli.ui import app_config
from tracker.errors import InvalidInput
from tracker.store import artifacts as astore
from tracker.store.runs import create_run
from tracker.store.tokens import create_token

KIB = 1024
QUOTA = 100 * KIB
MLFLOW = "/api/2.0/mlflow-artifacts"
CONFIGURED = "configured-admin-token-" + "x7Qp2" * 8


@pytest.fixture
def quota(make_app: Any, tmp_path: Path) -> Any:
    app = make_app(
        MAX_TOKEN_ARTIFACT_BYTES=QUOTA, ARTIFACT_ROOT=str(tmp_path / "blobs"), TOKEN=CONFIGURED
    )
    store = app.extensions["tracker"].store
    runs = [create_run(store, "p", f"r{i}").id for i in range(3)]
    _, alice = create_token(store, "log", "alice")
    _, bob = create_token(store, "log", "bob")
    return app.test_client(), store, runs, alice, bob


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _message(response: Any) -> str:
    return str(envelope(response)["message"])


def _bytes(store: Any, runs: list[int]) -> dict[tuple[int, str], int]:
    return {(r, a.path): a.size for r in runs for a in astore.list_artifacts(store, r)}


def test_one_token_cannot_spread_past_its_quota_over_runs(quota: Any) -> None:
    client, store, (r0, r1, r2), alice, bob = quota
    put = client.put(f"/api/v1/runs/{r0}/artifacts/a.bin", data=b"a" * (60 * KIB),
                     headers=_auth(alice))  # fmt: skip
    assert put.status_code == 201, put.json
    refused = client.put(f"/api/v1/runs/{r1}/artifacts/b.bin", data=b"b" * (60 * KIB),
                         headers=_auth(alice))  # fmt: skip
    assert refused.status_code == 413, refused.json
    assert "token 'alice' (#" in _message(refused)
    assert f"has {40 * KIB} of its {QUOTA} artifact bytes left" in _message(refused)
    assert "--max-token-artifact-bytes" in _message(refused)
    streamed = client.put(  # no Content-Length: cut off while streaming
        f"/api/v1/runs/{r2}/artifacts/c.bin", input_stream=io.BytesIO(b"c" * (60 * KIB)),
        headers={**_auth(alice), "Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True},
    )  # fmt: skip
    assert streamed.status_code == 413, streamed.json
    assert _bytes(store, [r0, r1, r2]) == {(r0, "a.bin"): 60 * KIB}  # nothing of the refused
    # another token has its own room, in the same runs
    for run in (r1, r2):
        other = client.put(f"/api/v1/runs/{run}/artifacts/bob.bin", data=b"o" * (90 * KIB),
                           headers=_auth(bob))  # fmt: skip
        assert other.status_code == 201 if run == r1 else other.status_code == 413
    # replacing one's own file counts its new size, not both
    again = client.put(f"/api/v1/runs/{r0}/artifacts/a.bin", data=b"A" * (95 * KIB),
                       headers=_auth(alice))  # fmt: skip
    assert again.status_code == 201, again.json
    assert astore.token_bytes(store, 1) + astore.token_bytes(store, 2) == (95 + 90) * KIB
    # the configured token is not counted: it may add what the tokens may not
    admin = client.put(f"/api/v1/runs/{r2}/artifacts/big.bin", data=b"z" * (300 * KIB),
                       headers=_auth(CONFIGURED))  # fmt: skip
    assert admin.status_code == 201, admin.json


def test_mlflow_uploads_stop_at_the_tokens_quota(quota: Any) -> None:
    client, store, (r0, r1, _), alice, bob = quota
    single = f"{MLFLOW}/artifacts/0/{r0}/artifacts"
    ok = client.put(f"{single}/a.bin", data=b"a" * (70 * KIB), headers=_auth(alice))
    assert ok.status_code == 200
    refused = client.put(
        f"{MLFLOW}/artifacts/0/{r1}/artifacts/b.bin", data=b"b" * (40 * KIB), headers=_auth(alice)
    )
    assert refused.status_code == 413
    where = f"0/{r1}/artifacts/d"
    created = client.post(f"{MLFLOW}/mpu/create/{where}", json={"path": "/x/m.bin", "num_parts": 2},
                          headers=_auth(alice))  # fmt: skip
    assert created.status_code == 200, created.json
    upload_id = created.json["upload_id"]
    for n in (1, 2):  # 2 x 20 KiB: each part fits the upload limit, together not the quota
        part = client.put(f"{MLFLOW}/mpu/part/{upload_id}/{n}", data=b"p" * (20 * KIB),
                          headers=_auth(alice))  # fmt: skip
        assert part.status_code == 200
    body = {"path": "/x/m.bin", "upload_id": upload_id,
            "parts": [{"part_number": n, "etag": ""} for n in (1, 2)]}  # fmt: skip
    done = client.post(f"{MLFLOW}/mpu/complete/{where}", json=body, headers=_auth(alice))
    assert done.status_code == 413, done.json
    assert "token 'alice'" in str(done.json)
    assert _bytes(store, [r0, r1]) == {(r0, "a.bin"): 70 * KIB}
    # bob's multipart upload of the same size into the same run is stored, counted as his
    created = client.post(f"{MLFLOW}/mpu/create/{where}", json={"path": "/x/m.bin", "num_parts": 1},
                          headers=_auth(bob))  # fmt: skip
    upload_id = created.json["upload_id"]
    part = client.put(f"{MLFLOW}/mpu/part/{upload_id}/1", data=b"q" * (40 * KIB),
                      headers=_auth(bob))  # fmt: skip
    assert part.status_code == 200
    body = {"path": "/x/m.bin", "upload_id": upload_id, "parts": [{"part_number": 1, "etag": ""}]}
    done = client.post(f"{MLFLOW}/mpu/complete/{where}", json=body, headers=_auth(bob))
    assert done.status_code == 200, done.json
    assert astore.token_bytes(store, 2) == 40 * KIB


def test_no_token_quota_by_default_and_without_authentication(
    make_app: Any, tmp_path: Path
) -> None:
    app = make_app(ARTIFACT_ROOT=str(tmp_path / "blobs"), NO_AUTH=False, TOKEN=CONFIGURED)
    store = app.extensions["tracker"].store
    run = create_run(store, "p", "free").id
    _, alice = create_token(store, "log", "alice")
    client = app.test_client()
    for name in ("a", "b", "c"):
        put = client.put(f"/api/v1/runs/{run}/artifacts/{name}", data=b"x" * (100 * KIB),
                         headers=_auth(alice))  # fmt: skip
        assert put.status_code == 201
    assert astore.token_bytes(store, 1) == 300 * KIB  # counted, never capped
    assert astore.token_bytes(store, 1, besides=(run, "a")) == 200 * KIB
    open_app = make_app(MAX_TOKEN_ARTIFACT_BYTES=QUOTA, ARTIFACT_ROOT=str(tmp_path / "blobs2"))
    open_store = open_app.extensions["tracker"].store
    free = create_run(open_store, "p", "open").id
    for name in ("a", "b"):  # --no-auth on loopback: no token to count against
        put = open_app.test_client().put(
            f"/api/v1/runs/{free}/artifacts/{name}", data=b"x" * (90 * KIB)
        )
        assert put.status_code == 201


def test_the_option_takes_sizes_and_names_itself_when_wrong() -> None:
    config = app_config("sqlite:///x.db", "127.0.0.1", None, (), (), None, False, False, 60.0,
                        max_token_artifact_bytes="100GiB")  # fmt: skip
    assert config["MAX_TOKEN_ARTIFACT_BYTES"] == 100 * 1024**3
    assert app_config("sqlite:///x.db", "127.0.0.1", None, (), (), None, False, False,
                      60.0)["MAX_TOKEN_ARTIFACT_BYTES"] is None  # fmt: skip
    with pytest.raises(InvalidInput) as bad:
        app_config("sqlite:///x.db", "127.0.0.1", None, (), (), None, False, False, 60.0,
                   max_token_artifact_bytes="lots")  # fmt: skip
    assert bad.value.field == "max_token_artifact_bytes"
    from tracker.cli.ui import ui

    shown = CliRunner().invoke(ui, ["--help"])
    assert "--max-token-artifact-bytes" in shown.output
