"""Wrong access tokens are limited per client address: the pure rules with a given clock,
then the dashboard answering 429 (bearer header, JSON sign-in and the sign-in form)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.web import TOKEN, envelope
from tracker.cli.ui import app_config
from tracker.web.plumbing.login_limit import FailureLimit

RIGHT = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer guess"}
WEAK = "letmein"  # a token a person chose: allowed on loopback, guessable
RIGHT_WEAK = {"Authorization": f"Bearer {WEAK}"}


# ------------------------------------------------------------------------- rules


def test_the_limit_blocks_at_max_failures_until_the_oldest_leaves_the_window() -> None:
    limit = FailureLimit(max_failures=3, window_s=60)
    for t in (0.0, 10.0):
        limit.failed("a", t)
        assert limit.retry_after("a", t) is None
    limit.failed("a", 20.0)
    assert limit.retry_after("a", 20.0) == 40  # the failure at 0 leaves at 60
    assert limit.retry_after("a", 59.5) == 1  # rounded up, never 0
    assert limit.retry_after("a", 60.0) is None  # two left in the window
    assert limit.retry_after("b", 20.0) is None  # per address


def test_old_failures_expire() -> None:
    limit = FailureLimit(max_failures=2, window_s=10)
    limit.failed("a", 1.0)
    limit.failed("a", 12.0)  # the one at 1.0 expired at 11
    assert limit.retry_after("a", 12.0) is None
    limit.failed("a", 13.0)
    assert limit.retry_after("a", 13.0) == 9


def test_memory_stays_bounded_to_the_latest_addresses() -> None:
    limit = FailureLimit(max_failures=1, window_s=60, max_clients=2)
    for client in ("a", "b", "c"):
        limit.failed(client, 0.0)
    assert limit.retry_after("a", 1.0) is None  # forgotten: least recently failing
    assert limit.retry_after("b", 1.0) == 59 and limit.retry_after("c", 1.0) == 59


@pytest.mark.parametrize("kwargs", [{"max_failures": 0}, {"window_s": 0}, {"max_clients": 0}])
def test_nonsense_limits_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        FailureLimit(**kwargs)


# ----------------------------------------------------------------------- server


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'limit.db'}"  # the limit does not depend on the dialect


def test_wrong_bearer_tokens_get_429_until_the_window_passes(make_app) -> None:
    app = make_app(TOKEN=WEAK, LOGIN_MAX_FAILURES=3, LOGIN_WINDOW_S=60.0)
    now = [1000.0]
    app.extensions["tracker_login_limit"].clock = lambda: now[0]
    client = app.test_client()
    for _ in range(5):  # no token at all: not counted
        assert client.get("/api/v1/runs").status_code == 401
    for _ in range(3):
        assert client.get("/api/v1/runs", headers=WRONG).status_code == 401
    assert client.get("/api/v1/runs", headers=WRONG).status_code == 429
    blocked = client.get("/api/v1/runs", headers=RIGHT_WEAK)  # a guessable one waits too
    assert blocked.status_code == 429 and blocked.headers["Retry-After"] == "60"
    assert envelope(blocked)["code"] == "too_many_attempts"
    assert envelope(blocked)["field"] == "Authorization"
    assert WEAK not in blocked.text
    other = {"REMOTE_ADDR": "10.0.0.2"}
    assert client.get("/api/v1/runs", headers=RIGHT_WEAK, environ_base=other).status_code == 200
    now[0] += 59.0
    assert client.get("/api/v1/runs", headers=RIGHT_WEAK).status_code == 429  # not yet
    now[0] += 1.0  # the first wrong token leaves the window
    assert client.get("/api/v1/runs", headers=RIGHT_WEAK).status_code == 200


def test_wrong_tokens_never_lock_out_a_valid_one(make_app) -> None:
    """Anyone on the host can send wrong tokens from 127.0.0.1: that must not stop the
    training hosts' heartbeats and ingest, nor the admin, whose tokens cannot be guessed
    (a strong configured token, stored tokens)."""
    from tracker.store.tokens import create_token

    app = make_app(TOKEN=TOKEN, LOGIN_MAX_FAILURES=3, LOGIN_WINDOW_S=300.0)
    _, log = create_token(app.extensions["tracker"].store, "log", "training host")
    client = app.test_client()
    for _ in range(10):
        client.get("/api/v1/runs", headers=WRONG)
    assert client.get("/api/v1/runs", headers=WRONG).status_code == 429  # the guesser waits
    assert client.get("/api/v1/runs", headers=RIGHT).status_code == 200
    as_log = {"Authorization": f"Bearer {log}"}
    created = client.post("/api/v1/runs", json={"project": "p"}, headers=as_log)
    assert created.status_code in (200, 201), created.json
    run_id = created.json["id"]
    beat = client.post(f"/api/v1/runs/{run_id}/heartbeat", json={}, headers=as_log)
    assert beat.status_code == 200
    assert client.post("/login", json={"token": TOKEN}).status_code == 200


def test_sign_in_is_limited_too(make_app) -> None:
    app = make_app(TOKEN=WEAK, LOGIN_MAX_FAILURES=2)
    client = app.test_client()
    page = client.get("/login")
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    for _ in range(2):
        wrong = client.post("/login", data={"token": "guess", "csrf": csrf})
        assert wrong.status_code == 401 and "Wrong access token" in wrong.text
    form = client.post("/login", data={"token": WEAK, "csrf": csrf})
    assert form.status_code == 429 and "Too many wrong tokens" in form.text
    assert int(form.headers["Retry-After"]) >= 1
    assert client.get_cookie("tracker_session").value  # the csrf session, not signed in
    assert client.get("/api/v1/projects").status_code == 401
    as_json = client.post("/login", json={"token": WEAK})
    assert as_json.status_code == 429 and envelope(as_json)["field"] == "token"


def test_right_tokens_between_guesses_do_not_reset_the_count(make_app) -> None:
    """Behind one NAT, a process sending the right token must not give a guesser there
    unlimited tries."""
    app = make_app(TOKEN=WEAK, LOGIN_MAX_FAILURES=2)
    client = app.test_client()
    assert client.post("/login", json={"token": "guess-1"}).status_code == 401
    assert client.get("/api/v1/runs", headers=RIGHT_WEAK).status_code == 200
    assert client.post("/login", json={"token": "guess-2"}).status_code == 401
    assert client.get("/api/v1/runs", headers=RIGHT_WEAK).status_code == 429


def test_secure_cookie_option_marks_the_session_cookie_secure(make_app) -> None:
    config = app_config(None, "127.0.0.1", TOKEN, (), (), None, secure_cookie=True)
    assert config["SESSION_COOKIE_SECURE"] is True
    app = make_app(TOKEN=TOKEN, SESSION_COOKIE_SECURE=True)
    client = app.test_client()
    assert client.post("/login", json={"token": TOKEN}, base_url="https://localhost").json == {
        "ok": True
    }
    cookie = client.get_cookie("tracker_session", domain="localhost")
    assert cookie is not None and cookie.secure and cookie.http_only
    plain = make_app(TOKEN=TOKEN).test_client()
    plain.post("/login", json={"token": TOKEN})
    assert plain.get_cookie("tracker_session").secure is False  # default: plain HTTP works


# ------------------------------------------------------------- behind a reverse proxy


def _guess_from(client: Any, forwarded_for: str) -> int:
    headers = {**WRONG, "X-Forwarded-For": forwarded_for}
    return int(client.get("/api/v1/runs", headers=headers).status_code)


def test_forwarded_headers_are_ignored_without_proxy_hops(make_app) -> None:
    """A client sending a new X-Forwarded-For with each guess is still one address."""
    app = make_app(TOKEN=TOKEN, LOGIN_MAX_FAILURES=2)
    client = app.test_client()
    assert [_guess_from(client, f"203.0.113.{i}") for i in range(3)] == [401, 401, 429]


def test_one_trusted_proxy_counts_the_address_it_saw_not_what_the_client_claimed(
    make_app,
) -> None:
    """With --proxy-hops 1 the limit keys on the address the proxy appended (the last one):
    an address the client put in front of it changes nothing."""
    config = app_config(None, "127.0.0.1", TOKEN, (), (), None, proxy_hops=1)
    assert config["PROXY_HOPS"] == 1
    app = make_app(TOKEN=TOKEN, LOGIN_MAX_FAILURES=2, PROXY_HOPS=1)
    client = app.test_client()
    spoofed = [_guess_from(client, f"198.51.100.{i}, 192.0.2.7") for i in range(3)]
    assert spoofed == [401, 401, 429]  # all from 192.0.2.7, whatever came before it
    assert _guess_from(client, "192.0.2.8") == 401  # another real client is not blocked
    # the Host the proxy forwards is the one checked against the allowed hosts
    forwarded_host = {**RIGHT, "X-Forwarded-For": "192.0.2.9", "X-Forwarded-Host": "evil.test"}
    assert client.get("/api/v1/runs", headers=forwarded_host).status_code == 403
    direct = make_app(TOKEN=TOKEN).test_client()  # no trusted proxy: the header is ignored
    assert direct.get("/api/v1/runs", headers=forwarded_host).status_code == 200
