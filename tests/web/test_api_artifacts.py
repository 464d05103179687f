"""Artifacts over HTTP: raw PUT, listing, streamed downloads with safe content types,
size limits, scopes, media and histograms. Flask's test client and a real server;
SQLite and PostgreSQL (an artifact root in the test's directory)."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.web import envelope
from tracker.errors import InvalidInput
from tracker.store import Store
from tracker.store import artifacts as art
from tracker.store.runs import create_run, list_runs
from tracker.store.tokens import create_token
from tracker.web.app import create_app


@pytest.fixture
def aapp(make_app: Callable[..., Flask], tmp_path: Path) -> Flask:
    return make_app(ARTIFACT_ROOT=str(tmp_path / "artifact-root"))


@pytest.fixture
def ac(aapp: Flask) -> FlaskClient:
    return aapp.test_client()


def _store(app: Flask) -> Store:
    return app.extensions["tracker"].store


def _run(app: Flask) -> int:
    return create_run(_store(app), "art", "r").id


def _put(client: FlaskClient, run: int, path: str, data: bytes, **kw: Any) -> Any:
    return client.put(f"/api/v1/runs/{run}/artifacts/{quote(path)}", data=data, **kw)


def test_put_list_download_round_trip(aapp: Flask, ac: FlaskClient) -> None:
    run = _run(aapp)
    data = os.urandom(300_000)
    resp = _put(
        ac, run, "model/weights.bin", data,
        query_string={"step": 7},
        headers={"X-Artifact-Meta": '{"caption": "w"}',
                 "X-Content-SHA256": hashlib.sha256(data).hexdigest()},
    )  # fmt: skip
    assert resp.status_code == 201, resp.json
    body = resp.json
    assert (body["path"], body["size"], body["step"], body["meta"]) == (
        "model/weights.bin",
        len(data),
        7,
        {"caption": "w"},
    )
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    listing = ac.get(f"/api/v1/runs/{run}/artifacts").json
    assert [a["path"] for a in listing["artifacts"]] == ["model/weights.bin"]
    download = ac.get(body["download_url"])
    assert download.status_code == 200 and download.data == data
    assert download.headers["Content-Length"] == str(len(data))
    assert download.headers["Content-Type"] == "application/octet-stream"
    assert download.headers["Content-Disposition"] == "attachment; filename*=UTF-8''weights.bin"
    assert download.headers["X-Content-Type-Options"] == "nosniff"
    again = ac.get(body["download_url"], headers={"If-None-Match": f'"{body["sha256"]}"'})
    assert again.status_code == 304 and again.data == b""


def test_listing_by_prefix_and_unknown_run(aapp: Flask, ac: FlaskClient) -> None:
    run = _run(aapp)
    for path in ["a/1.txt", "a/2.txt", "b.txt"]:
        assert _put(ac, run, path, b"x").status_code == 201
    got = ac.get(f"/api/v1/runs/{run}/artifacts", query_string={"prefix": "a/"}).json
    assert [a["path"] for a in got["artifacts"]] == ["a/1.txt", "a/2.txt"]
    missing = ac.get("/api/v1/runs/424242/artifacts")
    assert (
        missing.status_code == 404 and envelope(missing)["message"] == "run 424242 does not exist"
    )
    assert _put(ac, 424242, "x", b"x").status_code == 404
    bad = ac.get(f"/api/v1/runs/{run}/artifacts", query_string={"prefix": "../"})
    assert bad.status_code == 400 and envelope(bad)["field"] == "prefix"


@pytest.mark.parametrize(
    ("path", "media_type", "content_type", "disposition"),
    [
        ("page.html", None, "application/octet-stream", "attachment"),
        ("x.bin", "text/html", "application/octet-stream", "attachment"),
        ("logo.svg", None, "application/octet-stream", "attachment"),
        ("app.js", None, "application/octet-stream", "attachment"),
        ("data.xml", None, "application/octet-stream", "attachment"),
        ("img.png", None, "image/png", "inline"),
        ("img.jpg", None, "image/jpeg", "inline"),
        ("notes.txt", None, "text/plain; charset=utf-8", "inline"),
        ("m.json", None, "application/json", "attachment"),
        ("doc.pdf", None, "application/pdf", "attachment"),
    ],
)
def test_downloads_never_render_active_content(
    aapp: Flask,
    ac: FlaskClient,
    path: str,
    media_type: str | None,
    content_type: str,
    disposition: str,
) -> None:
    run = _run(aapp)
    qs = {"media_type": media_type} if media_type else {}
    assert _put(ac, run, path, b"<script>alert(1)</script>", query_string=qs).status_code == 201
    resp = ac.get(f"/api/v1/runs/{run}/artifacts/{path}")
    assert resp.headers["Content-Type"] == content_type
    assert resp.headers["Content-Disposition"].split(";")[0] == disposition
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in resp.headers["Content-Security-Policy"]
    forced = ac.get(f"/api/v1/runs/{run}/artifacts/{path}?download=1")
    assert forced.headers["Content-Disposition"].startswith("attachment;")


@pytest.mark.parametrize(
    ("path", "problem"),
    [("a//b", "empty segment"), ("%2e%2e/x", "'..' segment"), ("a/./b", "'.' segment"),
     ("a%5cb", "backslash"), ("a/", "empty segment")],
)  # fmt: skip
def test_bad_paths_name_the_rule(aapp: Flask, ac: FlaskClient, path: str, problem: str) -> None:
    run = _run(aapp)
    resp = ac.put(f"/api/v1/runs/{run}/artifacts/{path}", data=b"x")
    error = envelope(resp)
    assert resp.status_code == 400 and error["field"] == "path", error
    assert problem in error["message"] and "relative posix" in error["message"]
    assert art.list_artifacts(_store(aapp), run) == []


def test_bad_headers_and_hash_mismatch_store_nothing(aapp: Flask, ac: FlaskClient) -> None:
    run = _run(aapp)
    cases = [
        ({"headers": {"X-Artifact-Meta": "{not json"}}, 400, "X-Artifact-Meta"),
        ({"headers": {"X-Artifact-Meta": "[1]"}}, 400, "X-Artifact-Meta"),
        ({"headers": {"X-Content-SHA256": "0" * 64}}, 400, "sha256"),
        ({"query_string": {"step": "x"}}, 400, "step"),
        ({"query_string": {"media_type": "text/html; x"}}, 400, "media_type"),
        ({"headers": {"Content-Encoding": "gzip"}}, 415, "Content-Encoding"),
    ]
    for kwargs, status, field in cases:
        resp = _put(ac, run, "f.txt", b"data", **kwargs)
        assert resp.status_code == status and envelope(resp)["field"] == field, resp.json
    assert art.list_artifacts(_store(aapp), run) == []
    assert list(art.blob_store(_store(aapp)).iter_hashes()) == []


def test_size_limit_is_a_clear_413(make_app: Callable[..., Flask], tmp_path: Path) -> None:
    app = make_app(ARTIFACT_ROOT=str(tmp_path / "r"), MAX_ARTIFACT_BYTES=1000)
    run = _run(app)
    client = app.test_client()
    assert _put(client, run, "ok", b"x" * 1000).status_code == 201
    resp = _put(client, run, "big", b"x" * 1001)
    error = envelope(resp)
    assert resp.status_code == 413 and error["code"] == "too_large"
    assert "1001 bytes" in error["message"] and "at most 1000" in error["message"]
    assert [a.path for a in art.list_artifacts(_store(app), run)] == ["ok"]


def test_delete_needs_admin_and_put_needs_log(
    make_app: Callable[..., Flask], tmp_path: Path
) -> None:
    app = make_app(ARTIFACT_ROOT=str(tmp_path / "r"), NO_AUTH=False)
    run = _run(app)
    _, log = create_token(_store(app), "log")
    _, admin = create_token(_store(app), "admin")
    client = app.test_client()
    url = f"/api/v1/runs/{run}/artifacts/a.txt"
    assert client.put(url, data=b"x").status_code == 401
    assert client.put(url, data=b"x", headers={"Authorization": f"Bearer {log}"}).status_code == 201
    assert client.get(url).status_code == 401
    assert client.get(url, headers={"Authorization": f"Bearer {log}"}).data == b"x"
    denied = client.delete(url, headers={"Authorization": f"Bearer {log}"})
    assert denied.status_code == 403 and envelope(denied)["code"] == "forbidden_scope"
    done = client.delete(url, headers={"Authorization": f"Bearer {admin}"})
    assert done.status_code == 200 and done.json == {
        "deleted": True,
        "run_id": run,
        "path": "a.txt",
    }
    again = client.delete(url, headers={"Authorization": f"Bearer {admin}"})
    assert again.status_code == 404
    cross = client.put(
        url, data=b"x", headers={"Authorization": f"Bearer {log}", "Origin": "https://evil.test"}
    )
    assert cross.status_code == 403


def test_media_and_histograms(aapp: Flask, ac: FlaskClient) -> None:
    run = _run(aapp)
    for step in range(5):
        hist = {"edges": [0, 1, 2], "counts": [step, 1]}
        path = f"media/histograms/w/l1/{step:09d}.json"
        assert (
            _put(ac, run, path, json.dumps(hist).encode(), query_string={"step": step}).status_code
            == 201
        )
    _put(ac, run, "media/histograms/w/l1/000000009.json", b"not json", query_string={"step": 9})
    _put(ac, run, "media/images/samples/000000003.png", b"\x89PNG", query_string={"step": 3})
    media = ac.get(f"/api/v1/runs/{run}/media").json
    assert media == {
        "run_id": run,
        "media": {"histograms": {"w/l1": [0, 1, 2, 3, 4, 9]}, "images": {"samples": [3]}},
    }
    hist = ac.get(f"/api/v1/runs/{run}/histograms/w/l1").json
    assert hist["steps"] == [0, 1, 2, 3, 4] and hist["skipped"] == [9]
    assert hist["counts"][4] == [4.0, 1.0] and hist["edges"][0] == [0.0, 1.0, 2.0]
    assert hist["total_steps"] == 6
    few = ac.get(f"/api/v1/runs/{run}/histograms/w/l1?max_steps=2").json
    assert few["steps"] == [0] and few["skipped"] == [9]  # first and last of 6, evenly
    missing = ac.get(f"/api/v1/runs/{run}/histograms/nope")
    assert missing.status_code == 404 and envelope(missing)["field"] == "key"


def test_postgresql_without_a_root_says_to_set_one(
    make_app: Callable[..., Flask], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(art.ARTIFACT_ROOT_ENV, raising=False)
    app = make_app()
    resp = _put(app.test_client(), _run(app), "a", b"a")
    if store_url.startswith("sqlite"):
        assert resp.status_code == 201
        return
    error = envelope(resp)
    assert resp.status_code == 400 and error["field"] == "artifact_root"
    assert "TRACKER_ARTIFACT_ROOT" in error["message"]


def test_app_refuses_a_root_that_holds_the_database(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="contains the database"):
        create_app({"STORE_URI": f"sqlite:///{tmp_path / 'tracker.db'}", "NO_AUTH": True,
                    "ARTIFACT_ROOT": str(tmp_path)})  # fmt: skip


def test_live_server_streams_a_body_past_the_json_limit(
    make_app: Callable[..., Flask], serve: Callable[..., Any], tmp_path: Path
) -> None:
    app = make_app(ARTIFACT_ROOT=str(tmp_path / "r"), MAX_ARTIFACT_BYTES=40 * 1024 * 1024)
    run = _run(app)
    server = serve(app)
    data = os.urandom(20 * 1024 * 1024)  # > MAX_CONTENT_LENGTH (8 MiB) of JSON routes
    url = f"{server.url}/api/v1/runs/{run}/artifacts/big/file.bin"
    put = urllib.request.Request(url, data=data, method="PUT")
    with urllib.request.urlopen(put) as resp:
        assert resp.status == 201
        assert json.load(resp)["sha256"] == hashlib.sha256(data).hexdigest()
    with urllib.request.urlopen(url) as resp:
        assert resp.headers["Content-Length"] == str(len(data))
        got = hashlib.sha256()
        while chunk := resp.read(1 << 20):
            got.update(chunk)
    assert got.hexdigest() == hashlib.sha256(data).hexdigest()


def test_live_server_refuses_a_chunked_body_past_the_limit(
    make_app: Callable[..., Flask], serve: Callable[..., Any], tmp_path: Path
) -> None:
    app = make_app(ARTIFACT_ROOT=str(tmp_path / "r"), MAX_ARTIFACT_BYTES=1000)
    run = _run(app)
    server = serve(app)
    netloc = urlsplit(server.url).netloc
    for size, status in [(900, 201), (3000, 413)]:
        conn = http.client.HTTPConnection(netloc, timeout=30)
        conn.putrequest("PUT", f"/api/v1/runs/{run}/artifacts/chunked-{size}")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for start in range(0, size, 500):
            piece = b"y" * min(500, size - start)
            conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        conn.send(b"0\r\n\r\n")
        resp = conn.getresponse()
        body = json.loads(resp.read())
        conn.close()
        assert resp.status == status, body
        if status == 413:
            assert body["error"]["code"] == "too_large" and "1000 bytes" in body["error"]["message"]
    assert [a.path for a in art.list_artifacts(_store(app), run)] == ["chunked-900"]


_path_text = st.text(
    st.characters(codec="utf-8", blacklist_categories=("Cs",)), min_size=1, max_size=60
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=_path_text)
def test_any_path_is_stored_and_read_back_or_refused_by_the_rule(
    aapp: Flask, ac: FlaskClient, path: str
) -> None:
    run = 1 if list_runs(_store(aapp)) else _run(aapp)
    resp = ac.put(f"/api/v1/runs/{run}/artifacts/{quote(path, safe='/')}", data=path.encode())
    if resp.status_code == 201:
        assert resp.json["path"] == path
        got = ac.get(f"/api/v1/runs/{run}/artifacts/{quote(path, safe='/')}")
        assert got.status_code == 200 and got.data == path.encode()
        return
    error = envelope(resp)
    assert resp.status_code in (400, 404), (resp.status_code, error)
    if resp.status_code == 400:
        assert error["field"] == "path" and "relative posix" in error["message"]


def test_an_s3_root_over_http(make_app: Callable[..., Flask], s3_env: str) -> None:
    app = make_app(ARTIFACT_ROOT=s3_env)
    client = app.test_client()
    run = _run(app)
    data = os.urandom(1_500_000)
    assert _put(client, run, "ckpt/model.bin", data).status_code == 201
    got = client.get(f"/api/v1/runs/{run}/artifacts/ckpt/model.bin")
    assert got.status_code == 200 and got.data == data
    assert got.headers["ETag"] == f'"{hashlib.sha256(data).hexdigest()}"'
    assert [(s, n) for s, n, _ in art.blob_store(_store(app)).iter_hashes()] == [
        (hashlib.sha256(data).hexdigest(), len(data))
    ]
