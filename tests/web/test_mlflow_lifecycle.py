"""The MLflow lifecycle with the real ``mlflow`` client against a real server (a thread on a
free port) on a real SQLite file and a real PostgreSQL database: delete and restore runs and
experiments, rename, experiment tags, view types, MLflow's refusals for deleted things, and
runs created through MLflow marked stale when their client goes silent."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import mlflow
import pytest
from flask import Flask
from mlflow import MlflowClient
from mlflow.entities import ViewType
from mlflow.exceptions import MlflowException

from tests.support.web import TOKEN
from tests.web.test_mlflow_compat import mlflow_server, store_of
from tracker.store import Store
from tracker.store.metrics import metric_history
from tracker.store.projects import find_project, list_project_names
from tracker.store.runs import create_run, get_run, list_runs
from tracker.store.tokens import create_token

__all__ = ["mlflow_server"]  # the fixture, shared with test_mlflow_compat


def _code(exc: pytest.ExceptionInfo[MlflowException]) -> str:
    return str(exc.value.error_code)


def _run_ids(
    client: MlflowClient, experiment_id: str, view: int = ViewType.ACTIVE_ONLY
) -> set[str]:
    return {r.info.run_id for r in client.search_runs([experiment_id], run_view_type=view)}


def test_delete_and_restore_a_run(mlflow_server: Callable[..., Flask]) -> None:
    app = mlflow_server()
    store = store_of(app)
    client = MlflowClient()
    experiment_id = client.create_experiment("lifecycle")
    keep = client.create_run(experiment_id, run_name="keep").info.run_id
    gone = client.create_run(experiment_id, run_name="gone").info.run_id
    client.log_metric(gone, "loss", 0.5, step=1)

    client.delete_run(gone)
    assert client.get_run(gone).info.lifecycle_stage == "deleted"  # still readable by id
    assert client.get_run(keep).info.lifecycle_stage == "active"
    assert _run_ids(client, experiment_id) == {keep}
    assert _run_ids(client, experiment_id, ViewType.DELETED_ONLY) == {gone}
    assert _run_ids(client, experiment_id, ViewType.ALL) == {keep, gone}
    assert [r.id for r in list_runs(store, project="lifecycle")] == [int(keep)]
    api = app.test_client().get("/api/v1/runs").get_json()
    assert [r["id"] for r in api["runs"]] == [int(keep)]
    api = app.test_client().get("/api/v1/runs?deleted=1").get_json()
    assert [r["id"] for r in api["runs"]] == [int(gone)] and api["runs"][0]["deleted_at"]

    for write in (
        lambda: client.log_metric(gone, "loss", 0.25, step=2),
        lambda: client.log_param(gone, "lr", "0.1"),
        lambda: client.set_tag(gone, "team", "vision"),
        lambda: client.set_terminated(gone, "FINISHED"),
    ):
        with pytest.raises(MlflowException, match="must be in the 'active' state") as exc:
            write()
        assert _code(exc) == "INVALID_PARAMETER_VALUE"
    run = get_run(store, int(gone))
    assert run.status == "running" and "lr" not in run.config
    assert [p.value for p in metric_history(store, int(gone), "loss")] == [0.5]

    client.delete_run(gone)  # deleting a deleted run is no error (as in MLflow)
    client.restore_run(gone)
    assert client.get_run(gone).info.lifecycle_stage == "active"
    client.log_metric(gone, "loss", 0.25, step=2)
    assert _run_ids(client, experiment_id) == {keep, gone}
    with pytest.raises(MlflowException) as exc:
        client.delete_run("987654")
    assert _code(exc) == "RESOURCE_DOES_NOT_EXIST"


def test_fluent_delete_of_the_active_run(mlflow_server: Callable[..., Flask]) -> None:
    mlflow_server()
    mlflow.set_experiment("fluent")
    with mlflow.start_run() as run:
        mlflow.log_metric("loss", 1.0)
    mlflow.delete_run(run.info.run_id)
    experiment = mlflow.get_experiment_by_name("fluent")
    assert experiment is not None
    found = mlflow.search_runs([experiment.experiment_id], output_format="list")
    assert found == []
    found = mlflow.search_runs(
        [experiment.experiment_id], run_view_type=ViewType.DELETED_ONLY, output_format="list"
    )
    assert [r.info.run_id for r in found] == [run.info.run_id]


def test_experiment_lifecycle(mlflow_server: Callable[..., Flask]) -> None:
    app = mlflow_server()
    store = store_of(app)
    client = MlflowClient()
    experiment_id = client.create_experiment("exp-a")
    other_id = client.create_experiment("exp-other")
    first = client.create_run(experiment_id).info.run_id
    second = client.create_run(experiment_id).info.run_id
    elsewhere = client.create_run(other_id).info.run_id
    client.delete_run(second)

    client.set_experiment_tag(experiment_id, "team", "vision")
    client.set_experiment_tag(experiment_id, "note", "first try")
    client.set_experiment_tag(experiment_id, "note", "second try")
    assert client.get_experiment(experiment_id).tags == {"team": "vision", "note": "second try"}
    client.delete_experiment_tag(experiment_id, "team")
    assert client.get_experiment(experiment_id).tags == {"note": "second try"}

    client.rename_experiment(experiment_id, "exp-b")
    assert client.get_experiment(experiment_id).name == "exp-b"
    assert client.get_experiment_by_name("exp-a") is None
    assert get_run(store, int(first)).project == "exp-b"
    with pytest.raises(MlflowException) as exc:
        client.rename_experiment(experiment_id, "exp-other")
    assert _code(exc) == "RESOURCE_ALREADY_EXISTS"

    client.delete_experiment(experiment_id)
    deleted = client.get_experiment(experiment_id)
    assert deleted.lifecycle_stage == "deleted"
    by_name = client.get_experiment_by_name("exp-b")  # found, as MLflow's SQL store does
    assert by_name is not None and by_name.lifecycle_stage == "deleted"
    # Default is always listed, as on an MLflow server
    assert {e.name for e in client.search_experiments()} == {"Default", "exp-other"}
    names = {e.name for e in client.search_experiments(view_type=ViewType.DELETED_ONLY)}
    assert names == {"exp-b"}
    names = {e.name for e in client.search_experiments(view_type=ViewType.ALL)}
    assert names == {"Default", "exp-b", "exp-other"}
    assert client.get_run(first).info.lifecycle_stage == "deleted"  # its runs went with it
    assert client.get_run(elsewhere).info.lifecycle_stage == "active"
    assert _run_ids(client, experiment_id, ViewType.ALL) == {first, second}
    assert _run_ids(client, experiment_id) == set()
    assert "exp-b" not in list_project_names(store)

    with pytest.raises(MlflowException, match="Cannot set a deleted experiment"):
        mlflow.set_experiment("exp-b")  # the client's own check, on our lifecycle_stage
    with pytest.raises(MlflowException, match="must be in the 'active' state") as exc:
        client.create_run(experiment_id)
    assert _code(exc) == "INVALID_PARAMETER_VALUE"
    with pytest.raises(MlflowException, match="must be in the 'active' state"):
        client.set_experiment_tag(experiment_id, "team", "x")
    with pytest.raises(MlflowException, match="Cannot rename a non-active experiment") as exc:
        client.rename_experiment(experiment_id, "exp-c")
    assert _code(exc) == "INVALID_STATE"
    with pytest.raises(MlflowException, match="already exists in deleted state") as exc:
        client.create_experiment("exp-b")
    assert _code(exc) == "RESOURCE_ALREADY_EXISTS"
    with pytest.raises(MlflowException, match=f"No Experiment with id={experiment_id}") as exc:
        client.delete_experiment(experiment_id)
    assert _code(exc) == "RESOURCE_DOES_NOT_EXIST"

    client.restore_experiment(experiment_id)
    assert client.get_experiment(experiment_id).lifecycle_stage == "active"
    # MLflow restores every run of a restored experiment (the one deleted before it too)
    assert _run_ids(client, experiment_id) == {first, second}
    assert "exp-b" in list_project_names(store)
    with pytest.raises(MlflowException) as exc:
        client.restore_experiment(experiment_id)
    assert _code(exc) == "RESOURCE_DOES_NOT_EXIST"
    project = find_project(store, "exp-b")
    assert project is not None and project.deleted_at is None


def test_the_default_experiment_can_be_deleted_and_restored(
    mlflow_server: Callable[..., Flask],
) -> None:
    mlflow_server()
    client = MlflowClient()
    run = client.create_run("0").info.run_id
    client.delete_experiment("0")
    assert client.get_experiment("0").lifecycle_stage == "deleted"
    assert client.get_run(run).info.lifecycle_stage == "deleted"
    with pytest.raises(MlflowException, match="must be in the 'active' state"):
        client.create_run("0")
    client.restore_experiment("0")
    assert client.get_experiment_by_name("Default").lifecycle_stage == "active"
    with pytest.raises(MlflowException, match="cannot be renamed"):
        client.rename_experiment("0", "renamed")


def test_deleting_needs_an_admin_token_logging_does_not(
    mlflow_server: Callable[..., Flask], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = mlflow_server(TOKEN=TOKEN)
    store: Store = store_of(app)
    log_secret = create_token(store, "log", "training-host")[1]
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", log_secret)
    client = MlflowClient()
    experiment_id = client.create_experiment("scoped")
    run_id = client.create_run(experiment_id).info.run_id
    client.set_experiment_tag(experiment_id, "team", "vision")  # log scope is enough
    client.rename_experiment(experiment_id, "scoped-2")
    with pytest.raises(MlflowException, match="'admin' scope") as exc:
        client.delete_run(run_id)
    assert _code(exc) == "PERMISSION_DENIED"
    with pytest.raises(MlflowException, match="'admin' scope"):
        client.delete_experiment(experiment_id)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)  # the configured token is admin
    client.delete_run(run_id)
    assert get_run(store, int(run_id)).deleted_at is not None


def test_silent_mlflow_runs_are_marked_stale_and_run_again_on_a_write(
    mlflow_server: Callable[..., Flask],
) -> None:
    # No sweeps by the thread during the test (1 h apart): the test calls the sweep itself.
    app = mlflow_server(MLFLOW_IDLE_S=600.0, CRASH_SWEEP_S=3600.0)
    store = store_of(app)
    idle: Any = app.extensions["tracker_mlflow_idle"]
    client = MlflowClient()
    experiment_id = client.create_experiment("idle")
    quiet = client.create_run(experiment_id).info.run_id
    busy = client.create_run(experiment_id).info.run_id
    native = create_run(store, "idle", "native")  # our client's run: it has heartbeats
    client.log_metric(quiet, "loss", 1.0, step=0)

    assert idle.sweep_once(now=time.time() + 60) == []  # one minute: nothing is idle
    later = time.time() + 3600
    assert idle.sweep_once(now=later) == [int(quiet), int(busy)]
    run = get_run(store, int(quiet))
    assert (run.status, run.failure_class) == ("crashed", "idle")
    assert "no writes through the MLflow API for 10 min" in (run.failure_hint or "")
    assert run.ended_at is not None and run.ended_at <= time.time()  # its last write
    assert client.get_run(quiet).info.status == "FAILED"
    assert get_run(store, native.id).status == "running"  # heartbeats decide for it

    client.log_metric(quiet, "loss", 0.5, step=1)  # the client was only quiet
    run = get_run(store, int(quiet))
    assert (run.status, run.failure_class, run.ended_at) == ("running", None, None)
    client.set_terminated(busy, "FINISHED")  # an ending status after the mark wins
    assert get_run(store, int(busy)).status == "finished"
    assert idle.sweep_once(now=time.time() + 60) == []


def test_the_idle_timeout_is_off_without_the_setting(mlflow_server: Callable[..., Flask]) -> None:
    app = mlflow_server()
    assert "tracker_mlflow_idle" not in app.extensions
    client = MlflowClient()
    run_id = client.create_run(client.create_experiment("no-idle")).info.run_id
    client.log_metric(run_id, "loss", 1.0)
    assert get_run(store_of(app), int(run_id)).status == "running"


@pytest.mark.parametrize(
    ("raw", "deleted"),
    [(None, False), ("", False), ("ACTIVE_ONLY", False), ("DELETED_ONLY", True), ("ALL", None),
     ("all", None), (1, False), (2, True), (3, None), ("2", True)],
)  # fmt: skip
def test_view_types(raw: Any, deleted: bool | None) -> None:
    from tracker.web.core import mlflow_compat as compat

    assert compat.view_type(raw) is deleted


@pytest.mark.parametrize("raw", ["ACTIVE", 0, 4, True, "x" * 100])
def test_view_type_refuses_what_is_no_view_type(raw: Any) -> None:
    from tracker.web.core.mlflow_compat import MlflowError, view_type

    with pytest.raises(MlflowError, match="is not a ViewType") as info:
        view_type(raw, "run_view_type")
    assert info.value.mlflow_code == "INVALID_PARAMETER_VALUE"
