"""Signing in to the dashboard: stored tokens and the configured token as bearer headers,
server-side sessions behind a cookie that says nothing about the token (the offline-
guessing regression), logout and revocation ending sessions, the sign-in link, redirects
that stay on this site, scopes (403 forbidden_scope), and the bind rules (weak tokens,
--no-auth). SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from tests.support.web import TOKEN, envelope
from tracker.store.tokens import create_token, installation_secret, revoke_token
from tracker.web.plumbing.auth import safe_next
from tracker.web.plumbing.security import InsecureBind, check_bind, weak_token_reason


def _store(app: Flask) -> Any:
    return app.extensions["tracker"].store


def _cookie_payload(app: Flask, client: FlaskClient) -> dict[str, Any]:
    """The session cookie's content, after checking its signature with the app's key."""
    cookie = client.get_cookie("tracker_session")
    assert cookie is not None
    serializer = app.session_interface.get_signing_serializer(app)  # type: ignore[attr-defined]
    return dict(serializer.loads(cookie.value))


def _csrf(client: FlaskClient, url: str = "/login") -> str:
    page = client.get(url)
    return page.text.split('name="csrf" value="')[1].split('"')[0]


# ------------------------------------------------------------------- the cookie


def test_the_session_key_is_the_installation_secret_not_the_token(make_app) -> None:
    one, two = make_app(TOKEN=TOKEN), make_app(TOKEN=TOKEN[::-1])
    secret = installation_secret(_store(one))
    assert one.secret_key == two.secret_key == secret
    assert TOKEN not in secret and hashlib.sha256(TOKEN.encode()).hexdigest() != secret


def test_the_login_cookie_gives_no_information_about_the_token(make_app) -> None:
    """Offline guessing: before signing in, /login hands out a cookie; it must not depend
    on the token at all (it used to be signed with a key derived from the token)."""
    seen = []
    for token in (TOKEN, "another-token-" + TOKEN, "x"):
        app = make_app(TOKEN=token)
        client = app.test_client()
        client.get("/login")
        payload = _cookie_payload(app, client)
        assert set(payload) == {"csrf"}
        seen.append((app.secret_key, payload["csrf"]))
    assert len({key for key, _ in seen}) == 1  # the same key whatever the token
    assert len({csrf for _, csrf in seen}) == 3  # random per visitor


def test_a_session_id_is_random_and_names_a_server_side_row(make_app) -> None:
    app = make_app(TOKEN=TOKEN)
    ids = []
    for _ in range(3):
        client = app.test_client()
        assert client.post("/login", json={"token": TOKEN}).json == {"ok": True}
        payload = _cookie_payload(app, client)
        assert set(payload) == {"sid"} and len(payload["sid"]) == 43
        ids.append(payload["sid"])
    assert len(set(ids)) == 3 and not any(TOKEN in i for i in ids)
    with _store(app).engine.connect() as conn:
        rows = set(conn.execute(sa.text("SELECT id FROM auth_sessions")).scalars())
    assert rows == {hashlib.sha256(i.encode()).hexdigest() for i in ids}


def test_logout_ends_the_session_on_the_server(make_app) -> None:
    app = make_app(TOKEN=TOKEN)
    client = app.test_client()
    client.post("/login", json={"token": TOKEN})
    stolen = client.get_cookie("tracker_session").value
    assert client.get("/api/v1/runs").status_code == 200
    assert client.post("/logout", json={}).status_code == 200
    replay = app.test_client()
    replay.set_cookie("tracker_session", stolen)
    assert replay.get("/api/v1/runs").status_code == 401  # the old cookie is dead


def test_revoking_a_token_ends_its_sessions_and_a_new_token_ends_the_old_ones(make_app) -> None:
    app = make_app(TOKEN=TOKEN)
    info, secret = create_token(_store(app), "log")
    stored = app.test_client()
    assert stored.post("/login", json={"token": secret}).status_code == 200
    assert stored.get("/api/v1/runs").status_code == 200
    revoke_token(_store(app), info.id)
    assert stored.get("/api/v1/runs").status_code == 401
    configured = app.test_client()
    configured.post("/login", json={"token": TOKEN})
    cookie = configured.get_cookie("tracker_session").value
    for token, status in ((TOKEN, 200), ("rotated-" + TOKEN, 401)):
        restarted = make_app(TOKEN=token).test_client()  # same store, a restart
        restarted.set_cookie("tracker_session", cookie)
        assert restarted.get("/api/v1/runs").status_code == status, token


def test_sessions_expire(make_app) -> None:
    app = make_app(TOKEN=TOKEN, SESSION_LIFETIME_S=0.0)
    client = app.test_client()
    client.post("/login", json={"token": TOKEN})
    assert client.get("/api/v1/runs").status_code == 401


# ------------------------------------------------------------------ the sign-in


def test_the_sign_in_link_signs_in_and_drops_the_token_from_the_url(make_app) -> None:
    app = make_app(NO_AUTH=False)  # no configured token: the stored ones
    _, secret = create_token(_store(app), "admin", "ui-test")
    client = app.test_client()
    assert client.get("/api/v1/runs").status_code == 401
    page = client.get(f"/login?token={secret}")
    assert page.status_code == 302 and page.headers["Location"] == "/"
    assert page.headers["Cache-Control"] == "no-store"
    assert client.get("/api/v1/runs").status_code == 200
    assert client.post("/api/v1/jobs/1/cancel", json={}).status_code == 404  # admin: past 403
    deep = app.test_client().get(f"/login?token={secret}&next=/runs/4")
    assert deep.headers["Location"] == "/runs/4"
    wrong = app.test_client().get("/login?token=trk_guess")
    assert wrong.status_code == 401 and "Wrong access token" in wrong.text


@pytest.mark.parametrize(
    "headers",
    [{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
     {"Referer": "http://evil.example/page"}, {"Referer": "http://localhost:8000/x"}],
    ids=["cross-site", "same-site", "foreign-referer", "other-port-referer"],
)  # fmt: skip
def test_a_sign_in_link_from_another_site_asks_first(make_app, headers: dict[str, str]) -> None:
    """Login CSRF: a page elsewhere navigating to /login?token=<attacker's token> must not
    sign the browser in as the attacker; the link's page asks, and only its form (with the
    CSRF field another site cannot read) signs in."""
    app = make_app(NO_AUTH=False)
    _, attacker = create_token(_store(app), "log", "attacker")
    client = app.test_client()
    page = client.get(f"/login?token={attacker}", headers=headers)
    assert page.status_code == 200 and 'id="login-confirm"' in page.text
    assert client.get("/api/v1/runs").status_code == 401  # not signed in
    confirmed = client.post(
        "/login", data={"csrf": _csrf(client), "token": attacker, "next": "/"},
        headers={"Origin": "http://localhost"},
    )  # fmt: skip
    assert confirmed.status_code == 302  # the user's own click signs in
    assert client.get("/api/v1/runs").status_code == 200


def test_a_sign_in_link_never_replaces_a_session_without_asking(make_app) -> None:
    app = make_app(NO_AUTH=False)
    _, admin = create_token(_store(app), "admin", "me")
    _, attacker = create_token(_store(app), "log", "attacker")
    client = app.test_client()
    assert (
        client.get(f"/login?token={admin}", headers={"Sec-Fetch-Site": "none"}).status_code == 302
    )
    page = client.get(f"/login?token={attacker}", headers={"Sec-Fetch-Site": "none"})
    assert page.status_code == 200 and "You are signed in already." in page.text
    assert client.post("/api/v1/jobs/1/cancel", json={}).status_code == 404  # still admin
    fresh = app.test_client()  # opened from the terminal, not signed in: straight in
    assert fresh.get(f"/login?token={admin}", headers={"Sec-Fetch-Site": "none"}).status_code == 302


def test_bearer_tokens_carry_their_scope(make_app) -> None:
    app = make_app(TOKEN=TOKEN)
    _, log = create_token(_store(app), "log")
    client = app.test_client()
    as_log = {"Authorization": f"Bearer {log}"}
    assert client.post("/api/v1/runs", json={"project": "p"}, headers=as_log).status_code == 201
    refused = client.post("/api/v1/jobs/1/clone", json={}, headers=as_log)
    assert refused.status_code == 403
    error = envelope(refused)
    assert error["code"] == "forbidden_scope" and "'admin' scope" in error["message"]
    assert log not in refused.text
    admin = {"Authorization": f"Bearer {TOKEN}"}  # the configured token is admin
    assert client.post("/api/v1/jobs/1/clone", json={}, headers=admin).status_code == 404
    mlflow = client.post("/api/2.0/mlflow/experiments/create", json={"name": "e"}, headers=as_log)
    assert mlflow.status_code == 200
    assert app.test_client().get("/api/v1/health").json["auth"] is True


def test_no_auth_lets_everyone_in_and_only_on_loopback(make_app) -> None:
    app = make_app(NO_AUTH=True)
    client = app.test_client()
    assert client.post("/api/v1/jobs/1/cancel", json={}).status_code == 404
    assert client.get("/login").headers["Location"] == "/"
    assert client.get("/api/v1/health").json["auth"] is False
    with pytest.raises(InsecureBind, match="only allowed on a loopback"):
        make_app(NO_AUTH=True, BIND_HOST="0.0.0.0")
    with pytest.raises(InsecureBind, match="exclude each other"):
        make_app(NO_AUTH=True, TOKEN=TOKEN)


# -------------------------------------------------------------------- redirects

OFF_SITE = [
    "//evil.example/x",
    "https://evil.example/",
    "http:evil.example",
    "http:/evil.example",
    "javascript:alert(1)",
    "\\\\evil",
    "/\\evil",
    "/\\/evil",
    "/\t/evil",
    "/\n/evil",
    "/\r\n/evil",
    "\t//evil",
    " //evil",
    "//\tevil",
    "/\x00/evil",
    "evil.example",
    "",
]
ON_SITE = [
    ("/runs/3", "/runs/3"),
    ("/?q=status == running", "/?q=status%20==%20running"),
    ("/compare?runs=1,2", "/compare?runs=1,2"),
    (" /jobs", "/jobs"),
    ("/%09/evil", "/%09/evil"),  # an encoded tab stays encoded: a path on this site
]


@pytest.mark.parametrize("target", OFF_SITE)
def test_redirects_after_sign_in_never_leave_the_site(make_app, target: str) -> None:
    assert safe_next(target) == "/"
    app = make_app(TOKEN=TOKEN)
    form = app.test_client()
    response = form.post("/login", data={"token": TOKEN, "csrf": _csrf(form), "next": target})
    assert response.status_code == 302 and response.headers["Location"] == "/"
    link = app.test_client().get("/login", query_string={"token": TOKEN, "next": target})
    assert link.headers["Location"] == "/"


@pytest.mark.parametrize(("target", "where"), ON_SITE)
def test_redirects_on_this_site_are_kept(target: str, where: str) -> None:
    assert safe_next(target) == where


# -------------------------------------------------------------------- bind rules


def test_weak_tokens_are_refused_off_loopback_only() -> None:
    strong = "trk_" + "0123456789abcdefghijklmnopqrstuvwxyz"
    assert weak_token_reason(strong) is None
    assert "fewer than 32" in str(weak_token_reason("hunter2"))
    assert "different characters" in str(weak_token_reason("ab" * 20))
    for weak in ("hunter2", "a" * 64, "password" * 4):
        check_bind("127.0.0.1", weak)  # loopback: accepted (the CLI warns)
        with pytest.raises(InsecureBind, match="at least 32 characters, at least 10"):
            check_bind("0.0.0.0", weak)
    check_bind("0.0.0.0", strong)
    check_bind("127.0.0.1", None, no_auth=True)
    with pytest.raises(InsecureBind, match="only allowed on a loopback"):
        check_bind("192.168.1.5", None, no_auth=True)


def test_every_wrong_token_kind_is_counted(make_app: Callable[..., Flask]) -> None:
    app = make_app(TOKEN=TOKEN, LOGIN_MAX_FAILURES=3)
    client = app.test_client()
    client.get("/api/v1/runs", headers={"Authorization": "Bearer trk_guess1"})
    client.get("/login?token=trk_guess2")
    client.post("/login", json={"token": "trk_guess3"})
    assert client.get("/login?token=trk_guess4").status_code == 429
