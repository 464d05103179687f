"""JSON API ``/api/v1`` for the queue: jobs (list, show, cancel, clone, logs), workers and
schedules (list, add, pause/resume, delete). Documented in ``web/API.md``.

New jobs and schedules are always copies of an existing job or run (``tracker.web.jobs_store``):
the dashboard never takes a command line from a request.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flask import Blueprint, request

from tracker.errors import InvalidInput
from tracker.store import jobs as store_jobs
from tracker.store import schedules as store_schedules
from tracker.store import workers as store_workers
from tracker.store.logs import logs_after
from tracker.web import jobs_store
from tracker.web.api import attempt_json, job_json, logs_json
from tracker.web.context import state
from tracker.web.params import body_field, bool_arg, int_arg, json_body, list_arg

bp = Blueprint("api_queue", __name__, url_prefix="/api/v1")


@bp.get("/jobs")
def jobs() -> Any:
    page = store_jobs.job_page(
        state().store,
        statuses=list_arg("status"),
        project=request.args.get("project") or None,
        limit=int_arg("limit", 100, 1, 1000),
        offset=int_arg("offset", 0, 0, 10**9),
    )
    found = [job_json(j, page.positions.get(j.id)) for j in page.jobs]
    return {"jobs": found, "total": page.total, "counts": page.counts}


@bp.get("/jobs/<int:job_id>")
def job(job_id: int) -> Any:
    store = state().store
    out = job_json(*store_jobs.job_with_position(store, job_id))
    out["attempts"] = [attempt_json(a) for a in store_jobs.attempts(store, job_id)]
    return out


@bp.post("/jobs/<int:job_id>/cancel")
def cancel(job_id: int) -> Any:
    json_body()
    outcome = jobs_store.cancel(state().store.engine, job_id)
    return {"job_id": job_id, "result": outcome}


@bp.post("/jobs/<int:job_id>/clone")
def clone(job_id: int) -> Any:
    body = json_body()
    ids = jobs_store.clone(
        state().store.engine,
        ("job", job_id),
        config=body.get("config"),
        grid=body.get("grid"),
        priority=body.get("priority"),
    )
    return {"job_ids": ids}, 201


@bp.get("/jobs/<int:job_id>/logs")
def job_logs(job_id: int) -> Any:
    after = int_arg("after", 0, 0, 2**62)
    chunks = logs_after(
        state().store,
        job_id,
        after=after,
        limit=int_arg("limit", 500, 1, 5000),
        stream=request.args.get("stream") or None,
        tail=bool_arg("tail"),
    )
    return logs_json(job_id, chunks, after)


@bp.get("/workers")
def workers() -> Any:
    found = store_workers.list_workers(state().store, include_stopped=bool_arg("all"))
    return {"workers": [dataclasses.asdict(w) for w in found]}


@bp.get("/schedules")
def schedules() -> Any:
    found = store_schedules.list_schedules(state().store)
    return {"schedules": [dataclasses.asdict(s) for s in found]}


def _schedule_source(body: dict[str, Any]) -> tuple[str, int]:
    job_id = body_field(body, "job_id", int)
    run_id = body_field(body, "run_id", int)
    if (job_id is None) == (run_id is None):
        raise InvalidInput("give exactly one of job_id or run_id to schedule", field="job_id")
    return ("job", job_id) if job_id is not None else ("run", run_id)


@bp.post("/schedules")
def add_schedule() -> Any:
    body = json_body()
    engine = state().store.engine
    kind, source_id = _schedule_source(body)
    template = (
        jobs_store.template_from_job(engine, source_id)
        if kind == "job"
        else jobs_store.template_from_run(engine, source_id)
    )
    (template,) = jobs_store.expand(
        template, config=body.get("config"), priority=body.get("priority")
    )
    schedule_id = jobs_store.add_schedule(
        engine,
        template,
        body_field(body, "cron", str, required=True),
        timezone=body_field(body, "timezone", str, default="UTC"),
        name=body_field(body, "name", str),
    )
    return dataclasses.asdict(store_schedules.get_schedule(state().store, schedule_id)), 201


@bp.patch("/schedules/<int:schedule_id>")
def pause_schedule(schedule_id: int) -> Any:
    paused = body_field(json_body(), "paused", bool, required=True)
    engine = state().store.engine
    jobs_store.set_paused(engine, schedule_id, paused)
    return dataclasses.asdict(store_schedules.get_schedule(state().store, schedule_id))


@bp.delete("/schedules/<int:schedule_id>")
def delete_schedule(schedule_id: int) -> Any:
    json_body()
    jobs_store.delete_schedule(state().store.engine, schedule_id)
    return {"id": schedule_id, "deleted": True}
