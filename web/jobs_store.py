"""Job rows the dashboard writes: clone a run or a job (config edited, optionally expanded
into a grid) into the queue, cancel a job, and add/pause/delete cron schedules.

Web and runner never import each other; they meet in these rows. The rows are written by
the code both share in ``tracker.store.jobs`` and ``tracker.store.schedules``: a job is
inserted ``queued`` with ``attempt`` 0 and its own ``queued`` run; cancelling a queued job
ends it ``cancelled`` and its run ``killed``, a running one gets ``cancel_requested`` (its
worker stops it); a schedule's ``spec`` holds the job fields under ``JobSpec``'s names.

The dashboard launches only what was already submitted: every new job copies its command
from an existing job or run; only the config, the priority and the grid come from the
request.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import re
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.rules.config import normalize_config
from tracker.rules.cron import CronError, trigger_for
from tracker.store import jobs as store_jobs
from tracker.store import models as m
from tracker.store import schedules as store_schedules
from tracker.store.engine import write_begin
from tracker.store.jobs import JobSpec
from tracker.store.schedules import delete_schedule, set_paused

__all__ = [
    "MAX_GRID_JOBS",
    "CronError",
    "JobTemplate",
    "add_schedule",
    "cancel",
    "clone",
    "delete_schedule",
    "enqueue",
    "expand",
    "set_paused",
    "template_from_job",
    "template_from_run",
]

MAX_GRID_JOBS = 256

# What a new job runs: the runner's JobSpec (the dashboard never sets ``schedule_id``).
JobTemplate = JobSpec


# ------------------------------------------------------------------ templates


def template_from_job(engine: sa.Engine, job_id: int) -> JobTemplate:
    """The job's command and settings, as a template for a new job (its child).

    Raises NotFound for an unknown job.
    """
    with engine.connect() as conn:
        job = conn.execute(sa.select(*m.Job.__table__.columns).where(m.Job.id == job_id)).first()
        if job is None:
            raise NotFound(f"job {job_id} does not exist", field="job")
        tags = ()
        if job.run_id is not None:
            tags = tuple(
                conn.execute(sa.select(m.Run.tags).where(m.Run.id == job.run_id)).scalar() or ()
            )
        res = job.resources or {}
        return JobTemplate(
            argv=list(job.argv or []),
            project=job.project,
            cwd=job.cwd,
            config=dict(job.config or {}),
            priority=job.priority,
            gpus=int(res.get("gpus") or 0),
            gpu_memory_bytes=res.get("gpu_memory_bytes"),
            timeout_s=job.timeout_s,
            max_retries=job.max_retries,
            retry_on_failure=bool(job.retry_on_failure),
            env=dict(job.env or {}),
            nproc_per_node=job.nproc_per_node,
            tags=tags,
            parent_job_id=job.id,
        )


def template_from_run(engine: sa.Engine, run_id: int) -> JobTemplate:
    """A template from the job that ran this run, else from the run's recorded command.

    The config is the run's full config (what the editor shows); given as overrides it
    reproduces the run's settings.

    Raises:
        NotFound: no such run.
        Conflict: the run has no job and no recorded command.
    """
    with engine.connect() as conn:
        run = conn.execute(
            sa.select(m.Run.config, m.Run.tags, m.Run.command, m.Project.name.label("project"))
            .join(m.Project, m.Project.id == m.Run.project_id)
            .where(m.Run.id == run_id)
        ).first()
        if run is None:
            raise NotFound(f"run {run_id} does not exist", field="run")
        job_id = conn.execute(
            sa.select(m.Job.id).where(m.Job.run_id == run_id).order_by(m.Job.id.desc()).limit(1)
        ).scalar()
    if job_id is not None:
        base = template_from_job(engine, job_id)
        return dataclasses.replace(base, config=dict(run.config or {}), tags=tuple(run.tags or ()))
    if not run.command:
        raise Conflict(
            f"run {run_id} has no recorded command, so it cannot be cloned into a job",
            field="run",
        )
    return JobTemplate(
        argv=[str(a) for a in run.command],
        project=run.project,
        config=dict(run.config or {}),
        tags=tuple(run.tags or ()),
    )


def _set_dotted(config: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    if not all(parts):
        raise InvalidInput(f"grid key {key!r} has an empty part", field="grid")
    node = config
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _grid_combos(grid: Any) -> list[dict[str, Any]]:
    """Every combination of a ``{dotted key: [values]}`` grid (at most MAX_GRID_JOBS)."""
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise InvalidInput(
            'grid must map config keys to non-empty lists, e.g. {"lr": [0.1, 0.01]}',
            field="grid",
        )
    size = 1
    for values in grid.values():
        size *= len(values)
    if size > MAX_GRID_JOBS:
        raise InvalidInput(
            f"the grid makes {size} jobs; at most {MAX_GRID_JOBS} per request", field="grid"
        )
    return [dict(zip(grid, c, strict=True)) for c in itertools.product(*grid.values())]


def expand(
    template: JobTemplate,
    *,
    config: Any = None,
    grid: Any = None,
    priority: Any = None,
) -> list[JobTemplate]:
    """The jobs a clone request makes: the (edited) config, times each grid combination.

    ``grid`` maps dotted config keys to lists of values (``{"lr": [0.1, 0.01]}``).

    Raises:
        InvalidInput: config not an object or not JSON-like, a bad grid, a bad priority,
            or more than ``MAX_GRID_JOBS`` jobs.
    """
    if config is not None and not isinstance(config, dict):
        raise InvalidInput("config must be a JSON object", field="config")
    base = normalize_config(dict(template.config if config is None else config))
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > 1_000_000
    ):
        raise InvalidInput("priority must be an integer from -1000000 to 1000000", field="priority")
    combos = _grid_combos(grid) if grid else [{}]
    out = []
    for combo in combos:
        cfg = copy.deepcopy(base)
        for key, value in combo.items():
            _set_dotted(cfg, key, value)
        cfg = normalize_config(cfg)
        out.append(
            dataclasses.replace(
                template,
                config=cfg,
                priority=template.priority if priority is None else priority,
            )
        )
    return out


# ---------------------------------------------------------------------- enqueue


def _check_template(t: JobTemplate) -> None:
    if not t.argv or not all(isinstance(a, str) and "\0" not in a for a in t.argv):
        raise InvalidInput("argv must be a non-empty list of strings without NUL", field="argv")
    if not 0 < len(t.project) <= 200:
        raise InvalidInput("project must be a name of 1 to 200 characters", field="project")


def enqueue(
    engine: sa.Engine, templates: Sequence[JobTemplate], *, now: float | None = None
) -> list[int]:
    """Queue jobs (each with its ``queued`` run) in one transaction; returns their ids.

    Raises:
        InvalidInput: an empty argv or a bad project name.
        StoreUnavailable: the database cannot be reached.
    """
    for t in templates:
        _check_template(t)
    now = time.time() if now is None else now
    with write_begin(engine) as conn:
        return [store_jobs.insert_job(conn, t, now) for t in templates]


def clone(
    engine: sa.Engine,
    source: tuple[str, int],
    *,
    config: Any = None,
    grid: Any = None,
    priority: Any = None,
    now: float | None = None,
) -> list[int]:
    """Enqueue copies of a ``("job", id)`` or ``("run", id)`` with an edited config.

    Raises: NotFound, Conflict (a run without command), InvalidInput (see ``expand``).
    """
    kind, source_id = source
    template = (
        template_from_job(engine, source_id)
        if kind == "job"
        else template_from_run(engine, source_id)
    )
    return enqueue(engine, expand(template, config=config, grid=grid, priority=priority), now=now)


def cancel(engine: sa.Engine, job_id: int, *, now: float | None = None) -> str:
    """As the runner's cancel: ``cancelled`` (it was queued), ``cancel_requested`` (it is
    running; its worker stops it), or the final status it already had.

    Raises NotFound for an unknown job.
    """
    result = store_jobs.cancel(engine, job_id, now=now)
    return result.status if result.outcome == "unchanged" else result.outcome


# -------------------------------------------------------------------- schedules


def add_schedule(
    engine: sa.Engine,
    template: JobTemplate,
    cron: Any,
    *,
    timezone: Any = "UTC",
    name: Any = None,
    now: float | None = None,
) -> int:
    """Store a schedule that enqueues ``template`` at every cron time. Returns its id.

    Raises CronError (bad cron or time zone), InvalidInput (bad name or template).
    """
    if not isinstance(timezone, str) or not re.fullmatch(r"[A-Za-z0-9_+\-/]{1,64}", timezone):
        raise CronError(f"timezone {timezone!r} is not a time zone name", field="timezone")
    trigger_for(cron, timezone)
    _check_template(template)
    if name is not None and (not isinstance(name, str) or not 0 < len(name) <= 200):
        raise InvalidInput("name must be 1 to 200 characters", field="name")
    now = time.time() if now is None else now
    return store_schedules.insert_schedule(
        engine, cron, template, timezone=timezone, name=name, now=now
    )
