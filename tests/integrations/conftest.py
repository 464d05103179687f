"""Fixtures for the integration tests: the examples loaded as modules (their ``main`` runs in
this process), the tracker pointed at the test's store, and a real dashboard server for the
MLflow client (a thread on a free port)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here may reach the network (models are built from configs)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("TRACKER_EXIT_TIMEOUT", "30")


@pytest.fixture
def tracked(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The tracker writes into the test's store; yields a Store to read it back."""
    from tracker.store import Store

    monkeypatch.setenv("TRACKER_URI", store_url)
    store = Store(store_url)
    yield store
    import tracker

    tracker.finish()
    store.close()


@pytest.fixture
def mlflow_server(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], str]]:
    """Start ``tracker ui``'s app on the test's store and point the mlflow client at it."""
    import mlflow

    from tests.support.servers import ServerThread
    from tracker.web.app import create_app

    servers: list[ServerThread] = []
    apps: list[Any] = []
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    for var in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(mlflow.tracking.fluent, "_active_experiment_id", None)
    # MLFlowLogger sets the client's tracking URI globally: the next test starts clean
    from mlflow.tracking._tracking_service import utils as tracking_utils

    monkeypatch.setattr(tracking_utils, "_tracking_uri", None)

    def start() -> str:
        app = create_app({"STORE_URI": store_url, "TESTING": True, "NO_AUTH": True})
        apps.append(app)
        servers.append(ServerThread(app))
        monkeypatch.setenv("MLFLOW_TRACKING_URI", servers[-1].url)
        mlflow.set_tracking_uri(servers[-1].url)
        return servers[-1].url

    yield start
    while mlflow.active_run() is not None:
        mlflow.end_run("KILLED")
    for server in servers:
        server.stop()
    for app in apps:
        app.extensions["tracker"].store.close()
