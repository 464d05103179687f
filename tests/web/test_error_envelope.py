"""One error envelope for every endpoint: each route of ``app.url_map`` is driven into its
errors (no token, foreign Host, wrong method, non-JSON body, cross-origin, unknown ids)
and every error response must be exactly ``{"error": {"code", "message", "field"?}}`` --
except on the MLflow-compatible routes (``/api/2.0/mlflow/``), which answer in MLflow's
own shape ``{"error_code", "message"}`` because the MLflow client parses that."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.routing import IntegerConverter, Rule

from tests.support.web import MUTATING, TOKEN, envelope, error_of, has
from tracker.errors import StoreUnavailable
from tracker.web.plumbing.security import PUBLIC, RAW_BODY_ENDPOINTS, required_scope

AUTH = {"Authorization": f"Bearer {TOKEN}"}
SAME_ORIGIN = {"Origin": "http://localhost"}


def fill(rule: Rule) -> str:
    """A URL for the rule with ids that do not exist."""
    values = {}
    for arg, converter in rule._converters.items():
        values[arg] = 987654 if isinstance(converter, IntegerConverter) else "nope"
    return rule.build(values, append_unknown=False)[1]


def routes(app: Flask) -> Iterator[tuple[Rule, str, str]]:
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            yield rule, method, fill(rule)


def public(rule: Rule, method: str) -> bool:
    return required_scope(rule.endpoint, method) == PUBLIC


def test_every_endpoint_answers_errors_with_the_envelope(token_app: Flask) -> None:
    client: FlaskClient = token_app.test_client()
    adapter = token_app.url_map.bind("localhost")
    checked = 0
    for rule, method, url in routes(token_app):
        where = f"{method} {url}"
        if not public(rule, method):
            response = client.open(url, method=method, json={})
            if not (method == "GET" and not url.startswith("/api/")):  # pages redirect
                assert response.status_code == 401, where
                assert has(error_of(response, url), "unauthorized"), where
        response = client.open(url, method=method, json={}, headers={"Host": "evil.example"})
        assert response.status_code == 403 and has(error_of(response, url), field="Host"), where
        taken = set(adapter.allowed_methods(url))  # other rules may share the URL
        unused = next((m for m in ("PUT", "PATCH", "DELETE", "POST") if m not in taken), None)
        if unused is not None:
            response = client.open(url, method=unused, json={}, headers=AUTH)
            assert response.status_code == 405, where
            assert envelope(response)["code"] == "method_not_allowed", where
        if method in MUTATING and rule.endpoint != "auth.login":
            if rule.endpoint not in RAW_BODY_ENDPOINTS:
                response = client.open(url, method=method, data="x", headers=AUTH)
                assert response.status_code == 415, where
                assert has(error_of(response, url), "unsupported_media_type"), where
            cross = {**AUTH, "Origin": "http://evil.example"}
            response = client.open(url, method=method, json={}, headers=cross)
            assert response.status_code == 403, where
            assert has(error_of(response, url), field="Origin"), where
        response = client.open(url, method=method, json={}, headers={**AUTH, **SAME_ORIGIN})
        if response.status_code >= 400:
            error_of(response, url)
        checked += 1
    assert checked >= 30  # the API really was walked


def test_unknown_url_unexpected_exception_and_tracker_errors(make_app) -> None:
    app = make_app()

    @app.get("/api/v1/test-boom")
    def boom() -> None:
        raise RuntimeError("internal detail that must not leak")

    @app.get("/api/v1/test-down")
    def down() -> None:
        raise StoreUnavailable("the database is restarting")

    client = app.test_client()
    error = envelope(client.get("/api/v1/no/such/thing"))
    assert error["code"] == "not_found"
    response = client.get("/api/v1/test-boom")
    assert response.status_code == 500
    error = envelope(response)
    assert error["code"] == "internal_error" and "internal detail" not in response.text
    response = client.get("/api/v1/test-down")
    assert response.status_code == 503 and envelope(response)["code"] == "store_unavailable"


@pytest.mark.parametrize("path", ["/api/v1/runs/1/metrics", "/api/v1/runs/1/logs", "/api/v1/runs"])
def test_too_large_and_bad_encoding_bodies(make_app, path: str) -> None:
    client = make_app(MAX_CONTENT_LENGTH=100).test_client()
    response = client.post(path, data="{" + " " * 200 + "}", content_type="application/json")
    assert response.status_code == 413 and envelope(response)
    response = client.post(
        path, data="{}", content_type="application/json", headers={"Content-Encoding": "br"}
    )
    assert response.status_code == 415 and envelope(response)["field"] == "Content-Encoding"
