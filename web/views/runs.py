"""JSON API ``/api/v1``: runs, metrics, checkpoints, events, logs, compare, files, and the
ingest endpoints of the client's HTTP sink. Documented in ``web/API.md``.

Each view parses its input (``tracker.web.plumbing.params``), makes one call below it and
serializes the result; errors leave through the one envelope (``tracker.web.plumbing.errors``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flask import Blueprint, current_app, request

from tracker.entities import (
    CheckpointInfo,
    JobAttemptInfo,
    JobInfo,
    LogChunk,
    RunInfo,
    ScheduleInfo,
)
from tracker.errors import InvalidInput, NotFound
from tracker.rules.config_diff import MISSING, diff_configs
from tracker.rules.downsample import to_payload
from tracker.rules.group_series import TableGroup
from tracker.rules.secrets import env_keys_only
from tracker.store import checkpoints as store_checkpoints
from tracker.store import (
    diagnoses,
    lifecycle,
    profiles,
    run_groups,
    run_reads,
    run_search,
    schema_head,
)
from tracker.store import events as store_events
from tracker.store import jobs as store_jobs
from tracker.store import logs as store_logs
from tracker.store import runs as store_runs
from tracker.store.clone import clone
from tracker.store.metrics import metric_history
from tracker.store.projects import list_project_names
from tracker.store.run_search import MAX_LIMIT, SORT_ATTRIBUTES, RunHit, RunSearch
from tracker.store.series import DEFAULT_BUCKETS, MAX_BUCKETS, SeriesRead, read_many
from tracker.web.core import ingest as parse
from tracker.web.core.fields import clone_edits, config_types
from tracker.web.core.log_ingest import parse_log_batch
from tracker.web.core.times import attempts_allowed, iso_in_zone, running_time
from tracker.web.plumbing.context import state
from tracker.web.plumbing.files import checkpoint_path, download, file_inside_roots, resolve_inside
from tracker.web.plumbing.params import (
    bool_arg,
    int_arg,
    int_list_arg,
    json_body,
    list_arg,
    optional_int_arg,
)

bp = Blueprint("api", __name__, url_prefix="/api/v1")

MAX_COMPARE = 200


# ------------------------------------------------------------------ serializers


def run_json(run: RunInfo) -> dict[str, Any]:
    out = dataclasses.asdict(run)
    out["duration"] = run.duration
    return out


def row_json(row: RunHit) -> dict[str, Any]:
    out = dataclasses.asdict(row)
    out["duration"] = row.duration
    return out


def table_group_json(g: TableGroup) -> dict[str, Any]:
    """A group row of the runs table: ``label``, ``value``, ``size``, ``run_ids``,
    ``statuses`` (status -> count) and ``metrics`` (name -> mean, min, max, n)."""
    out = dataclasses.asdict(g)
    out["size"] = g.size
    return out


def checkpoint_json(c: CheckpointInfo) -> dict[str, Any]:
    out = dataclasses.asdict(c)
    out["download_url"] = f"/api/v1/checkpoints/{c.id}/download"
    return out


_JOB_HIDDEN = ("lease_owner",)


def job_json(job: JobInfo) -> dict[str, Any]:
    """A job for the API: ``env`` values are never shown (they may hold secrets), only
    ``env_keys`` (``tracker.rules.secrets``); ``worker`` holds the lease; ``position`` is the
    1-based place in the claim order while queued; ``config_types`` tells 0.0 from 0
    (``tracker.web.core.fields.config_types``); ``attempts_allowed`` is the total in
    "attempt 2/2" (``tracker.web.core.times.attempts_allowed``)."""
    out = env_keys_only(dataclasses.asdict(job))
    for hidden in _JOB_HIDDEN:
        del out[hidden]
    out["worker"] = job.lease_owner
    out["attempts_allowed"] = attempts_allowed(job)
    out["config_types"] = config_types(job.config)
    return out


def schedule_json(schedule: ScheduleInfo) -> dict[str, Any]:
    """A schedule for the API: its stored job spec with ``env_keys``, never env values; its
    times as seconds (``*_at``) and as ISO 8601 in its own time zone, with the offset
    (``created``, ``last_fire``, ``next_fire``: ``2026-12-04T06:00:00+01:00``)."""
    out = dataclasses.asdict(schedule)
    out["spec"] = env_keys_only(schedule.spec)
    for name in ("created", "last_fire", "next_fire"):
        out[name] = iso_in_zone(out[f"{name}_at"], schedule.timezone)
    return out


def attempt_json(attempt: JobAttemptInfo) -> dict[str, Any]:
    """One attempt of a job (without the job id the caller knows)."""
    out = dataclasses.asdict(attempt)
    del out["job_id"]
    out["worker"] = out.pop("worker_id")
    return out


def series_json(read: SeriesRead) -> dict[str, Any]:
    """``to_payload`` (tracker.rules.downsample) plus ``key``, ``source``, ``wall_time`` (s)."""
    out = to_payload(read.series)
    out["key"] = read.key
    out["source"] = read.source
    out["wall_time"] = [None if w is None else w / 1000.0 for w in read.wall_ms]
    return out


def _asdicts(items: list[Any]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(i) for i in items]


# ---------------------------------------------------------------------- reads


@bp.get("/health")
def health() -> Any:
    return {"ok": True, "schema": schema_head(), "auth": not current_app.config["NO_AUTH"]}


@bp.get("/projects")
def projects() -> Any:
    return {"projects": list_project_names(state().store)}


@bp.get("/runs")
def runs_search() -> Any:
    spec = search_spec()
    group = request.args.get("group") or None
    if group is not None:  # the table grouped (tracker.store.run_groups): no pages
        found = run_groups.search_groups(state().store, spec, group)
        return {
            "runs": [row_json(r) for r in found.runs],
            "total": found.total,
            "limit": run_groups.MAX_GROUPED_RUNS,
            "offset": 0,
            "sort": spec.sort,
            "order": spec.order,
            "query": found.query,
            "group": group,
            "groups": [table_group_json(g) for g in found.groups],
            "truncated": found.truncated,
        }
    page = run_search.search_runs(state().store, spec)
    return {
        "runs": [row_json(r) for r in page.runs],
        "total": page.total,
        "limit": spec.limit,
        "offset": spec.offset,
        "sort": spec.sort,
        "order": spec.order,
        "query": page.query,
    }


def search_spec() -> RunSearch:
    """The runs search the request's arguments ask for (``q``, ``project``, ``tag``,
    ``sort``, ``order``, ``limit``, ``offset``, ``config``, ``metrics``, ``deleted``): the
    runs table's JSON (``/api/v1/runs``) and its CSV (``/api/v1/runs.csv``) read the same.

    Raises:
        InvalidInput (400): a limit or offset out of range (the query itself is checked
            by the search).
    """
    return RunSearch(
        query=request.args.get("q", ""),
        project=request.args.get("project") or None,
        tags=tuple(list_arg("tag", split=False)),
        sort=request.args.get("sort", "created"),
        order=request.args.get("order", "desc"),
        limit=int_arg("limit", 50, 1, MAX_LIMIT),
        offset=int_arg("offset", 0, 0, 10**9),
        config_columns=tuple(list_arg("config")),
        metric_columns=tuple(list_arg("metrics")),
        deleted=request.args.get("deleted") in ("1", "true"),
    )


@bp.get("/runs/columns")
def run_columns() -> Any:
    config, metrics = run_search.run_columns(state().store, request.args.get("project") or None)
    return {"attributes": list(SORT_ATTRIBUTES), "config": config, "metrics": metrics}


@bp.get("/runs/<int:run_id>")
def run_detail(run_id: int) -> Any:
    """A run with its job and ``running_time`` (``tracker.web.core.times``). 404 for an
    unknown run, 503 when the store cannot be reached."""
    store = state().store
    run, job = run_reads.run_detail(store, run_id)
    out = run_json(run)
    out["config_types"] = config_types(run.config)
    out["job"] = None if job is None else job_json(job)
    tried = [] if job is None else store_jobs.attempts(store, job.id)
    if out["job"] is not None:  # Slurm's job id of its latest attempt run by a cluster
        out["job"]["external_id"] = next(
            (a.external_id for a in reversed(tried) if a.external_id), None
        )
    out["running_time"] = dataclasses.asdict(running_time(run, tried))
    return out


@bp.get("/runs/<int:run_id>/metrics")
def run_metrics(run_id: int) -> Any:
    items = run_reads.metric_summaries(state().store, [run_id])[run_id]
    return {"run_id": run_id, "metrics": _asdicts(items)}


def _series_window() -> dict[str, Any]:
    return {
        "lo": optional_int_arg("lo"),
        "hi": optional_int_arg("hi"),
        "max_buckets": int_arg("max_buckets", DEFAULT_BUCKETS, 1, MAX_BUCKETS),
    }


@bp.get("/runs/<int:run_id>/series")
def run_series(run_id: int) -> Any:
    keys = list_arg("key")
    if not keys:
        raise InvalidInput("key is required (repeat it or separate keys with commas)", field="key")
    store = state().store
    run_reads.runs_by_ids(store, [run_id])  # 404 for an unknown run
    found = read_many(store, [(run_id, k) for k in keys], **_series_window())
    return {"run_id": run_id, "series": [series_json(s) for s in found]}


MAX_POINTS = 100_000


@bp.get("/runs/<int:run_id>/points")
def run_points(run_id: int) -> Any:
    """Raw points of one metric, by step, a page at a time (what ``tracker runs export``
    reads over HTTP): ``[[step, wall_time, value], ...]``, ``next_after_step`` to page on."""
    key = request.args.get("key")
    if not key:
        raise InvalidInput("key is required: the metric to read", field="key")
    after = int_arg("after_step", -1, -1, 2**63 - 2)
    limit = int_arg("limit", 10_000, 1, MAX_POINTS)
    store = state().store
    run_reads.runs_by_ids(store, [run_id])  # 404 for an unknown run
    points = metric_history(store, run_id, key, lo=after + 1, limit=limit)
    return {
        "run_id": run_id,
        "key": key,
        "points": [[p.step, p.wall_time, p.value] for p in points],
        "next_after_step": points[-1].step if points else after,
    }


@bp.get("/series")
def multi_run_series() -> Any:
    key = request.args.get("key")
    if not key:
        raise InvalidInput("key is required", field="key")
    run_ids = int_list_arg("runs", limit=MAX_COMPARE)
    if not run_ids:
        raise InvalidInput("runs is required: comma-separated run ids", field="runs")
    found = read_many(state().store, [(r, key) for r in run_ids], **_series_window())
    return {
        "key": key,
        "series": {str(r): series_json(s) for r, s in zip(run_ids, found, strict=True)},
    }


@bp.get("/runs/<int:run_id>/checkpoints")
def run_checkpoints(run_id: int) -> Any:
    items = store_checkpoints.list_checkpoints(state().store, run_id)
    return {"run_id": run_id, "checkpoints": [checkpoint_json(c) for c in items]}


@bp.get("/checkpoints/<int:checkpoint_id>/download")
def checkpoint_download(checkpoint_id: int) -> Any:
    st = state()
    info = run_reads.get_checkpoint(st.store, checkpoint_id)
    return download(file_inside_roots(st.checkpoint_roots, info.path))


@bp.get("/runs/<int:run_id>/events")
def run_events(run_id: int) -> Any:
    events = run_reads.events_after(
        state().store, run_id, int_arg("after", 0, 0, 2**62), int_arg("limit", 500, 1, 5000)
    )
    next_after = events[-1].id if events else int_arg("after", 0, 0, 2**62)
    return {"run_id": run_id, "events": _asdicts(events), "next_after": next_after}


def _log_options() -> dict[str, Any]:
    return {
        "after": int_arg("after", 0, 0, 2**62),
        "limit": int_arg("limit", 500, 1, 5000),
        "stream": request.args.get("stream") or None,
        "tail": bool_arg("tail"),
    }


def logs_json(job_id: int | None, chunks: list[LogChunk], after: int) -> dict[str, Any]:
    """Log chunks (without the job id, given once) and the cursor for the next read."""
    return {
        "job_id": job_id,
        "chunks": [{k: v for k, v in c.items() if k != "job_id"} for c in _asdicts(chunks)],
        "next_after": chunks[-1].id if chunks else after,
    }


@bp.get("/runs/<int:run_id>/logs")
def run_logs(run_id: int) -> Any:
    options = _log_options()
    job_id, chunks = store_logs.run_logs(state().store, run_id, **options)
    return logs_json(job_id, chunks, options["after"])


@bp.get("/compare")
def compare() -> Any:
    run_ids = int_list_arg("runs", limit=MAX_COMPARE)
    if not run_ids:
        raise InvalidInput("runs is required: comma-separated run ids", field="runs")
    runs = run_reads.runs_by_ids(state().store, run_ids)
    rows = diff_configs({str(r.id): r.config for r in runs}, only_differing=not bool_arg("all"))
    return {
        "runs": [run_json(r) for r in runs],
        "rows": [
            {
                "key": row.key,
                "differs": row.differs,
                "values": [None if v is MISSING else v for v in row.values.values()],
                "missing": [v is MISSING for v in row.values.values()],
            }
            for row in rows
        ],
    }


@bp.get("/files/<root>/<path:relpath>")
def files(root: str, relpath: str) -> Any:
    roots = state().file_roots.get(root)
    if roots is None:
        raise NotFound(f"no file root named {root!r}", field="root")
    return download(resolve_inside(roots, relpath))


# --------------------------------------------------------------------- ingest


@bp.post("/runs")
def create_run() -> Any:
    run = store_runs.create_run(state().store, **parse.create_run_args(json_body()))
    return run_json(run), 201


def _fence() -> Any:
    """The writes' attempt fence from a worker's job (409 attempt_superseded once stale)."""
    return parse.attempt_fence(request.headers.get("X-Tracker-Attempt"))


@bp.post("/runs/<int:run_id>/delete")
def delete_run(run_id: int) -> Any:
    """Soft delete (hidden everywhere until restored; ``tracker gc`` purges it later)."""
    json_body()  # a state change: JSON body required (see plumbing.security)
    lifecycle.delete_runs(state().store, [run_id])
    return run_json(store_runs.get_run(state().store, run_id))


@bp.post("/runs/<int:run_id>/restore")
def restore_run(run_id: int) -> Any:
    json_body()
    lifecycle.restore_runs(state().store, [run_id])
    return run_json(store_runs.get_run(state().store, run_id))


@bp.post("/runs/<int:run_id>/start")
def start_run(run_id: int) -> Any:
    args = parse.start_run_args(json_body())
    return run_json(store_runs.start_run(state().store, run_id, fence=_fence(), **args))


@bp.post("/runs/<int:run_id>/finish")
def finish_run(run_id: int) -> Any:
    args = parse.finish_run_args(json_body())
    store_runs.finish_run(state().store, run_id, args.pop("status"), fence=_fence(), **args)
    diagnoses.diagnose_run(state().store, run_id, final=True)  # the doctor's final pass
    return {"run_id": run_id, "ok": True}


@bp.get("/runs/<int:run_id>/diagnoses")
def run_diagnoses(run_id: int) -> Any:
    found = diagnoses.list_diagnoses(state().store, run_id)
    return {"run_id": run_id, "diagnoses": [diagnoses.diagnosis_json(e) for e in found]}


@bp.post("/runs/<int:run_id>/diagnoses")
def rerun_diagnoses(run_id: int) -> Any:
    json_body()
    diagnoses.diagnose_run(state().store, run_id)
    found = diagnoses.list_diagnoses(state().store, run_id)
    return {"run_id": run_id, "diagnoses": [diagnoses.diagnosis_json(e) for e in found]}


@bp.post("/runs/<int:run_id>/heartbeat")
def heartbeat(run_id: int) -> Any:
    json_body()
    store_runs.heartbeat(state().store, run_id, fence=_fence())
    # what the store asks of the run (a profile to take): the client's only way to hear it
    return {"run_id": run_id, "ok": True, "control": profiles.control(state().store, run_id)}


@bp.get("/runs/<int:run_id>/control")
def run_control(run_id: int) -> Any:
    """What the store asks of a run, for a follower rank that sends no heartbeat (the main
    rank's heartbeat answers the same)."""
    return {"run_id": run_id, "control": profiles.control(state().store, run_id)}


@bp.post("/runs/<int:run_id>/profiles/<int:profile_id>/report")
def report_profile(run_id: int, profile_id: int) -> Any:
    """The run's client reports on a profile it was asked for (started, stored, failed)."""
    found = profiles.report(state().store, run_id, profile_id, json_body())
    return {"profile": found.json()}


@bp.post("/runs/<int:run_id>/metrics")
def write_metrics(run_id: int) -> Any:
    points = state().ingest.write(run_id, json_body(), _fence())
    return {"run_id": run_id, "points": points}


@bp.post("/runs/<int:run_id>/events")
def add_event(run_id: int) -> Any:
    args = parse.event_args(json_body())
    state().ingest.require_run(run_id)
    store_events.add_event(
        state().store, run_id, args["kind"], args["message"], args["data"], fence=_fence()
    )
    return {"run_id": run_id, "ok": True}, 201


@bp.post("/runs/<int:run_id>/logs")
def append_run_logs(run_id: int) -> Any:
    """Console output of a run started by hand (``tracker.web.core.log_ingest``)."""
    batch = parse_log_batch(json_body())
    fence = _fence()
    st = state()
    st.ingest.require_run(run_id)
    chars = st.log_ingest.append(run_id, batch, fence)
    return {"run_id": run_id, "chars": chars}, 201


@bp.post("/runs/<int:run_id>/checkpoints")
def add_checkpoint(run_id: int) -> Any:
    args = parse.checkpoint_args(json_body())
    st = state()
    args["path"] = checkpoint_path(st.checkpoint_roots, args["path"])
    st.ingest.require_run(run_id)
    info = store_checkpoints.add_checkpoint(st.store, run_id, **args)
    return checkpoint_json(info), 201


@bp.patch("/checkpoints/<int:checkpoint_id>")
def set_checkpoint_state(checkpoint_id: int) -> Any:
    new_state = parse.checkpoint_state(json_body())
    store = state().store
    run_reads.get_checkpoint(store, checkpoint_id)  # 404 for an unknown id
    store_checkpoints.set_checkpoint_state(store, checkpoint_id, new_state)
    return {"id": checkpoint_id, "state": new_state}


# ---------------------------------------------------------------------- clone


@bp.post("/runs/<int:run_id>/clone")
def clone_run(run_id: int) -> Any:
    new = clone(state().store, ("run", run_id), **clone_edits(json_body()))
    return {"job_ids": [j.id for j in new]}, 201
