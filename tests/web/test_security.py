"""Security of the dashboard: bind rules, the token (401), same-origin and Host checks (403),
JSON-only state changes (415), response headers, the login form, and files served only from
inside their roots (traversal in every spelling -> 400/404). A real server is used where
the exact bytes of the request line matter."""

from __future__ import annotations

import http.client
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from werkzeug.routing import IntegerConverter, Rule

from tests.support.web import MUTATING, TOKEN, TRACKER, envelope, error_of, free_port, has
from tracker.cli.ui import ui
from tracker.store.checkpoints import add_checkpoint
from tracker.store.runs import create_run
from tracker.web.plumbing import auth
from tracker.web.plumbing.security import RAW_BODY_ENDPOINTS, InsecureBind, check_bind

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'security.db'}"  # the checks do not depend on the dialect


def mutating_routes(app: Flask, *, raw: bool = True) -> Iterator[tuple[str, str]]:
    """``(method, url)`` of every state change; ``raw=False`` leaves out the raw-body routes."""
    for rule in app.url_map.iter_rules():
        if rule.endpoint in ("static", "auth.login"):
            continue
        if not raw and rule.endpoint in RAW_BODY_ENDPOINTS:
            continue
        for method in sorted(rule.methods & set(MUTATING)):
            yield method, _url(rule)


def _url(rule: Rule) -> str:
    values = {arg: 1 if isinstance(c, IntegerConverter) else "x"
              for arg, c in rule._converters.items()}  # fmt: skip
    return rule.build(values, append_unknown=False)[1]


# ------------------------------------------------------------------------ binding


def test_default_bind_is_loopback_and_public_binds_need_a_token() -> None:
    host = next(p for p in ui.params if p.name == "host")
    assert host.default == "127.0.0.1"
    for loopback in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"):
        check_bind(loopback, None)
    for public in ("0.0.0.0", "::", "192.168.1.20", "example.com"):
        with pytest.raises(InsecureBind, match="TRACKER_TOKEN"):
            check_bind(public, None)
        check_bind(public, TOKEN)
        with pytest.raises(InsecureBind, match="at least 32 characters"):
            check_bind(public, "a-token")


def test_ui_refuses_to_start_on_all_interfaces_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRACKER_TOKEN"}
    done = subprocess.run(
        [*TRACKER, "ui", "--host", "0.0.0.0", "--port", str(free_port()), "--uri",
         f"sqlite:///{tmp_path / 't.db'}"],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without an access token" in done.stderr
    assert not (tmp_path / "t.db").exists()  # refused before touching anything


def test_dev_server_needs_to_be_asked_for(tmp_path: Path) -> None:
    done = subprocess.run(
        [*TRACKER, "ui", "--workers", "0", "--uri", f"sqlite:///{tmp_path / 't.db'}"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "--dev" in done.stderr


# -------------------------------------------------------------------------- token


def test_every_mutating_route_needs_the_token(make_app) -> None:
    token_app = make_app(TOKEN=TOKEN, LOGIN_MAX_FAILURES=10_000)  # wrong tokens by the dozen
    client = token_app.test_client()
    routes = list(mutating_routes(token_app))
    assert len(routes) >= 15
    for method, url in routes:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            response = client.open(url, method=method, json={}, headers=headers)
            assert response.status_code == 401, (method, url, headers)
            assert has(error_of(response, url), "unauthorized")
            assert TOKEN not in response.text


def test_read_routes_need_the_token_too(token_app: Flask) -> None:
    client = token_app.test_client()
    assert client.get("/api/v1/runs").status_code == 401
    assert client.get("/api/v1/runs", headers=AUTH).status_code == 200
    assert client.get("/api/v1/health").status_code == 200  # liveness stays open
    page = client.get("/some/page?x=1")
    assert page.status_code == 302 and page.headers["Location"] == "/login?next=/some/page%3Fx%3D1"


def test_the_token_is_compared_in_constant_time(token_app: Flask, monkeypatch) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = auth.hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    token_app.test_client().get("/api/v1/runs", headers={"Authorization": "Bearer nope"})
    assert seen == [(b"nope", TOKEN.encode())]


def test_login_form_sets_a_session_cookie(token_app: Flask) -> None:
    client = token_app.test_client()
    page = client.get("/login?next=/runs/3")
    assert page.status_code == 200 and 'name="csrf"' in page.text and TOKEN not in page.text
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    wrong = client.post("/login", data={"token": "bad", "csrf": csrf, "next": "/runs/3"})
    assert wrong.status_code == 401 and "Wrong access token" in wrong.text
    no_csrf = client.post("/login", data={"token": TOKEN})
    assert no_csrf.status_code == 403 and envelope(no_csrf)["field"] == "csrf"
    ok = client.post("/login", data={"token": TOKEN, "csrf": csrf, "next": "/runs/3"})
    assert ok.status_code == 302 and ok.headers["Location"] == "/runs/3"
    cookie = client.get_cookie("tracker_session")
    assert cookie is not None and cookie.http_only and TOKEN not in cookie.value
    assert client.get("/api/v1/projects").status_code == 200
    assert client.post("/api/v1/runs", json={"project": "p"}).status_code == 201
    assert client.post("/logout", json={}).status_code == 200
    assert client.get("/api/v1/projects").status_code == 401


def test_login_never_redirects_off_site(token_app: Flask) -> None:
    client = token_app.test_client()
    assert client.post("/login", json={"token": TOKEN}).json == {"ok": True}
    for target in ("//evil.example/x", "https://evil.example/", "\\\\evil"):
        client = token_app.test_client()
        page = client.get("/login")
        csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
        ok = client.post("/login", data={"token": TOKEN, "csrf": csrf, "next": target})
        assert ok.headers["Location"] == "/"


# ------------------------------------------------------- origin, host, body type


def test_cross_origin_state_changes_are_forbidden(token_app: Flask) -> None:
    client = token_app.test_client()
    for method, url in mutating_routes(token_app):
        for headers in (
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Origin": "http://localhost:9999"},
            {"Referer": "http://evil.example/page"},
        ):
            response = client.open(url, method=method, json={}, headers={**AUTH, **headers})
            assert response.status_code == 403, (method, url, headers)
            assert has(error_of(response, url), "forbidden")
    same = client.post("/api/v1/runs", json={}, headers={**AUTH, "Origin": "http://localhost"})
    assert same.status_code == 201
    same = client.post(
        "/api/v1/runs", json={}, headers={**AUTH, "Referer": "http://localhost/runs"}
    )
    assert same.status_code == 201


def test_foreign_host_header_is_forbidden_on_every_request(token_app: Flask, make_app) -> None:
    client = token_app.test_client()
    for host in ("evil.example", "evil.example:5000", "127.0.0.1.evil.example"):
        response = client.get("/api/v1/runs", headers={**AUTH, "Host": host})
        assert response.status_code == 403 and envelope(response)["field"] == "Host"
        assert client.get("/api/v1/health", headers={"Host": host}).status_code == 403
    for host in ("127.0.0.1:5000", "localhost", "[::1]:5000"):
        assert client.get("/api/v1/runs", headers={**AUTH, "Host": host}).status_code == 200
    open_app = make_app(ALLOWED_HOSTS=["dash.example"])
    assert open_app.test_client().get("/api/v1/health", headers={"Host": "dash.example"}).json


def test_state_changes_need_a_json_body(token_app: Flask) -> None:
    client = token_app.test_client()
    for method, url in mutating_routes(token_app, raw=False):
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
            response = client.open(url, method=method, data="a=b", content_type=kind, headers=AUTH)
            assert response.status_code == 415, (method, url, kind)
            assert has(error_of(response, url), field="Content-Type")


def test_raw_body_endpoints_are_put_and_delete_only(token_app: Flask) -> None:
    """A body that is not JSON is allowed only where a browser must preflight (PUT, DELETE):
    no raw-body endpoint takes a POST, which a cross-site form could send."""
    found = {
        (rule.endpoint, method)
        for rule in token_app.url_map.iter_rules()
        if rule.endpoint in RAW_BODY_ENDPOINTS
        for method in rule.methods & set(MUTATING)
    }
    assert found == {
        ("artifacts.put_artifact", "PUT"),
        ("artifacts.delete_artifact", "DELETE"),
        ("snapshots.put_blob", "PUT"),
        ("mlflow_artifacts.upload", "PUT"),
        ("mlflow_artifacts.mpu_part", "PUT"),
        ("mlflow_artifacts.delete", "DELETE"),
        ("mlflow_models.delete_tag", "DELETE"),
    }
    client = token_app.test_client()
    cross = {**AUTH, "Origin": "http://evil.example"}
    for method in ("PUT", "DELETE"):
        response = client.open("/api/v1/runs/1/artifacts/x", method=method, data=b"a=b",
                               content_type="text/plain", headers=cross)  # fmt: skip
        assert response.status_code == 403 and envelope(response)["field"] == "Origin"
    for method in ("PUT", "DELETE"):
        url = "/api/2.0/mlflow-artifacts/artifacts/0/1/artifacts/x"
        response = client.open(url, method=method, data=b"a=b", headers=cross)
        assert response.status_code == 403, (method, url)


def test_security_headers_on_success_and_error(token_app: Flask) -> None:
    client = token_app.test_client()
    for response in (client.get("/api/v1/health"), client.get("/api/v1/runs")):
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "DENY"
        csp = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-eval" not in csp and "script-src 'self' 'unsafe-inline'" not in csp


# -------------------------------------------------------------------------- files


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "logs"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "ok.txt").write_text("inside")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    (root / "link.txt").symlink_to(secret)
    (root / "linkdir").symlink_to(tmp_path)
    ckpt = tmp_path / "ckpts"
    ckpt.mkdir()
    (ckpt / "good.pt").write_bytes(b"weights")
    (ckpt / "escape.pt").symlink_to(secret)
    return {"logs": root, "secret": secret, "ckpt": ckpt}


def raw_get(url: str, path: str) -> tuple[int, bytes]:
    """GET with the request line exactly as given (no client-side normalisation)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.putrequest("GET", path, skip_accept_encoding=True)
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


TRAVERSALS = [
    ("../secret.txt", 400),
    ("sub/../../secret.txt", 400),
    ("%2e%2e/secret.txt", 400),
    ("%2E%2E%2Fsecret.txt", 400),
    ("sub%2f..%2f..%2fsecret.txt", 400),
    ("%252e%252e%252fsecret.txt", 400),
    ("%25252e%25252e%25252fsecret.txt", 400),
    ("/etc/passwd", 404),  # the router does not match an empty segment
    ("%2Fetc%2Fpasswd", 404),
    ("..%5csecret.txt", 400),
    ("ok.txt%00.png", 400),
    ("link.txt", 404),
    ("linkdir/secret.txt", 404),
    ("nope.txt", 404),
    ("sub", 404),
]


def test_files_are_served_only_from_inside_their_roots(make_app, serve, roots) -> None:
    app = make_app(LOG_ROOT=str(roots["logs"]), CHECKPOINT_ROOTS=[str(roots["ckpt"])])
    server = serve(app)
    assert raw_get(server.url, "/api/v1/files/logs/sub/ok.txt") == (200, b"inside")
    for attempt, status in TRAVERSALS:
        got, body = raw_get(server.url, "/api/v1/files/logs/" + attempt)
        assert got == status, (attempt, got, body[:200])
        assert b"TOP-SECRET" not in body and b"root:" not in body
    assert raw_get(server.url, "/api/v1/files/etc/passwd")[0] == 404  # no such root


def test_checkpoint_downloads_stay_inside_the_checkpoint_roots(make_app, roots) -> None:
    app = make_app(CHECKPOINT_ROOTS=[str(roots["ckpt"])])
    store = app.extensions["tracker"].store
    client = app.test_client()
    run = create_run(store, "p")
    good = add_checkpoint(store, run.id, 1, str(roots["ckpt"] / "good.pt"), 7, "0" * 64)
    response = client.get(f"/api/v1/checkpoints/{good.id}/download")
    assert response.status_code == 200 and response.data == b"weights"
    assert "attachment" in response.headers["Content-Disposition"]
    for path in (
        str(roots["secret"]),
        str(roots["ckpt"] / "escape.pt"),
        str(roots["ckpt"] / ".." / "secret.txt"),
        "/etc/passwd",
        "relative/good.pt",
    ):
        bad = add_checkpoint(store, run.id, 2, path, 7, "0" * 64)
        response = client.get(f"/api/v1/checkpoints/{bad.id}/download")
        assert response.status_code == 404, path
        assert b"TOP-SECRET" not in response.data and envelope(response)["field"] == "path"
