"""The MLflow lifecycle routes: delete and restore runs and experiments, rename experiments,
experiment tags (``runs/delete``, ``runs/restore``, ``experiments/delete``,
``experiments/restore``, ``experiments/update``, ``experiments/set-experiment-tag``,
``experiments/delete-experiment-tag``), with the semantics of MLflow's SQL store: deletes
are soft (``tracker.store.lifecycle``), deleting an experiment deletes its runs, restoring
it restores them, a deleted experiment cannot be renamed or tagged.

Same prefix and error shape as :mod:`tracker.web.views.mlflow` (its error handler is shared).
"""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint

from tracker.entities import ProjectInfo
from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.store import lifecycle, projects
from tracker.store.runs import get_run
from tracker.web.core import mlflow_compat as compat
from tracker.web.core.mlflow_compat import MlflowError
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import json_body
from tracker.web.views.mlflow import on_error, project_of, require_active_project

bp = Blueprint("mlflow_lifecycle", __name__, url_prefix="/api/2.0/mlflow")
bp.register_error_handler(Exception, on_error)


def _no_experiment(raw: Any) -> MlflowError:
    return MlflowError(
        "RESOURCE_DOES_NOT_EXIST", f"No Experiment with id={raw} exists", field="experiment_id"
    )


def _stored_project(raw: Any) -> ProjectInfo:
    """The project of ``experiment_id``, stored (the Default experiment is created here)."""
    if raw is None or raw == "":
        raise MlflowError(
            "INVALID_PARAMETER_VALUE", "experiment_id is required", field="experiment_id"
        )
    return project_of(raw, create=True)


def _run_id(body: dict[str, Any]) -> int:
    run_id = compat.run_id_of(body)
    try:
        get_run(state().store, run_id)
    except NotFound:
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST", f"Run with id={run_id} not found", field="run_id"
        ) from None
    return run_id


@bp.post("/runs/delete")
def delete_run() -> Any:
    lifecycle.delete_runs(state().store, [_run_id(json_body())])
    return {}


@bp.post("/runs/restore")
def restore_run() -> Any:
    lifecycle.restore_runs(state().store, [_run_id(json_body())])
    return {}


@bp.post("/experiments/delete")
def delete_experiment() -> Any:
    raw = json_body().get("experiment_id")
    project = _stored_project(raw)
    try:
        projects.delete_project(state().store, project.id, now=time.time())
    except (NotFound, Conflict):  # MLflow looks among active experiments only
        raise _no_experiment(raw) from None
    return {}


@bp.post("/experiments/restore")
def restore_experiment() -> Any:
    raw = json_body().get("experiment_id")
    project = _stored_project(raw)
    try:
        projects.restore_project(state().store, project.id)
    except (NotFound, Conflict):  # MLflow looks among deleted experiments only
        raise _no_experiment(raw) from None
    return {}


@bp.post("/experiments/update")
def update_experiment() -> Any:
    body = json_body()
    new_name = body.get("new_name")
    project = _stored_project(body.get("experiment_id"))
    if new_name is None or new_name == "":
        return {}  # MLflow's server: nothing to change
    name = compat.project_name_of(new_name, "new_name")
    if project.deleted_at is not None:
        raise MlflowError("INVALID_STATE", "Cannot rename a non-active experiment.")
    if compat.DEFAULT_PROJECT in (name, project.name) and name != project.name:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE",
            "the Default experiment (project 'default') cannot be renamed, and no experiment "
            "can take its name on this server",
            field="new_name",
        )
    try:
        projects.rename_project(state().store, project.id, name)
    except Conflict as exc:
        raise MlflowError("RESOURCE_ALREADY_EXISTS", exc.message, field="new_name") from exc
    return {}


@bp.post("/experiments/set-experiment-tag")
def set_experiment_tag() -> Any:
    body = json_body()
    project = _stored_project(body.get("experiment_id"))
    key, value = compat.experiment_tag_of(body)
    require_active_project(project)
    try:
        projects.set_project_tag(state().store, project.id, key, value)
    except InvalidInput as exc:
        raise MlflowError("INVALID_PARAMETER_VALUE", exc.message, field=exc.field) from exc
    return {}


@bp.post("/experiments/delete-experiment-tag")
def delete_experiment_tag() -> Any:
    body = json_body()
    project = _stored_project(body.get("experiment_id"))
    key = body.get("key")
    if not isinstance(key, str) or not key:
        raise MlflowError("INVALID_PARAMETER_VALUE", "key is required", field="key")
    require_active_project(project)
    projects.delete_project_tag(state().store, project.id, key)
    return {}
