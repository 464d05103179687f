"""Who may do what, route by route: the scope table of ``security.ENDPOINT_SCOPES`` covers
every route, and every route answers anonymous, ``log`` and ``admin`` requests as the
table says (401 / 403 ``forbidden_scope`` / allowed, where allowed means neither 401 nor
403: the route may still answer 400 or 404 to an empty body). Then the threat model of
SECURITY.md, cell by cell: (anonymous loopback user, log token, admin token, LAN client,
cross-site page) x (read, log, launch, cancel, download). SQLite and PostgreSQL."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from werkzeug.routing import IntegerConverter, Rule

from tests.support.web import MUTATING, error_of, has
from tracker.store import Store
from tracker.store.runs import create_run
from tracker.store.tokens import create_token
from tracker.web.app import create_app
from tracker.web.plumbing.security import (
    ADMIN,
    BLUEPRINT_SCOPES,
    ENDPOINT_SCOPES,
    LOG,
    PUBLIC,
    required_scope,
)

REPO = Path(__file__).resolve().parents[2]


def _url(rule: Rule) -> str:
    values = {arg: 987654 if isinstance(c, IntegerConverter) else "x"
              for arg, c in rule._converters.items()}  # fmt: skip
    return rule.build(values, append_unknown=False)[1]


def _routes() -> list[tuple[str, str, str]]:
    """(endpoint, method, url) of every route of a real app, listed at collection."""
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app({"STORE_URI": f"sqlite:///{tmp}/routes.db", "NO_AUTH": True})
        found = [
            (rule.endpoint, method, _url(rule))
            for rule in app.url_map.iter_rules()
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"})
        ]
        app.extensions["tracker"].store.close()
    return sorted(found)


ROUTES = _routes()
WHO = ("anonymous", "log", "admin")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def matrix(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    pg_session_url: str | None,
) -> Iterator[tuple[Flask, dict[str, dict[str, str]]]]:
    """One app per dialect for the whole module, with a stored log and admin token."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('matrix') / 'tracker.db'}"
    elif pg_session_url is None:
        pytest.skip("PostgreSQL tests need TRACKER_TEST_PG_URL")
    else:
        url = pg_session_url
    logs = tmp_path_factory.mktemp("logs")
    (logs / "train.log").write_text("epoch 1\n")
    app = create_app({"STORE_URI": url, "TESTING": True, "LOGIN_MAX_FAILURES": 10_000,
                      "LOG_ROOT": str(logs)})  # fmt: skip
    store: Store = app.extensions["tracker"].store
    headers = {"anonymous": {}}
    for scope in (LOG, ADMIN):
        secret = create_token(store, scope, f"matrix-{scope}")[1]
        headers[scope] = {"Authorization": f"Bearer {secret}"}
    yield app, headers
    store.close()


def test_every_route_is_in_the_scope_table() -> None:
    endpoints = {endpoint for endpoint, _, _ in ROUTES}
    explicit = {e for e in endpoints if e.partition(".")[0] in BLUEPRINT_SCOPES}
    assert endpoints - explicit <= set(ENDPOINT_SCOPES), "add new routes to ENDPOINT_SCOPES"
    assert set(ENDPOINT_SCOPES) <= endpoints, "ENDPOINT_SCOPES names a route that is gone"
    assert {ENDPOINT_SCOPES[e] for e in ENDPOINT_SCOPES} <= {PUBLIC, LOG, ADMIN}
    assert {e for e in endpoints if e.startswith("mlflow.")} <= explicit  # the MLflow API: log


def test_deleting_stored_data_needs_admin_on_every_route() -> None:
    """A log token deletes nothing it did not create as a tag: no run, file, model or
    schedule, on /api/v1 or the MLflow routes (MLflow's artifact and logged-model DELETEs
    once took the blueprint's log rule)."""
    tags = {"mlflow.delete_tag", "mlflow_models.delete_tag",
            "mlflow_lifecycle.delete_experiment_tag"}  # fmt: skip
    deletes = {
        (endpoint, method)
        for endpoint, method, _ in ROUTES
        if (method == "DELETE" or "delete" in endpoint.partition(".")[2])
        and endpoint not in tags
        and endpoint != "mlflow.not_implemented"  # answers 501 to every method
    }
    assert ("mlflow_artifacts.delete", "DELETE") in deletes
    assert ("mlflow_models.delete_model", "DELETE") in deletes
    assert {(e, m) for e, m in deletes if required_scope(e, m) != ADMIN} == set()
    assert required_scope("mlflow.some_new_delete", "POST") == ADMIN  # fails closed
    assert required_scope("mlflow.anything", "DELETE") == ADMIN


def test_training_hosts_write_their_console_with_a_log_token() -> None:
    # A script run by hand sends its console output with the same token as its metrics.
    assert ENDPOINT_SCOPES["api.append_run_logs"] == ENDPOINT_SCOPES["api.write_metrics"] == LOG
    assert ("api.append_run_logs", "POST", "/api/v1/runs/987654/logs") in ROUTES


def test_unknown_endpoints_fail_closed() -> None:
    for method in MUTATING:
        assert required_scope("new_blueprint.new_view", method) == ADMIN
    assert required_scope("new_blueprint.new_view", "GET") == LOG
    assert required_scope(None, "POST") == LOG  # no such route: a token, then 404/405
    assert required_scope("mlflow.anything", "POST") == LOG


def _expected(who: str, needed: str) -> str:
    if needed == PUBLIC or who == ADMIN or (who == LOG and needed == LOG):
        return "allowed"
    return "401" if who == "anonymous" else "403"


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize(("endpoint", "method", "url"), ROUTES)
def test_scope_matrix(matrix: Any, endpoint: str, method: str, url: str, who: str) -> None:
    app, headers = matrix
    needed = required_scope(endpoint, method)
    body = {} if method in MUTATING else None
    response = app.test_client().open(url, method=method, json=body, headers=headers[who])
    expected = _expected(who, needed)
    where = f"{who}: {method} {url} ({endpoint} needs {needed})"
    if expected == "allowed" and endpoint == "auth.login" and method == "POST":
        # past the guard; the sign-in view itself answers 401 to a body without a token
        assert response.status_code == 401 and error_of(response, url)["field"] == "token"
    elif expected == "allowed":
        assert response.status_code not in (401, 403), where
    elif expected == "401":
        if method == "GET" and not url.startswith("/api/"):  # a page: to the sign-in form
            assert response.status_code == 302, where
            assert response.headers["Location"].startswith("/login?next="), where
        else:
            assert response.status_code == 401, where
            assert has(error_of(response, url), "unauthorized"), where
    else:
        assert response.status_code == 403, where
        error = error_of(response, url)
        assert has(error, "forbidden_scope") and f"'{needed}' scope" in error["message"], where


# ------------------------------------------------------------------- threat model

ACTIONS = {  # the columns of SECURITY.md's table: one route each, the one that matters
    "read": ("GET", "/api/v1/runs"),
    "log": ("POST", "/api/v1/runs/{run}/metrics"),
    "launch": ("POST", "/api/v1/jobs/{job}/clone"),
    "cancel": ("POST", "/api/v1/jobs/{job}/cancel"),
    "download": ("GET", "/api/v1/files/logs/train.log"),
}
# The rows: what each may do ("ok"), or the status that stops it.
THREAT_MODEL = {
    "anonymous loopback user": dict.fromkeys(ACTIONS, 401),
    "log token": {"read": "ok", "log": "ok", "launch": 403, "cancel": 403, "download": "ok"},
    "admin token": dict.fromkeys(ACTIONS, "ok"),
    "LAN client": dict.fromkeys(ACTIONS, 403),  # a Host name this dashboard does not serve
    "cross-site page": {
        "read": "unreadable",
        "log": 403,
        "launch": 403,
        "cancel": 403,
        "download": "unreadable",
    },
}


@pytest.fixture
def seeded(matrix: Any) -> dict[str, Any]:
    """A run and a job on the matrix app, so each action reaches its real work."""
    from tracker.entities import JobSpec
    from tracker.store.queue import enqueue_many

    app, headers = matrix
    store = app.extensions["tracker"].store
    run = create_run(store, "threat", config={"lr": 0.1})
    spec = JobSpec(argv=["python", "train.py"], project="threat", config={"lr": 0.1})
    job = enqueue_many(store, [spec])[0]
    return {"app": app, "headers": headers, "run": run.id, "job": job.id}


def _request(seeded: dict[str, Any], action: str, **kwargs: Any) -> Any:
    method, path = ACTIONS[action]
    url = path.format(run=seeded["run"], job=seeded["job"])
    body = {"records": [[0, 0.0, {"loss": 1.0}]]} if action == "log" else {}
    return (
        seeded["app"]
        .test_client()
        .open(url, method=method, json=body if method in MUTATING else None, **kwargs)
    )


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("row", THREAT_MODEL)
def test_threat_model(seeded: dict[str, Any], row: str, action: str) -> None:
    headers = seeded["headers"]
    if row == "anonymous loopback user":
        response = _request(seeded, action, environ_base={"REMOTE_ADDR": "127.0.0.1"})
    elif row in ("log token", "admin token"):
        response = _request(seeded, action, headers=headers[row.split()[0]])
    elif row == "LAN client":
        # Bound to loopback, the port is not reachable from the LAN at all; bound to the
        # LAN, a client needs a strong token (check_bind) and a Host name that is ours.
        lan = {"REMOTE_ADDR": "192.168.1.20"}
        response = _request(seeded, action, environ_base=lan, headers={"Host": "evil.example"})
        assert has(error_of(response, "/api/v1/"), field="Host")
        anonymous = _request(seeded, action, environ_base=lan)
        assert anonymous.status_code == 401
    else:
        # The victim is signed in as admin; the attacker's page makes the browser send
        # the request with the victim's cookie (Origin/Referer: the attacker's site).
        client = seeded["app"].test_client()
        assert client.post("/login", json={"token": headers[ADMIN]["Authorization"][7:]}).json
        method, path = ACTIONS[action]
        url = path.format(run=seeded["run"], job=seeded["job"])
        cross = {"Origin": "https://evil.example", "Referer": "https://evil.example/x"}
        body = {"records": [[0, 0.0, {"loss": 1.0}]]} if action == "log" else {}
        response = client.open(url, method=method, headers=cross,
                               json=body if method in MUTATING else None)  # fmt: skip
        cookie = client.get_cookie("tracker_session")
        assert cookie is not None and cookie.http_only and cookie.same_site == "Lax"
    expected = THREAT_MODEL[row][action]
    if expected == "ok":
        assert response.status_code in (200, 201), (row, action, response.text[:300])
    elif expected == "unreadable":
        # Served (the cookie is SameSite=Lax, so only a top-level navigation carries it),
        # but no CORS header: the page's script can never read the answer.
        assert "Access-Control-Allow-Origin" not in response.headers
        assert "Access-Control-Allow-Credentials" not in response.headers
    else:
        assert response.status_code == expected, (row, action, response.text[:300])
    if row == "log token" and expected == 403:
        assert error_of(response, "/api/v1/")["code"] == "forbidden_scope"


def test_security_md_states_this_threat_model() -> None:
    text = (REPO / "SECURITY.md").read_text()
    for name in [*THREAT_MODEL, *ACTIONS]:
        assert name in text, f"SECURITY.md's threat model lacks {name!r}"
