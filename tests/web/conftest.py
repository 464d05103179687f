"""Fixtures for the dashboard backend: a real app on a real store (SQLite file and
PostgreSQL through ``store_url``), its test client, a token-protected variant, and a real
HTTP server in a thread for the HTTP sink."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.support.servers import ServerThread
from tests.support.web import TOKEN
from tracker.store import Store
from tracker.web.app import create_app


@pytest.fixture
def make_app(store_url: str) -> Iterator[Callable[..., Flask]]:
    """Build apps on the test's store; each one's store is closed at the end."""
    apps: list[Flask] = []

    def build(**config: Any) -> Flask:
        # Tests of the API itself run with authentication off; tests of authentication
        # pass a TOKEN (or NO_AUTH=False) and get it on.
        config.setdefault("NO_AUTH", not config.get("TOKEN"))
        app = create_app({"STORE_URI": store_url, "TESTING": True, **config})
        apps.append(app)
        return app

    yield build
    for app in apps:
        app.extensions["tracker"].store.close()


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def store(app: Flask) -> Any:
    return app.extensions["tracker"].store


@pytest.fixture
def token_app(make_app: Callable[..., Flask]) -> Flask:
    return make_app(TOKEN=TOKEN)


@pytest.fixture
def serve() -> Iterator[Callable[[Flask], ServerThread]]:
    servers: list[ServerThread] = []

    def start(app: Flask) -> ServerThread:
        servers.append(ServerThread(app))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


# The CLI commands that work against the database and against a dashboard over HTTP
# (tests/web/test_cli_*.py): both ways, one test each.
@pytest.fixture
def served(make_app: Callable[..., Flask]) -> Iterator[tuple[Store, str]]:
    """(the store, the URL of a token-protected dashboard on it, served over HTTP)."""
    app = make_app(TOKEN=TOKEN)
    server = ServerThread(app)
    yield app.extensions["tracker"].store, server.url
    server.stop()


@pytest.fixture(params=["local", "http"])
def where(request: pytest.FixtureRequest, served: tuple[Store, str],
          store_url: str) -> tuple[Store, list[str]]:  # fmt: skip
    """(the store, the --uri/--token options that reach it one way or the other)."""
    store, url = served
    if request.param == "local":
        return store, ["--uri", store_url]
    return store, ["--uri", url, "--token", TOKEN]
