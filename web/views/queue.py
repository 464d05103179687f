"""JSON API ``/api/v1`` for the queue: jobs (submit, list, show, cancel, clone, logs), workers
and schedules (list, add, pause/resume, delete). Documented in ``web/API.md``.

Each view parses the request, makes one store call and serializes the answer. Writes go
through the same store functions as the CLI's (``tracker.store.clone``, ``.jobs``,
``.schedules``, ``.workers``), so a clone passes the same checks as ``tracker submit``. New jobs and
schedules are always copies of a submitted job (a run is copied through the job that ran it;
a run no job ran is refused with 409): a request may edit the config, priority, grid and
``fail_on`` policy, never the argv, cwd or env (400, ``tracker.web.core.fields.clone_edits``).
Schedules are shown with their spec's env names only, never its values. Lists of jobs and
schedules name the config keys that differ between their items (``differing_config_keys``).
``POST /jobs`` is the one route that takes a command line: ``tracker submit --uri http://...``
with an ``admin`` token (a trusted submitter, as one with the database URL); its body is read
by :mod:`tracker.web.core.job_body` and queued through ``tracker.store.queue`` with the checks
of a local submission.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from flask import Blueprint, request

from tracker.errors import InvalidInput
from tracker.rules.config_diff import diff_configs
from tracker.store import clone as store_clone
from tracker.store import jobs as store_jobs
from tracker.store import logs as store_logs
from tracker.store import queue as store_queue
from tracker.store import schedules as store_schedules
from tracker.store.job_detail import JobDetail, job_detail
from tracker.store.workers import list_workers
from tracker.web.core.fields import body_field, clone_edits
from tracker.web.core.job_body import specs_from_body
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import bool_arg, int_arg, json_body, list_arg, optional_int_arg
from tracker.web.views.runs import attempt_json, job_json, logs_json, schedule_json

bp = Blueprint("api_queue", __name__, url_prefix="/api/v1")


def differing_keys(configs: list[dict[str, Any]]) -> list[str]:
    """The dotted config keys whose values differ between ``configs`` (the rule of the compare
    view and the runs table: ``tracker.rules.config_diff``), so a list of jobs shows what sets
    them apart instead of a truncated whole config. Raises ConfigFlattenError (400) for a
    config that cannot be flattened, which the store never holds."""
    rows = diff_configs({str(i): c for i, c in enumerate(configs)}, only_differing=True)
    return [row.key for row in rows]


@bp.get("/jobs")
def jobs() -> Any:
    page = store_jobs.job_page(
        state().store,
        statuses=list_arg("status"),
        project=request.args.get("project") or None,
        limit=int_arg("limit", 100, 1, 1000),
        offset=int_arg("offset", 0, 0, 10**9),
    )
    cluster = store_jobs.external_ids(state().store, [j.id for j in page.jobs])
    listed = []
    for j in page.jobs:
        doc = job_json(j)
        doc["external_id"] = cluster.get(j.id)  # Slurm's job id of its latest attempt
        listed.append(doc)
    return {
        "jobs": listed,
        "total": page.total,
        "counts": page.counts,
        "differing_config_keys": differing_keys([j.config for j in page.jobs]),
    }


@bp.post("/jobs")
def submit() -> Any:
    specs, several = specs_from_body(json_body())
    queued = store_queue.enqueue_many(state().store, specs)
    if several:
        return {"jobs": [job_json(j) for j in queued]}, 201
    return job_json(queued[0]), 201


def detail_json(detail: JobDetail) -> dict[str, Any]:
    """A job with its attempts (each with the ``executor`` and ``host`` that ran it), its
    run (``id, name, status, deleted``), its schedule's name and the jobs cloned from it."""
    out = job_json(detail.job)
    tried = [a.attempt for a in detail.attempts]
    out["attempts"] = [
        {**attempt_json(a.attempt), "executor": a.executor, "host": a.host} for a in detail.attempts
    ]
    out["external_id"] = next((a.external_id for a in reversed(tried) if a.external_id), None)
    out["run"] = dataclasses.asdict(detail.run) if detail.run else None
    out["schedule_name"] = detail.schedule_name
    out["children"] = [dataclasses.asdict(c) for c in detail.children]
    return out


@bp.get("/jobs/<int:job_id>")
def job(job_id: int) -> Any:
    return detail_json(job_detail(state().store, job_id))


@bp.post("/jobs/<int:job_id>/cancel")
def cancel(job_id: int) -> Any:
    json_body()
    result = store_jobs.cancel(state().store, job_id)
    # ``result``: ``unchanged`` reads as the final status the job already had; ``outcome``
    # and ``status`` as the store says them (a job cancelled before reads ``unchanged``)
    return {
        "job_id": job_id,
        "result": result.status if result.outcome == "unchanged" else result.outcome,
        "outcome": result.outcome,
        "status": result.status,
    }


@bp.post("/jobs/<int:job_id>/clone")
def clone(job_id: int) -> Any:
    new = store_clone.clone(state().store, ("job", job_id), **clone_edits(json_body()))
    return {"job_ids": [j.id for j in new]}, 201


@bp.get("/jobs/<int:job_id>/logs")
def job_logs(job_id: int) -> Any:
    after = int_arg("after", 0, 0, 2**62)
    chunks = store_logs.logs_after(
        state().store,
        job_id,
        after=after,
        limit=int_arg("limit", 500, 1, 5000),
        stream=request.args.get("stream") or None,
        attempt=optional_int_arg("attempt"),
        tail=bool_arg("tail"),
    )
    return logs_json(job_id, chunks, after)


@bp.get("/workers")
def workers() -> Any:
    found = list_workers(state().store, include_stopped=bool_arg("all"))
    return {"workers": [dataclasses.asdict(w) for w in found]}


@bp.get("/schedules")
def schedules() -> Any:
    found = store_schedules.list_schedules(state().store)
    return {
        "schedules": [schedule_json(s) for s in found],
        "differing_config_keys": differing_keys([s.spec.get("config") or {} for s in found]),
    }


def _schedule_source(body: dict[str, Any]) -> tuple[Literal["job", "run"], int]:
    job_id = body_field(body, "job_id", int)
    run_id = body_field(body, "run_id", int)
    if job_id is not None and run_id is None:
        return "job", job_id
    if run_id is not None and job_id is None:
        return "run", run_id
    raise InvalidInput("give exactly one of job_id or run_id to schedule", field="job_id")


@bp.post("/schedules")
def add_schedule() -> Any:
    body = json_body()
    edits = clone_edits(body)
    if edits.pop("grid") is not None:
        raise InvalidInput("a schedule enqueues one job: grid is not allowed", field="grid")
    info = store_schedules.add_schedule_from(
        state().store,
        _schedule_source(body),
        body_field(body, "cron", str, required=True),
        **edits,
        timezone=body_field(body, "timezone", str, default="UTC"),
        name=body_field(body, "name", str),
    )
    return schedule_json(info), 201


@bp.patch("/schedules/<int:schedule_id>")
def pause_schedule(schedule_id: int) -> Any:
    paused = body_field(json_body(), "paused", bool, required=True)
    return schedule_json(store_schedules.set_paused(state().store, schedule_id, paused))


@bp.delete("/schedules/<int:schedule_id>")
def delete_schedule(schedule_id: int) -> Any:
    json_body()
    store_schedules.delete_schedule(state().store, schedule_id)
    return {"id": schedule_id, "deleted": True}
