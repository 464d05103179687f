"""MLflow-compatible tracking REST subset under ``/api/2.0/mlflow/``, so that code using the
``mlflow`` client logs here unchanged with ``MLFLOW_TRACKING_URI=http://host:port`` (and
``MLFLOW_TRACKING_TOKEN`` when the dashboard has a token). Documented in ``web/API.md``
("MLflow compatibility"); the mapping itself is ``web/core/mlflow_compat.py`` (pure), the reads
and writes ``tracker.store.mlflow`` and ``tracker.store.run_reads``.

The security guard applies as everywhere (Host, token, Origin, JSON bodies). Errors on these
routes -- the guard's included -- use MLflow's shape ``{"error_code", "message"}`` instead of
the tracker's envelope, because the MLflow client parses that shape.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, cast

from flask import Blueprint, Response, current_app, request
from werkzeug.exceptions import HTTPException

from tracker.entities import ProjectInfo, RunInfo, RunMeta
from tracker.errors import Conflict, NotFound, TrackerError
from tracker.rules.mlflow_filter import parse_experiment_order_by, parse_filter, parse_order_by
from tracker.store import mlflow as mstore
from tracker.store import projects
from tracker.store import runs as store_runs
from tracker.store.run_reads import metric_summaries, runs_by_ids
from tracker.store.run_search import RunSearch, search_run_ids
from tracker.web.core import mlflow_compat as compat
from tracker.web.core.mlflow_compat import MlflowError
from tracker.web.core.mlflow_experiments import insert_default, store_order
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import json_body

bp = Blueprint("mlflow", __name__, url_prefix="/api/2.0/mlflow")

# MLflow's Default experiment: our project "default", listed as "Default" with id 0
DEFAULT_LISTED_AS = (compat.DEFAULT_PROJECT, compat.DEFAULT_EXPERIMENT_NAME, 0)

MAX_SEARCH_RESULTS = 50_000  # MLflow's own limit for experiments/search and runs/search
DEFAULT_SEARCH_RESULTS = 1_000
MAX_HISTORY_PAGE = 1_000_000


# ------------------------------------------------------------------------ errors


def _http_code(exc: HTTPException) -> str:
    name = (exc.name or "error").lower()
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


@bp.errorhandler(Exception)
def on_error(exc: Exception) -> Response:
    """Every error of a request routed here, in MLflow's shape (see the module docstring)."""
    if isinstance(exc, MlflowError):
        code, message, status = exc.mlflow_code, exc.message, exc.http_status
    elif isinstance(exc, TrackerError):
        code, message, status = exc.code, exc.message, exc.http_status
        if status >= 500:
            current_app.logger.error("%s: %s", code, message)
    elif isinstance(exc, HTTPException):
        code, message, status = _http_code(exc), exc.description or exc.name, exc.code or 500
    else:
        current_app.logger.exception("unhandled error in %s", type(exc).__name__)
        code, message, status = "internal_error", "internal server error (see the server log)", 500
    body, status = compat.error_body(code, message, status)
    response = cast(Response, current_app.json.response(body))
    response.status_code = status
    return response


# ---------------------------------------------------------------------- helpers


def _args() -> Mapping[str, Any]:
    """The request's fields: the query string of a GET, the JSON body otherwise."""
    return request.args if request.method == "GET" else json_body()


def _now_ms() -> int:
    return int(time.time() * 1000)


def project_of(experiment_id: Any, *, create: bool = False) -> ProjectInfo:
    """The project of an experiment id. MLflow's Default experiment always exists: until a
    run is created in it (``create=True``, the only write) its project is shown, not stored,
    so reads never create anything."""
    project_id = compat.experiment_id_of(experiment_id)
    store = state().store
    if project_id is not None:
        return projects.get_project(store, project_id)
    if create:
        return projects.ensure_project(store, compat.DEFAULT_PROJECT, time.time())
    return _default_project()


def _default_project() -> ProjectInfo:
    found = projects.find_project(state().store, compat.DEFAULT_PROJECT)
    return found or ProjectInfo(0, compat.DEFAULT_PROJECT, time.time())


def experiment_of(project: ProjectInfo) -> dict[str, Any]:
    return compat.experiment_json(
        project.id,
        project.name,
        project.created_at,
        deleted_at=project.deleted_at,
        tags=project.tags,
    )


def require_active_project(project: ProjectInfo) -> None:
    """MLflow refuses to change a deleted experiment (``_check_experiment_is_active``)."""
    if project.deleted_at is not None:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE",
            f"The experiment {experiment_of(project)['experiment_id']} must be in the 'active' "
            "state. Current state is deleted.",
            field="experiment_id",
        )


def writable_run(run_id: int) -> None:
    """The run a write goes to must exist and not be deleted (MLflow's rule); the write
    counts as activity of a run without heartbeats (``--mlflow-idle-timeout``)."""
    deleted_at, heartbeat_at = mstore.run_state(state().store, run_id)
    compat.require_active_run(run_id, deleted_at)
    idle = current_app.extensions.get("tracker_mlflow_idle")
    if idle is not None and heartbeat_at is None:
        idle.touch(run_id)


def experiment_id_of_run(run: RunInfo) -> str:
    project = projects.find_project(state().store, run.project)
    if project is None:  # a run always has one (projects are purged after their runs)
        raise NotFound(f"the project of run {run.id} does not exist", field="run_id")
    return experiment_of(project)["experiment_id"]


def _run(run: RunInfo) -> dict[str, Any]:
    summaries = metric_summaries(state().store, [run.id])[run.id]
    return compat.run_json(run, experiment_id_of_run(run), summaries)


def limit_of(raw: Any, default: int, most: int, name: str = "max_results") -> int:
    value = compat.int64(raw, name, default)
    if not 1 <= value <= most:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE", f"{name}={value} is out of range: use 1 to {most}"
        )
    return value


# ------------------------------------------------------------------ experiments


@bp.post("/experiments/create")
def create_experiment() -> Any:
    body = json_body()
    name = compat.project_name_of(body.get("name"), "name")
    raw_tags = body.get("tags") or []
    if not isinstance(raw_tags, list) or not all(isinstance(t, dict) for t in raw_tags):
        raise MlflowError(
            "INVALID_PARAMETER_VALUE", "tags must be a list of {key, value} objects", field="tags"
        )
    tags = [compat.experiment_tag_of(t) for t in raw_tags]  # all checked before anything
    try:
        project = projects.create_project(state().store, name, time.time())
    except Conflict as exc:  # MLflow answers 400 for this code, not 409
        found = projects.find_project(state().store, name)
        message = exc.message
        if found is not None and found.deleted_at is not None:
            message = (
                f"experiment {name!r} already exists in deleted state: restore it, or purge "
                "it (tracker gc) to create a new one"
            )
        raise MlflowError("RESOURCE_ALREADY_EXISTS", message, field=exc.field) from exc
    for key, value in tags:
        projects.set_project_tag(state().store, project.id, key, value)
    return {"experiment_id": experiment_of(project)["experiment_id"]}


@bp.get("/experiments/get")
def get_experiment() -> Any:
    return {"experiment": experiment_of(project_of(request.args.get("experiment_id")))}


@bp.get("/experiments/get-by-name")
def get_experiment_by_name() -> Any:
    name = compat.project_name_of(request.args.get("experiment_name"))
    store = state().store
    if name == compat.DEFAULT_PROJECT:
        return {"experiment": experiment_of(_default_project())}
    found = projects.find_project(store, name)
    if found is None:
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST", f"experiment {name!r} does not exist", field="name"
        )
    return {"experiment": experiment_of(found)}


@bp.route("/experiments/search", methods=["GET", "POST"])
def search_experiments() -> Any:
    args = _args()
    name, like = compat.experiment_filter(args.get("filter"))
    limit = limit_of(args.get("max_results"), DEFAULT_SEARCH_RESULTS, MAX_SEARCH_RESULTS)
    offset = compat.page_token(args.get("page_token"))
    deleted = compat.view_type(args.get("view_type"))
    # a GET repeats the parameter (?order_by=name&order_by=...), a POST sends a list
    given = request.args.getlist("order_by") if request.method == "GET" else args.get("order_by")
    order = parse_experiment_order_by(given)
    found = projects.search_projects(
        state().store, name=name, like=like, limit=limit + 1, offset=offset, deleted=deleted,
        order=store_order(order), listed_as=DEFAULT_LISTED_AS,
    )  # fmt: skip
    if len(found) <= limit and deleted is not True and compat.default_matches(name, like):
        # MLflow's Default experiment always exists: shown (as the oldest) until stored
        stored = projects.find_project(state().store, compat.DEFAULT_PROJECT)
        if stored is None:
            found = insert_default(
                found, _default_project(), order, shown_name=compat.DEFAULT_EXPERIMENT_NAME
            )
    out: dict[str, Any] = {"experiments": [experiment_of(p) for p in found[:limit]]}
    if len(found) > limit:
        out["next_page_token"] = str(offset + limit)
    return out


# ------------------------------------------------------------------------- runs


@bp.post("/runs/create")
def create_run() -> Any:
    body = json_body()
    project = project_of(body.get("experiment_id"), create=True)
    require_active_project(project)
    tags = compat.tags_of(body.get("tags"))
    name = body.get("run_name")
    if isinstance(name, str) and name:
        tags["mlflow.runName"] = name
    meta = compat.apply_meta(RunMeta(name="", config={}, tags=[]), tags=tags)
    meta = compat.with_user_id(meta, body.get("user_id"))
    start_ms = compat.optional_int64(body.get("start_time"), "start_time")
    now = time.time() if start_ms is None else start_ms / 1000.0
    run = mstore.create_run(state().store, project.name, meta, now)
    return {"run": compat.run_json(run, experiment_of(project)["experiment_id"])}


@bp.get("/runs/get")
def get_run() -> Any:
    return {"run": _run(store_runs.get_run(state().store, compat.run_id_of(request.args)))}


@bp.post("/runs/update")
def update_run() -> Any:
    body = json_body()
    run_id = compat.run_id_of(body)
    store = state().store
    writable_run(run_id)  # 404 (or deleted) before anything changes
    name = body.get("run_name")
    if isinstance(name, str) and name:
        tags = compat.tags_of([{"key": "mlflow.runName", "value": name}])
        mstore.update_run_meta(store, run_id, lambda m: compat.apply_meta(m, tags=tags))
    if body.get("status") not in (None, ""):
        status = compat.tracker_status(body["status"])
        end_ms = compat.optional_int64(body.get("end_time"), "end_time")
        if status in ("running", "queued"):
            store_runs.update_run(store, run_id, status=status, ended_at=None)
        else:
            end = time.time() if end_ms is None else end_ms / 1000.0
            store_runs.finish_run(store, run_id, status, now=end)
    run = store_runs.get_run(store, run_id)
    return {"run_info": compat.run_info_json(run, experiment_id_of_run(run))}


def _log(run_id: int, metrics: Any = (), params: Any = None, tags: Any = None) -> dict[str, Any]:
    """Parse everything first, then params and tags (the step that can refuse a changed
    param), then metric points: a refused request stores nothing."""
    records = compat.metric_records(list(metrics), now_ms=_now_ms())
    params_ = compat.params_of(params)
    tags_ = compat.tags_of(tags)
    writable_run(run_id)
    st = state()
    batch = st.ingest.check(run_id, {"records": records}) if records else None
    if params_ or tags_:
        mstore.update_run_meta(st.store, run_id, lambda m: compat.apply_meta(m, params_, tags_))
    if batch is not None:
        st.ingest.store_batch(batch, append=True)  # MLflow keeps every value of a step
    return {}


@bp.post("/runs/log-metric")
def log_metric() -> Any:
    body = json_body()
    return _log(compat.run_id_of(body), metrics=[body])


@bp.post("/runs/log-parameter")
def log_parameter() -> Any:
    body = json_body()
    return _log(compat.run_id_of(body), params=[body])


@bp.post("/runs/set-tag")
def set_tag() -> Any:
    body = json_body()
    return _log(compat.run_id_of(body), tags=[body])


@bp.post("/runs/log-batch")
def log_batch() -> Any:
    body = json_body()
    metrics = body.get("metrics") or []
    if not isinstance(metrics, list):
        raise MlflowError("INVALID_PARAMETER_VALUE", "metrics must be a list", field="metrics")
    return _log(compat.run_id_of(body), metrics, body.get("params"), body.get("tags"))


@bp.post("/runs/delete-tag")
def delete_tag() -> Any:
    body = json_body()
    run_id = compat.run_id_of(body)
    key = body.get("key")
    if not isinstance(key, str) or not key:
        raise MlflowError("INVALID_PARAMETER_VALUE", "key is required", field="key")
    writable_run(run_id)
    change = lambda m: compat.apply_meta(m, deleted_tags=[key])  # noqa: E731
    mstore.update_run_meta(state().store, run_id, change)
    return {}


@bp.post("/runs/search")
def search_runs() -> Any:
    """MLflow's filter and order_by on the dashboard's run search (``tracker.store.run_search``):
    default order start_time DESC, then newest id; page tokens are offsets."""
    body = json_body()
    where = parse_filter(body.get("filter"))
    order_by = parse_order_by(body.get("order_by"))
    experiment_ids = body.get("experiment_ids") or []
    if not isinstance(experiment_ids, list) or not experiment_ids:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE", "experiment_ids must be a non-empty list", field="ids"
        )
    projects = [project_of(e) for e in experiment_ids]
    limit = limit_of(body.get("max_results"), DEFAULT_SEARCH_RESULTS, MAX_SEARCH_RESULTS)
    offset = compat.page_token(body.get("page_token"))
    deleted = compat.view_type(body.get("run_view_type"), "run_view_type")
    store = state().store
    spec = RunSearch(
        projects=tuple(p.name for p in projects),
        where=where,
        order_by=order_by,
        sort="started",
        order="desc",
        limit=limit + 1,
        offset=offset,
        deleted=deleted,
    )
    ids = search_run_ids(store, spec, max_limit=MAX_SEARCH_RESULTS + 1)
    runs = runs_by_ids(store, ids[:limit])
    summaries = metric_summaries(store, [r.id for r in runs])
    experiment = {p.name: experiment_of(p)["experiment_id"] for p in projects}
    out: dict[str, Any] = {
        "runs": [compat.run_json(r, experiment[r.project], summaries[r.id]) for r in runs]
    }
    if len(ids) > limit:
        out["next_page_token"] = str(offset + limit)
    return out


# ---------------------------------------------------------------------- metrics


@bp.get("/metrics/get-history")
def get_metric_history() -> Any:
    args = request.args
    run_id = compat.run_id_of(args)
    key = args.get("metric_key")
    if not key:
        raise MlflowError("INVALID_PARAMETER_VALUE", "metric_key is required", field="metric_key")
    state().ingest.require_run(run_id)
    limit = limit_of(args.get("max_results"), MAX_HISTORY_PAGE, MAX_HISTORY_PAGE)
    after = compat.page_token(args.get("page_token"))
    points = mstore.metric_page(state().store, run_id, key, after_step=after, limit=limit)
    out: dict[str, Any] = {
        "metrics": [compat.metric_json(key, p.step, p.wall_time, p.value) for p in points]
    }
    if len(points) >= limit:  # (a page ends with a whole step: it may hold a few more)
        out["next_page_token"] = str(points[-1].step + 1)
    return out


# -------------------------------------------------------------------- the rest


@bp.route("/<path:rest>", methods=["GET", "POST", "PATCH", "DELETE"])
def not_implemented(rest: str) -> Any:
    raise MlflowError(
        "ENDPOINT_NOT_FOUND",
        f"{request.method} /api/2.0/mlflow/{rest[:200]} is not part of this server's MLflow "
        "subset (experiments, runs, params, tags, metrics, inputs, logged models, artifacts "
        "through /api/2.0/mlflow-artifacts; no model registry or traces)",
    )
