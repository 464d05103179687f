"""MLflow logged models (``/api/2.0/mlflow/logged-models...``) and run inputs
(``runs/log-inputs``, ``runs/outputs``, ``runs/log-model``), as the real client uses them for
``mlflow.log_input`` and ``mlflow.<flavor>.log_model`` / ``load_model``. The mapping is pure
(``web/core/mlflow_models.py``); the model files go through the artifact proxy
(``web/views/mlflow_artifacts.py``). Errors use MLflow's shape.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from flask import Blueprint

from tracker.entities import LoggedModelInfo, RunMeta
from tracker.store import artifacts as astore
from tracker.store import logged_models, projects
from tracker.store import mlflow as mstore
from tracker.store.runs import finish_run, get_run
from tracker.web.core import mlflow_artifacts as artcore
from tracker.web.core import mlflow_compat as compat
from tracker.web.core import mlflow_models as core
from tracker.web.core.mlflow_compat import MlflowError
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import json_body
from tracker.web.views.mlflow import (
    DEFAULT_SEARCH_RESULTS,
    MAX_SEARCH_RESULTS,
    experiment_of,
    limit_of,
    on_error,
    project_of,
)

bp = Blueprint("mlflow_models", __name__, url_prefix="/api/2.0/mlflow")
bp.register_error_handler(Exception, on_error)


def _json(model: LoggedModelInfo) -> dict[str, Any]:
    project = projects.get_project(state().store, model.project_id)
    return {"model": core.logged_model_json(model, experiment_of(project)["experiment_id"])}


def _model(model_id: str) -> LoggedModelInfo:
    return logged_models.get(state().store, artcore.check_model_id(model_id))


# ---------------------------------------------------------------- logged models


@bp.post("/logged-models")
def create_model() -> Any:
    body = json_body()
    store = state().store
    project = project_of(body.get("experiment_id"), create=True)
    name = core.model_name_of(body.get("name"), "model")
    params, tags = core.model_params(body.get("params")), core.model_tags(body.get("tags"))
    model_type = body.get("model_type") or None
    if model_type is not None and not isinstance(model_type, str):
        raise MlflowError("INVALID_PARAMETER_VALUE", "model_type must be a string", field="type")
    now = time.time()
    if body.get("source_run_id"):
        run = get_run(store, compat.run_id_of({"run_id": body["source_run_id"]}))
        if run.project != project.name:
            raise MlflowError(
                "INVALID_PARAMETER_VALUE",
                f"run {run.id} belongs to another experiment than {body.get('experiment_id')}",
                field="source_run_id",
            )
    else:  # a model without a run gets one: its files are that run's artifacts
        meta = RunMeta(name=name[: compat.MAX_RUN_NAME_LENGTH], config={}, tags=[])
        run = mstore.create_run(store, project.name, meta, now)
        finish_run(store, run.id, "finished", now=now)
    model = LoggedModelInfo(
        id=artcore.new_model_id(),
        project_id=project.id,
        run_id=run.id,
        name=name,
        model_type=model_type,
        status="PENDING",
        status_message=None,
        tags=tags,
        params=params,
        created_at=now,
        updated_at=now,
    )
    return _json(logged_models.create(store, model))


@bp.get("/logged-models/<model_id>")
def get_model(model_id: str) -> Any:
    return _json(_model(model_id))


@bp.patch("/logged-models/<model_id>")
def finalize_model(model_id: str) -> Any:
    status = core.model_status(json_body().get("status"))
    change = lambda m: dataclasses.replace(m, status=status, updated_at=time.time())  # noqa: E731
    return _json(logged_models.update(state().store, _model(model_id).id, change))


@bp.delete("/logged-models/<model_id>")
def delete_model(model_id: str) -> Any:
    """The model and its files (artifacts of its run under ``mlflow-models/<id>/``)."""
    store = state().store
    model = logged_models.delete(store, _model(model_id).id)
    prefix = f"{artcore.MODELS_PREFIX}/{model.id}/"
    for info in astore.list_artifacts(store, model.run_id, prefix=prefix):
        if info.path.startswith(prefix):
            astore.delete_artifact(store, model.run_id, info.path)
    return {}


@bp.patch("/logged-models/<model_id>/tags")
def set_model_tags(model_id: str) -> Any:
    tags = core.model_tags(json_body().get("tags"))
    now = time.time()
    change = lambda m: dataclasses.replace(m, tags={**m.tags, **tags}, updated_at=now)  # noqa: E731
    logged_models.update(state().store, _model(model_id).id, change)
    return {}


@bp.delete("/logged-models/<model_id>/tags/<path:key>")
def delete_tag(model_id: str, key: str) -> Any:
    def change(m: LoggedModelInfo) -> LoggedModelInfo:
        if key not in m.tags:
            raise MlflowError(
                "RESOURCE_DOES_NOT_EXIST", f"the model has no tag {key!r}", field="key"
            )
        tags = {k: v for k, v in m.tags.items() if k != key}
        return dataclasses.replace(m, tags=tags, updated_at=time.time())

    logged_models.update(state().store, _model(model_id).id, change)
    return {}


@bp.post("/logged-models/<model_id>/params")
def log_model_params(model_id: str) -> Any:
    params = core.model_params(json_body().get("params"))

    def change(m: LoggedModelInfo) -> LoggedModelInfo:
        for key, value in params.items():
            if key in m.params and m.params[key] != value:
                raise MlflowError(
                    "INVALID_PARAMETER_VALUE",
                    f"param {key!r} already has the value {m.params[key]!r:.100}",
                    field=key,
                )
        return dataclasses.replace(m, params={**m.params, **params}, updated_at=time.time())

    logged_models.update(state().store, _model(model_id).id, change)
    return {}


@bp.post("/logged-models/search")
def search_models() -> Any:
    body = json_body()
    if body.get("order_by"):
        raise MlflowError(
            "INVALID_PARAMETER_VALUE",
            "order_by is not supported by this server's logged-models/search (newest first)",
            field="order_by",
        )
    ids = body.get("experiment_ids") or []
    if not isinstance(ids, list) or not ids:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE", "experiment_ids must be a non-empty list", field="ids"
        )
    where = core.model_filter(body.get("filter"))
    run_id = None
    if "source_run_id" in where:
        run_id = compat.run_id_of({"run_id": where["source_run_id"]})
    limit = limit_of(body.get("max_results"), DEFAULT_SEARCH_RESULTS, MAX_SEARCH_RESULTS)
    offset = compat.page_token(body.get("page_token"))
    projects = [project_of(e) for e in ids]
    found = logged_models.search(
        state().store,
        [p.id for p in projects],
        run_id=run_id,
        name=where.get("name"),
        limit=limit + 1,
        offset=offset,
    )
    found = [
        m
        for m in found
        if m.model_type == where.get("model_type", m.model_type)
        and m.status == where.get("status", m.status)
    ]
    experiment = {p.id: experiment_of(p)["experiment_id"] for p in projects}
    out: dict[str, Any] = {
        "models": [core.logged_model_json(m, experiment[m.project_id]) for m in found[:limit]]
    }
    if len(found) > limit:
        out["next_page_token"] = str(offset + limit)
    return out


# ------------------------------------------------------------------- run inputs


@bp.post("/runs/log-inputs")
def log_inputs() -> Any:
    body = json_body()
    run_id = compat.run_id_of(body)
    datasets = core.datasets_of(body.get("datasets"))
    models = body.get("models") or []
    for item in models if isinstance(models, list) else []:
        _model(str(item.get("model_id") if isinstance(item, dict) else ""))
    if datasets:

        def change(meta: RunMeta) -> RunMeta:
            config = dict(meta.config)
            config[compat.INPUTS_KEY] = core.merge_inputs(config.get(compat.INPUTS_KEY), datasets)
            return dataclasses.replace(meta, config=config)

        mstore.update_run_meta(state().store, run_id, change)
    else:
        get_run(state().store, run_id)
    return {}


@bp.post("/runs/outputs")
def log_outputs() -> Any:
    """The run's output models: each must exist (they are linked by their source run)."""
    body = json_body()
    get_run(state().store, compat.run_id_of(body))
    models = body.get("models") or []
    if not isinstance(models, list):
        raise MlflowError("INVALID_PARAMETER_VALUE", "models must be a list", field="models")
    for item in models:
        _model(str(item.get("model_id") if isinstance(item, dict) else ""))
    return {}


@bp.post("/runs/log-model")
def log_model() -> Any:
    """MLflow 2's model record (the ``mlflow.log-model.history`` tag): accepted, not kept
    (logged models above carry the same facts)."""
    body = json_body()
    get_run(state().store, compat.run_id_of(body))
    return {}
