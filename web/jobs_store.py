"""Job rows the dashboard writes: clone a run or a job (config edited, optionally expanded
into a grid) into the queue, cancel a job, and add/pause/delete cron schedules.

Web and runner never import each other; they meet in these rows, so the rows written here
mean exactly what ``runner/jobrows.py``, ``runner/queue.py`` and ``runner/schedules.py``
write: a job is inserted ``queued`` with ``attempt`` 0 and its own run, created ``queued``
(config = the job's config overrides, command = argv, named ``<script>-job<id>``);
cancelling a queued job ends it ``cancelled`` and its run ``killed``, a running one gets
``cancel_requested`` (its worker stops it); a schedule's ``spec`` holds the job fields
under the runner's ``JobSpec`` names.

The dashboard launches only what was already submitted: every new job copies its command
from an existing job or run; only the config, the priority and the grid come from the
request.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import itertools
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from tracker.client.config import normalize_config
from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.store import models as m
from tracker.store.engine import write_begin

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
    "next_fire_time",
    "set_paused",
    "template_from_job",
    "template_from_run",
]

MAX_GRID_JOBS = 256
_DOW = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


class CronError(InvalidInput):
    code = "invalid_cron"


@dataclass(frozen=True)
class JobTemplate:
    """What a new job runs; field names are the runner's ``JobSpec`` names."""

    argv: list[str]
    project: str = "default"
    cwd: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    gpus: int = 0
    gpu_memory_bytes: int | None = None
    timeout_s: float | None = None
    max_retries: int = 0
    retry_on_failure: bool = False
    env: dict[str, str] = field(default_factory=dict)
    nproc_per_node: int | None = None
    name: str | None = None
    tags: tuple[str, ...] = ()
    parent_job_id: int | None = None
    not_before: float | None = None


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


def _run_name(argv: Sequence[str], job_id: int) -> str:
    # runner/jobrows.py: _default_run_name
    script = next((a for a in argv[1:] if a.endswith(".py")), None)
    stem = (script or (argv or ["job"])[0]).rsplit("/", 1)[-1].removesuffix(".py")
    return f"{stem[:200]}-job{job_id}"


def _project_id(conn: sa.Connection, name: str, now: float) -> int:
    found = conn.execute(sa.select(m.Project.id).where(m.Project.name == name)).scalar()
    if found is not None:
        return found
    from sqlalchemy.dialects import postgresql, sqlite

    insert: Any = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    conn.execute(insert(m.Project).values(name=name, created_at=now).on_conflict_do_nothing())
    return conn.execute(sa.select(m.Project.id).where(m.Project.name == name)).scalar_one()


def _insert(conn: sa.Connection, t: JobTemplate, now: float, schedule_id: int | None) -> int:
    resources: dict[str, Any] = {"gpus": t.gpus}
    if t.gpu_memory_bytes is not None:
        resources["gpu_memory_bytes"] = t.gpu_memory_bytes
    job_id = conn.execute(
        sa.insert(m.Job)
        .values(
            project=t.project,
            status="queued",
            priority=t.priority,
            argv=list(t.argv),
            cwd=t.cwd,
            config=t.config,
            resources=resources,
            env=dict(t.env),
            timeout_s=t.timeout_s,
            max_retries=t.max_retries,
            retry_on_failure=t.retry_on_failure,
            attempt=0,
            nproc_per_node=t.nproc_per_node,
            not_before=t.not_before,
            cancel_requested=False,
            schedule_id=schedule_id,
            parent_job_id=t.parent_job_id,
            created_at=now,
        )
        .returning(m.Job.id)
    ).scalar_one()
    run_id = conn.execute(
        sa.insert(m.Run)
        .values(
            project_id=_project_id(conn, t.project, now),
            name=t.name or _run_name(t.argv, job_id),
            status="queued",
            config=t.config,
            tags=list(t.tags),
            created_at=now,
            command=list(t.argv),
        )
        .returning(m.Run.id)
    ).scalar_one()
    conn.execute(sa.update(m.Job).where(m.Job.id == job_id).values(run_id=run_id))
    return job_id


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
        return [_insert(conn, t, now, None) for t in templates]


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
    """As ``runner.queue.cancel``: ``cancelled`` (it was queued), ``cancel_requested`` (it is
    running; its worker stops it), or the final status it already had.

    Raises NotFound for an unknown job.
    """
    now = time.time() if now is None else now
    with write_begin(engine) as conn:
        row = conn.execute(
            sa.select(m.Job.status, m.Job.run_id).where(m.Job.id == job_id).with_for_update()
        ).first()
        if row is None:
            raise NotFound(f"job {job_id} does not exist", field="job")
        if row.status == "running":
            conn.execute(sa.update(m.Job).where(m.Job.id == job_id).values(cancel_requested=True))
            return "cancel_requested"
        if row.status != "queued":
            return row.status
        hint = "The job was cancelled before it started."
        conn.execute(
            sa.update(m.Job)
            .where(m.Job.id == job_id)
            .values(
                status="cancelled",
                ended_at=now,
                failure_class="cancelled",
                failure_hint=hint,
                pending_reason=None,
                not_before=None,
            )
        )
        if row.run_id is not None:
            conn.execute(
                sa.update(m.Run)
                .where(m.Run.id == row.run_id)
                .values(status="killed", ended_at=now, failure_class="cancelled", failure_hint=hint)
            )
    return "cancelled"


# -------------------------------------------------------------------- schedules


def _weekday(text: str) -> str:
    """A crontab weekday field (0 or 7 = Sunday) in APScheduler's day names."""
    if any(c.isalpha() for c in text):
        return text
    days: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if body == "*":
            lo, hi = 0, 6
        elif "-" in body:
            lo, hi = (int(x) for x in body.split("-", 1))
        else:
            lo = int(body)
            hi = 6 if step_text else lo
        if not (0 <= lo <= hi <= 7 and step >= 1):
            raise ValueError(part)
        days |= {d % 7 for d in range(lo, hi + 1, step)}
    return ",".join(_DOW[d] for d in sorted(days))


def trigger(cron: str, timezone: str = "UTC") -> Any:
    """APScheduler trigger for a 5-field crontab (or 6 with seconds first), as the runner
    reads it (runner/schedules.py: trigger_for).

    Raises CronError for a bad expression or time zone.
    """
    from apscheduler.triggers.cron import CronTrigger

    fields = cron.split() if isinstance(cron, str) else []
    if len(fields) not in (5, 6):
        raise CronError(
            f"cron {cron!r}: expected 5 fields (minute hour day month weekday), or 6 with "
            "seconds first",
            field="cron",
        )
    second = fields.pop(0) if len(fields) == 6 else "0"
    minute, hour, day, month, dow = fields
    try:
        return CronTrigger(
            second=second,
            minute=minute,
            hour=hour,
            day=day,
            month=month,
            day_of_week=_weekday(dow),
            timezone=timezone,
        )
    except (ValueError, LookupError, TypeError) as exc:
        raise CronError(f"cron {cron!r} / timezone {timezone!r}: {exc}", field="cron") from None


def next_fire_time(cron: str, timezone: str, after: float) -> float | None:
    start = dt.datetime.fromtimestamp(after, dt.timezone.utc) + dt.timedelta(microseconds=1)
    try:
        nxt = trigger(cron, timezone).get_next_fire_time(None, start)
    except CronError:
        return None
    return None if nxt is None else nxt.timestamp()


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
    trigger(cron, timezone)
    _check_template(template)
    if name is not None and (not isinstance(name, str) or not 0 < len(name) <= 200):
        raise InvalidInput("name must be 1 to 200 characters", field="name")
    script = next((a for a in template.argv[1:] if a.endswith(".py")), template.argv[0])
    name = name or f"{script.rsplit('/', 1)[-1]} {cron}"
    spec = dataclasses.asdict(template)
    spec["tags"] = list(template.tags)
    now = time.time() if now is None else now
    with write_begin(engine) as conn:
        return conn.execute(
            sa.insert(m.Schedule)
            .values(
                name=name,
                cron=cron,
                timezone=timezone,
                spec=spec,
                paused=False,
                created_at=now,
                last_fire_at=None,
            )
            .returning(m.Schedule.id)
        ).scalar_one()


def set_paused(
    engine: sa.Engine, schedule_id: int, paused: bool, *, now: float | None = None
) -> None:
    """Pause or resume; resuming does not fire the times missed meanwhile (as the runner).

    Raises NotFound for an unknown id.
    """
    values: dict[str, Any] = {"paused": paused}
    if not paused:
        values["last_fire_at"] = time.time() if now is None else now
    with write_begin(engine) as conn:
        found = conn.execute(
            sa.update(m.Schedule).where(m.Schedule.id == schedule_id).values(**values)
        ).rowcount
    if not found:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")


def delete_schedule(engine: sa.Engine, schedule_id: int) -> None:
    """Delete a schedule (its jobs stay). Raises NotFound for an unknown id."""
    with write_begin(engine) as conn:
        found = conn.execute(sa.delete(m.Schedule).where(m.Schedule.id == schedule_id)).rowcount
    if not found:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")
