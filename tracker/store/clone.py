"""Clone a job or a run into the queue (the dashboard's "clone & enqueue", ``tracker up
--demo`` and schedules made from the dashboard): the spec of an existing job or run, with
its config edited and optionally expanded over a grid, enqueued through
:func:`tracker.store.queue.enqueue_many` -- so every copy passes ``check_spec`` like any
other job. Only the config, the priority, the grid and the ``fail_on`` policy (which
diagnoses fail the job, ``tracker.rules.fail_on``) come from the caller: the argv, cwd, env
and resources are the source job's. A run is cloned through the job that ran it; a run
that no job ran (reported over the ingest or MLflow APIs, or by a script run by hand) is
refused (``Conflict``): what a worker executes always comes from a trusted submitter.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa

from tracker.entities import JobInfo, JobSpec
from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.rules.config import normalize_config
from tracker.rules.fail_on import parse_fail_on
from tracker.rules.sweep import MAX_CONFIGS, grid_configs
from tracker.store import models as m
from tracker.store.engine import read_conn
from tracker.store.queue import enqueue_many

if TYPE_CHECKING:
    from tracker.store.store import Store

__all__ = ["clone", "clone_specs", "spec_from_job", "spec_from_run"]


def spec_from_job(store: Store, job_id: int) -> JobSpec:
    """The job's command and settings as the spec of a new job (its child, same run tags).

    Raises NotFound for an unknown job.
    """
    with read_conn(store.engine) as conn:
        job = conn.execute(
            sa.select(*m.JobRow.__table__.columns).where(m.JobRow.id == job_id)
        ).first()
        if job is None:
            raise NotFound(f"job {job_id} does not exist", field="job")
        tags = ()
        if job.run_id is not None:
            tags = tuple(
                conn.execute(sa.select(m.RunRow.tags).where(m.RunRow.id == job.run_id)).scalar()
                or ()
            )
    res = job.resources or {}
    return JobSpec(
        argv=list(job.argv or []),
        project=job.project,
        cwd=job.cwd,
        project_root=job.project_root,
        config=dict(job.config or {}),
        priority=job.priority,
        gpus=int(res.get("gpus") or 0),
        gpu_memory_bytes=res.get("gpu_memory_bytes"),
        timeout_s=job.timeout_s,
        max_retries=job.max_retries,
        retry_on_failure=bool(job.retry_on_failure),
        fail_on=job.fail_on,
        env=dict(job.env or {}),
        nproc_per_node=job.nproc_per_node,
        tags=tags,
        parent_job_id=job.id,
        cpus=res.get("cpus"),
        memory_bytes=res.get("memory_bytes"),
        sbatch=tuple(res.get("sbatch") or ()),
        snapshot_id=job.snapshot_id,
    )


def spec_from_run(store: Store, run_id: int) -> JobSpec:
    """A spec from the job that ran this run: its argv, cwd, env and resources, with the
    run's full config (what the dashboard's editor shows; given as overrides it reproduces
    the run's settings) and tags.

    A run's own ``command`` column is never read here: it is what the training process
    reported (over the ingest or MLflow APIs, or a script run by hand) and is shown, never
    launched. Only a job, written by a trusted submitter, says what a worker executes.

    Raises:
        NotFound: no such run.
        Conflict: the run was not submitted as a job.
    """
    with read_conn(store.engine) as conn:
        run = conn.execute(
            sa.select(m.RunRow.config, m.RunRow.tags).where(m.RunRow.id == run_id)
        ).first()
        if run is None:
            raise NotFound(f"run {run_id} does not exist", field="run")
        job_id = conn.execute(
            sa.select(m.JobRow.id)
            .where(m.JobRow.run_id == run_id)
            .order_by(m.JobRow.id.desc())
            .limit(1)
        ).scalar()
    if job_id is None:
        raise Conflict(
            f"run {run_id} was not submitted as a job: only submitted jobs can be cloned or "
            "scheduled; use `tracker submit` to queue its script",
            field="run",
        )
    base = spec_from_job(store, job_id)
    return dataclasses.replace(base, config=dict(run.config or {}), tags=tuple(run.tags or ()))


def clone_specs(
    template: JobSpec,
    *,
    config: Any = None,
    grid: Any = None,
    priority: Any = None,
    fail_on: Any = None,
) -> list[JobSpec]:
    """The jobs a clone makes: ``template`` with ``config``, ``priority`` and ``fail_on``
    (each by default its own), once per combination of ``grid``, a mapping of dotted
    config keys to non-empty lists of values (``{"lr": [0.1, 0.01]}``). Pure.

    Raises:
        InvalidInput: config not a JSON object, or not JSON-like.
        FailOnError: a bad ``fail_on`` (``tracker.rules.fail_on.parse_fail_on``).
        SweepSpecError: a bad grid, more than ``MAX_CONFIGS`` jobs, or a key that crosses a
            value that is not a mapping (the rule of ``tracker.rules.sweep.set_path``).
    """
    if config is not None and not isinstance(config, dict):
        raise InvalidInput("config must be a JSON object", field="config")
    base = normalize_config(dict(template.config if config is None else config))
    configs = grid_configs(base, grid, max_configs=MAX_CONFIGS) if grid else [copy.deepcopy(base)]
    new_priority = template.priority if priority is None else priority
    new_fail_on = template.fail_on if fail_on is None else parse_fail_on(fail_on)
    return [
        dataclasses.replace(
            template, config=normalize_config(c), priority=new_priority, fail_on=new_fail_on
        )
        for c in configs
    ]


def clone(
    store: Store,
    source: tuple[Literal["job", "run"], int],
    *,
    config: Any = None,
    grid: Any = None,
    priority: Any = None,
    fail_on: Any = None,
    now: float | None = None,
) -> list[JobInfo]:
    """Enqueue copies of a ``("job", id)`` or ``("run", id)`` with an edited config (see
    ``clone_specs``): same argv, cwd, resources, env and retries. Every copy passes
    ``check_spec`` as any other enqueue does.

    Raises: NotFound, Conflict (a run that no job ran), InvalidInput (as ``clone_specs``
    and ``check_spec``), StoreUnavailable.
    """
    kind, source_id = source
    template = spec_from_job(store, source_id) if kind == "job" else spec_from_run(store, source_id)
    specs = clone_specs(template, config=config, grid=grid, priority=priority, fail_on=fail_on)
    return enqueue_many(store, specs, now=now)
