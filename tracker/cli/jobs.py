"""Queue commands: ``submit``, ``sweep``, ``jobs ls|show|logs|cancel|requeue``, ``workers ls``
(``tracker sweeps``, the sweeps that learn, is :mod:`tracker.cli.sweeps`).

The store and the runner are imported inside the commands, so ``tracker --help`` stays fast.
``submit``, ``sweep`` and ``jobs cancel`` given a dashboard's ``http://host:port`` go through
its API (:mod:`tracker.cli.remote_submit`, an ``admin`` token).
"""

from __future__ import annotations

import os
import random
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import click

from tracker.cli.common import (
    echo_json,
    fmt_duration,
    fmt_time,
    json_option,
    open_store,
    print_table,
    uri_option,
)
from tracker.cli.listing import config_cells, limit_option
from tracker.cli.reading import Reader, open_reader, reader_options
from tracker.cli.remote import is_http
from tracker.cli.script_args import ScriptCommand
from tracker.cli.snapshot import SNAPSHOT_KEYS, attach_snapshot, snapshot_options
from tracker.cli.suggest import SuggestingGroup
from tracker.cli.sweeps import create_learning_sweep, learning_options, pop_learning
from tracker.entities import JOB_STATUSES, JobInfo, WorkerInfo
from tracker.errors import InvalidInput
from tracker.rules.sweep import DISTRIBUTIONS_HELP
from tracker.rules.units import parse_duration, parse_size

admin_token_option = click.option(
    "--token",
    envvar="TRACKER_TOKEN",
    default=None,
    help="Access token when --uri is a dashboard's http://host:port (default: TRACKER_TOKEN); "
    "submitting and cancelling need an `admin` token.",
)


def _size(text: str | None) -> int | None:
    return parse_size(text, field="gpu_memory") if text else None


def parse_env(items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` sets a variable; a bare ``KEY`` copies it from this shell's environment."""
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            if key not in os.environ:
                raise InvalidInput(f"--env {key}: not set in this environment", field="env")
            value = os.environ[key]
        env[key] = value
    return env


def single_overrides(texts: Sequence[str]) -> dict[str, Any]:
    """``-c key=value`` overrides as a nested config; a comma list or distribution is refused."""
    from tracker.rules.sweep import Choices, SweepSpecError, parse_overrides, set_path

    config: dict[str, Any] = {}
    for o in parse_overrides(texts):
        if not isinstance(o.spec, Choices) or len(o.spec.values) != 1:
            raise SweepSpecError(
                f"-c {o.text}: several values need `tracker sweep`; to submit a list, "
                "write it in brackets (-c 'layers=[64,64]') or quote it",
                field="config",
            )
        config = set_path(config, o.key, o.spec.values[0])
    return config


def job_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options every command that creates jobs shares (submit, sweep, schedule add)."""
    decorators = [
        click.option("-c", "--config", "overrides", multiple=True, metavar="KEY=VALUE",
                     help="Config override, nested with dots (model.width=64); repeatable."),
        click.option("--project", default=lambda: os.environ.get("TRACKER_PROJECT", "default"),
                     show_default="TRACKER_PROJECT or 'default'", help="Project of the run."),
        click.option("--name", help="Run name (default: script name and job id)."),
        click.option("--tag", "tags", multiple=True, help="Tag for the run; repeatable."),
        click.option("--gpus", type=click.IntRange(0, 1024), default=0, show_default=True,
                     help="GPUs the job needs; a worker sets CUDA_VISIBLE_DEVICES to them."),
        click.option("--gpu-memory", help="Free memory each GPU must have (e.g. 20GiB)."),
        click.option("--priority", type=int, default=0, show_default=True,
                     help="Higher runs first; equal priorities run oldest first."),
        click.option("--timeout", help="Stop the job after this long (90s, 45m, 2h, 1h30m)."),
        click.option("--retries", type=click.IntRange(0, 1000), default=0, show_default=True,
                     help="Retries after a crash, timeout or kill (with backoff; resumes from "
                          "the last checkpoint)."),
        click.option("--retry-on-failure", is_flag=True,
                     help="Also retry failures of the job's own code (exceptions, exit codes)."),
        click.option("--fail-on", "fail_on", default="errors", show_default=True,
                     metavar="KINDS",
                     help="Which of the doctor's diagnoses fail a job that exited 0: 'errors' "
                          "(every error-severity one), 'none', or a comma list of kinds "
                          "(divergence,memory_growth,...; may include errors)."),
        click.option("--env", "env_items", multiple=True, metavar="KEY[=VALUE]",
                     help="Environment variable for the job; KEY alone copies it from here."),
        click.option("--cwd", type=click.Path(file_okay=False), default=None,
                     help="Working directory of the job (default: the current directory)."),
        click.option("--project-root", type=click.Path(file_okay=False), default=None,
                     help="Record the job's directory and script relative to this directory "
                          "(default: the git work tree holding --cwd, else --cwd itself); a "
                          "worker runs it under its own --project-root."),
        click.option("--nproc-per-node", type=click.IntRange(1, 1024), default=None,
                     help="Launch through torchrun with this many processes (rank 0 logs)."),
        click.option("--cpus", type=click.IntRange(1, 1 << 20), default=None,
                     help="CPUs the job needs (Slurm --cpus-per-task; a local worker ignores it)."),
        click.option("--mem", "memory", default=None,
                     help="Host memory the job needs, e.g. 32GiB (Slurm: --mem)."),
        click.option("--sbatch", "sbatch", multiple=True, metavar="--OPTION[=VALUE]",
                     help="Extra sbatch option for a Slurm dispatcher (allow-listed); repeatable."),
    ]  # fmt: skip
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def spec_from_options(command: Sequence[str], config: dict[str, Any], **o: Any) -> Any:
    """A JobSpec from the shared options (``o`` as click passes them)."""
    from tracker.cli.job_command import build_command
    from tracker.entities import JobSpec
    from tracker.rules.fail_on import parse_fail_on

    cwd = os.path.abspath(o["cwd"] or os.getcwd())
    if not os.path.isdir(cwd):
        raise InvalidInput(f"--cwd {o['cwd']}: no such directory", field="cwd")
    recorded = build_command(command, cwd, o.get("project_root"))
    return JobSpec(
        argv=recorded.argv,
        project=o["project"],
        cwd=recorded.cwd,
        project_root=recorded.root,
        config=config,
        priority=o["priority"],
        gpus=o["gpus"],
        gpu_memory_bytes=_size(o["gpu_memory"]),
        timeout_s=parse_duration(o["timeout"], field="timeout") if o["timeout"] else None,
        max_retries=o["retries"],
        retry_on_failure=o["retry_on_failure"],
        fail_on=parse_fail_on(o["fail_on"], name="--fail-on"),
        env=parse_env(o["env_items"]),
        nproc_per_node=o["nproc_per_node"],
        name=o["name"],
        tags=tuple(o["tags"]),
        cpus=o.get("cpus"),
        memory_bytes=parse_size(o["memory"], field="memory") if o.get("memory") else None,
        sbatch=tuple(o.get("sbatch") or ()),
    )


_JOB_KEYS = ("project", "name", "tags", "gpus", "gpu_memory", "priority", "timeout", "retries",
             "retry_on_failure", "fail_on", "env_items", "cwd", "project_root", "nproc_per_node",
             "cpus", "memory", "sbatch")  # fmt: skip


def _job_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs[k] for k in _JOB_KEYS}


def _snapshot_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs[k] for k in SNAPSHOT_KEYS}


# ------------------------------------------------------------------- submit, sweep


@click.command(cls=ScriptCommand, context_settings={"allow_interspersed_args": True})
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@job_options
@snapshot_options
@uri_option
@admin_token_option
@json_option
def submit(command: tuple[str, ...], overrides: tuple[str, ...], uri: str | None,
           token: str | None, as_json: bool, **kwargs: Any) -> None:  # fmt: skip
    """Queue a training job: SCRIPT.py [ARGS] (run with this Python), or -- PROGRAM ARGS.

    Script arguments that start with '-' go after '--':

    \b
        tracker submit train.py -c lr=3e-4 --gpus 1 -- --epochs 3
        tracker submit -- ./train.sh --fast

    The code is recorded as submitted (a snapshot of the project root: git's files with the
    commit and uncommitted diff, else the directory less .gitignore'd files) and each attempt
    runs in a fresh copy of it, so editing a file afterwards does not change the job;
    --no-snapshot runs it from the worker's own files instead.

    --uri may be a dashboard's http://host:port (with an admin --token or TRACKER_TOKEN): the
    snapshot is uploaded to it (only the files it lacks) and the job queued there.
    """
    from tracker.store import queue

    spec = spec_from_options(command, single_overrides(overrides), **_job_kwargs(kwargs))
    if is_http(uri):
        from tracker.cli.remote_submit import submit_remote

        assert uri is not None  # is_http says so; for mypy
        job = submit_remote(uri, token, spec, _snapshot_kwargs(kwargs))[0]
    else:
        store = open_store(uri, create=True)
        spec = attach_snapshot(spec, store, _snapshot_kwargs(kwargs))
        job = queue.enqueue(store, spec)
    if as_json:
        echo_json(job)
    else:
        click.echo(f"job {job.id} queued (run {job.run_id}, priority {job.priority})")


@click.command(cls=ScriptCommand, context_settings={"allow_interspersed_args": True},
               epilog=DISTRIBUTIONS_HELP)  # fmt: skip
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@job_options
@click.option("--random", "samples", type=int, default=None,
              help="Random search: this many samples instead of the full grid.")  # fmt: skip
@click.option("--seed", type=int, default=None, help="Seed of the random search or sampler.")
@click.option("--dry-run", is_flag=True, help="Print the configs without queueing them.")
@learning_options
@snapshot_options
@uri_option
@admin_token_option
@json_option
def sweep(command: tuple[str, ...], overrides: tuple[str, ...], samples: int | None,
          seed: int | None, dry_run: bool, uri: str | None, token: str | None, as_json: bool,
          **kwargs: Any) -> None:  # fmt: skip
    """Queue one job per config: the grid of comma lists, or --random N samples; or, with
    --method and --metric, a sweep that learns: each trial's params come from the trials
    before it, and trials worse than their peers stop early (--prune).

    \b
        tracker sweep train.py -c lr=1e-4,3e-4 -c model.width=64,128     # 4 jobs
        tracker sweep train.py --random 20 -c "lr=loguniform(1e-5,1e-2)" -c seed=0,1,2
        tracker sweep train.py -c "lr=loguniform(1e-5,1e-1)" -c width=64,128 \\
            --method tpe --metric val/loss --goal minimize --trials 50 --parallel 4 --prune asha

    One code snapshot for all the jobs (see `tracker submit`). --uri may be a dashboard's
    http://host:port (with an admin --token or TRACKER_TOKEN). A sweep that learns is driven
    by the periodic work of the dashboard, a worker or `tracker scheduler` (see `tracker
    sweeps`); its trials are ordinary jobs tagged sweep-ID.
    """
    import dataclasses

    from tracker.rules.sweep import expand_grid, parse_overrides, sample_random
    from tracker.store import queue

    learning = pop_learning(kwargs)
    if learning is not None:
        if samples is not None:
            raise click.UsageError("--random N and --method are two kinds of sweep: pick one")
        if dry_run:
            raise click.UsageError("--dry-run: a sweep that learns picks each trial later")
        spec = spec_from_options(command, {}, **_job_kwargs(kwargs))
        create_learning_sweep(spec, overrides, learning, seed, uri, token, as_json,
                              _snapshot_kwargs(kwargs))  # fmt: skip
        return
    parsed = parse_overrides(overrides)
    if samples is None:
        configs = expand_grid({}, parsed)
    else:
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        configs = sample_random({}, parsed, samples, random.Random(seed))
    base = spec_from_options(command, {}, **_job_kwargs(kwargs))
    group = f"sweep-{uuid.uuid4().hex[:8]}"
    specs = [
        dataclasses.replace(base, config=c, tags=(*base.tags, group)) for c in configs
    ]  # fmt: skip
    if dry_run:
        if as_json:
            echo_json(configs)
        for config in [] if as_json else configs:
            click.echo(str(config))
        return
    if is_http(uri):
        from tracker.cli.remote_submit import submit_remote

        assert uri is not None  # is_http says so; for mypy
        tagged = dataclasses.replace(base, tags=(*base.tags, group))
        jobs = submit_remote(uri, token, tagged, _snapshot_kwargs(kwargs), configs)
    else:
        store = open_store(uri, create=True)
        snapshot_id = attach_snapshot(base, store, _snapshot_kwargs(kwargs)).snapshot_id
        specs = [dataclasses.replace(s, snapshot_id=snapshot_id) for s in specs]
        jobs = queue.enqueue_many(store, specs)
    if as_json:
        echo_json({"tag": group, "seed": seed, "jobs": jobs})
        return
    seeded = f" (seed {seed})" if seed is not None else ""
    click.echo(f"{len(jobs)} jobs queued{seeded}, tagged {group}: "
               f"{jobs[0].id}..{jobs[-1].id}")  # fmt: skip


# --------------------------------------------------------------------------- jobs


@click.group(cls=SuggestingGroup)
def jobs() -> None:
    """List, inspect, follow and cancel queued and running jobs."""


def _command_text(argv: Sequence[str]) -> str:
    if len(argv) > 1 and argv[0].rsplit("/", 1)[-1].startswith("python"):
        argv = argv[1:]
    return " ".join(argv)


def _note(job: Any) -> str:
    if job.status == "queued":
        return job.pending_reason or ""
    if job.status == "running" and job.cancel_requested:
        return "cancel requested"
    if job.status == "running":
        return job.pending_reason or ""  # waiting in a cluster scheduler (tracker dispatcher)
    return job.failure_class or ""


@jobs.command("ls")
@click.option("--status", "statuses", multiple=True, type=click.Choice(JOB_STATUSES),
              help="Only jobs in this state; repeat for several (--status failed "
                   "--status crashed).")  # fmt: skip
@click.option("--project", help="Only jobs of this project.")
@limit_option("jobs")
@reader_options
@json_option
def jobs_ls(statuses: tuple[str, ...], project: str | None, limit: int, uri: str | None,
            token: str | None, as_json: bool) -> None:  # fmt: skip
    """List jobs, newest first. POS is a queued job's place in the claim order; CONFIG the
    config overrides whose values differ between the listed jobs (what tells the jobs of a
    sweep apart; every override when none differs); --json prints whole configs.

    --uri may be a dashboard's http://host:port (with --token or TRACKER_TOKEN).
    """
    found = open_reader(uri, token).jobs(statuses, project, limit)
    if as_json:
        echo_json(found)
        return
    now = time.time()
    configs = config_cells([j.config for j in found])
    rows = [
        (j.id, j.status, j.position or "-", j.priority, j.project, _command_text(j.argv),
         config, j.gpus, j.attempt, j.run_id or "-", j.lease_owner or "-",
         fmt_time(j.created_at),
         fmt_duration(((j.ended_at or now) - j.started_at) if j.started_at else None), _note(j))
        for j, config in zip(found, configs, strict=True)
    ]  # fmt: skip
    headers = ("ID", "STATUS", "POS", "PRI", "PROJECT", "COMMAND", "CONFIG", "GPUS", "TRY", "RUN",
               "WORKER", "CREATED", "TOOK", "NOTE")  # fmt: skip
    print_table(headers, rows)


@jobs.command("show")
@click.argument("job_id", type=int)
@reader_options
@json_option
def jobs_show(job_id: int, uri: str | None, token: str | None, as_json: bool) -> None:
    """Everything about one job: state, why it waits, attempts, failure and hint.

    --uri may be a dashboard's http://host:port (with --token or TRACKER_TOKEN).
    """
    from tracker.runner.pending import explain_pending

    reader = open_reader(uri, token)
    job = reader.job(job_id)
    reason = job.pending_reason
    if job.status == "queued" and reason is None:
        reason = explain_pending(job.gpus, job.gpu_memory_bytes, reader.workers(False, True))
    tries = reader.attempts(job_id)
    if as_json:
        echo_json({"job": job, "pending_reason": reason, "attempts": tries})
        return
    lines = [
        ("status", job.status + (" (cancel requested)" if job.cancel_requested else "")),
        ("waiting because", reason if job.status in ("queued", "running") else None),
        ("queue position", job.position),
        ("project", job.project),
        ("run", job.run_id),
        ("command", " ".join(job.argv)),
        ("cwd", job.cwd),
        ("code", f"snapshot {job.snapshot_id} (a fresh copy per attempt)"
                 if job.snapshot_id is not None else "the worker's own files (no snapshot)"),
        ("config", job.config or None),
        ("resources", f"{job.gpus} GPU(s)" + (f", {job.gpu_memory_bytes / 1024**3:.1f} GiB free"
                                               " each" if job.gpu_memory_bytes else "")
                      + (f", {job.cpus} CPU(s)" if job.cpus else "")
                      + (f", {job.memory_bytes / 1024**3:.1f} GiB memory"
                         if job.memory_bytes else "")),
        ("sbatch", " ".join(job.sbatch) or None),
        ("priority", job.priority),
        ("timeout", fmt_duration(job.timeout_s) if job.timeout_s else None),
        ("retries", f"{job.max_retries}" + (" (also on failure)" if job.retry_on_failure else "")),
        ("fail on", job.fail_on),
        ("attempt", job.attempt),
        ("worker", job.lease_owner),
        ("created", fmt_time(job.created_at)),
        ("started", fmt_time(job.started_at) if job.started_at else None),
        ("ended", fmt_time(job.ended_at) if job.ended_at else None),
        ("exit code", job.exit_code),
        ("failure", job.failure_class),
        ("hint", job.failure_hint),
    ]  # fmt: skip
    click.echo(f"job {job.id}")
    for key, value in lines:
        if value is not None and value != "":
            click.echo(f"  {key + ':':<17}{value}")
    if tries:
        click.echo("attempts:")
        header: tuple[str, ...] = (
            "#", "STATUS", "WORKER", "STARTED", "TOOK", "EXIT", "FAILURE", "RESUMED FROM",
        )  # fmt: skip
        rows: list[tuple[object, ...]] = [
            (a.attempt, a.status, a.worker_id or "-", fmt_time(a.started_at),
             fmt_duration((a.ended_at - a.started_at) if a.ended_at else None),
             "-" if a.exit_code is None else a.exit_code, a.failure_class or "-",
             a.resume_checkpoint or "-")
            for a in tries
        ]  # fmt: skip
        if any(a.external_id for a in tries):  # run by a cluster scheduler: its job id
            header = (*header[:3], "CLUSTER JOB", *header[3:])
            rows = [
                (*r[:3], a.external_id or "-", *r[3:]) for r, a in zip(rows, tries, strict=True)
            ]
        print_table(header, rows)


LOG_PAGE = 1000


@jobs.command("logs")
@click.argument("job_id", type=int)
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Keep printing new output until the job ends, then its final status.",
)
@click.option("--attempt", type=int, default=None, help="Only this attempt's output.")
@click.option("--stream", type=click.Choice(["stdout", "stderr"]), default=None,
              help="Only this stream.")  # fmt: skip
@click.option("--interval", type=click.FloatRange(0.05, 60), default=0.5, show_default=True,
              help="Seconds between polls with --follow.")  # fmt: skip
@reader_options
def jobs_logs(job_id: int, follow: bool, attempt: int | None, stream: str | None,
              interval: float, uri: str | None, token: str | None) -> None:  # fmt: skip
    """Print a job's stored output (stdout and stderr, in order).

    With --follow, waits for the job to end, prints its final status on stderr
    ("job 7 failed: exit code 1, failure oom: <hint>") and exits with status 0 when the job
    succeeded, 1 when it ended otherwise (failed, crashed, timed_out, cancelled). Exit
    status 2 is an error of this command (no such job, store unreachable).
    --uri may be a dashboard's http://host:port (with --token or TRACKER_TOKEN).
    """
    reader = open_reader(uri, token)
    reader.job(job_id)  # NotFound for a bad id
    last = 0
    while True:
        last = _print_logs(reader, job_id, last, attempt, stream)
        if not follow:
            return
        job = reader.job(job_id)
        if job.is_final:
            _print_logs(reader, job_id, last, attempt, stream)  # written just before the end
            click.echo(final_status_line(job), err=True)
            sys.exit(0 if job.status == "succeeded" else 1)
        time.sleep(interval)


def _print_logs(
    reader: Reader, job_id: int, after: int, attempt: int | None, stream: str | None
) -> int:
    """Print every chunk after ``after``; returns the id of the last one printed."""
    while True:
        chunks = reader.logs_after(job_id, after, attempt, stream, LOG_PAGE)
        for chunk in chunks:
            click.echo(chunk.text, nl=False)
            after = chunk.id
        sys.stdout.flush()
        if len(chunks) < LOG_PAGE:
            return after


def final_status_line(job: JobInfo) -> str:
    """``job 7 succeeded`` or ``job 7 failed: exit code 1, failure oom: <hint>``."""
    details = []
    if job.exit_code is not None:
        details.append(f"exit code {job.exit_code}")
    if job.failure_class and job.failure_class != job.status:
        details.append(f"failure {job.failure_class}")
    text = f"job {job.id} {job.status}"
    if details:
        text += ": " + ", ".join(details)
    if job.failure_hint:
        text += f" ({job.failure_hint})"
    return text


@jobs.command("cancel")
@click.argument("job_ids", type=int, nargs=-1, required=True)
@uri_option
@admin_token_option
@json_option
def jobs_cancel(job_ids: tuple[int, ...], uri: str | None, token: str | None,
                as_json: bool) -> None:  # fmt: skip
    """Cancel jobs: a queued job at once; a running one is stopped by its worker (SIGTERM,
    then SIGKILL after the worker's grace period).

    --uri may be a dashboard's http://host:port (with an admin --token or TRACKER_TOKEN).
    """
    from tracker.store.jobs import cancel

    if is_http(uri):
        from tracker.cli.remote_submit import cancel_remote

        assert uri is not None  # is_http says so; for mypy
        results = cancel_remote(uri, token, job_ids)
    else:
        store = open_store(uri)
        results = {job_id: cancel(store, job_id) for job_id in job_ids}
    if as_json:
        echo_json({str(k): v for k, v in results.items()})
        return
    for job_id, result in results.items():
        text = {"cancelled": "cancelled", "cancel_requested": "cancel requested (running)"}.get(
            result.outcome, f"not cancelled: already {result.status}"
        )
        click.echo(f"job {job_id}: {text}")


@jobs.command("requeue")
@click.argument("job_id", type=int)
@uri_option
@json_option
def jobs_requeue(job_id: int, uri: str | None, as_json: bool) -> None:
    """Queue a finished job again for one more attempt (it resumes its run)."""
    from tracker.store.jobs import requeue

    job = requeue(open_store(uri), job_id, reason="requeued by hand")
    if as_json:
        echo_json(job)
    else:
        click.echo(f"job {job.id} queued again (attempt {job.attempt + 1} next)")


# ------------------------------------------------------------------------ workers


@click.group(cls=SuggestingGroup)
def workers() -> None:
    """Workers registered in the store."""


@workers.command("ls")
@click.option("--all", "include_stopped", is_flag=True, help="Include stopped workers.")
@click.option("--live", is_flag=True, help="Leave out lost workers (no heartbeat for 60 s).")
@reader_options
@json_option
def workers_ls(include_stopped: bool, live: bool, uri: str | None, token: str | None,
               as_json: bool) -> None:  # fmt: skip
    """List workers (lost ones with status 'lost'): host, what runs their jobs (EXECUTOR:
    local, or slurm for a dispatcher), GPUs, how many jobs each runs (RUNNING, of at most
    MAX) and which (JOBS, as #id), last heartbeat.

    --uri may be a dashboard's http://host:port (with --token or TRACKER_TOKEN).
    """
    found = open_reader(uri, token).workers(include_stopped, not live)
    if as_json:
        echo_json(found)
        return
    rows = [
        (w.id, w.host, w.pid, w.executor, _gpus_cell(w), w.max_jobs, w.status,
         len(w.running_jobs), ", ".join(f"#{j}" for j in w.running_jobs) or "-",
         fmt_time(w.heartbeat_at))
        for w in found
    ]  # fmt: skip
    headers = (
        "ID", "HOST", "PID", "EXECUTOR", "GPUS", "MAX", "STATUS", "RUNNING", "JOBS", "HEARTBEAT"
    )  # fmt: skip
    print_table(headers, rows)


def _gpus_cell(worker: WorkerInfo) -> str:
    if worker.executor != "local":
        return "(scheduler)"  # the cluster's GPUs, which its scheduler hands out
    return ",".join(str(g["index"]) for g in worker.gpus) or "none"


@workers.command("check")
@click.option("--host", default=None, help="Host whose worker to check (default: this one).")
@click.option("--max-age", default=60.0, show_default=True, type=click.FloatRange(1, 86_400),
              help="Seconds since its last heartbeat that still count as alive.")  # fmt: skip
@reader_options
def workers_check(host: str | None, max_age: float, uri: str | None, token: str | None) -> None:
    """Exit 0 when a worker on this host (or --host) is running or draining and sent a
    heartbeat within --max-age seconds, else 1: a container health check for `tracker
    worker` (docker/compose.yaml uses it)."""
    import socket

    wanted = host or socket.gethostname()
    now = time.time()
    found = open_reader(uri, token).workers(True, True)  # stopped ones too, to name them
    alive = [w for w in found if w.host == wanted and w.status in ("running", "draining")
             and now - w.heartbeat_at <= max_age]  # fmt: skip
    if not alive:
        seen = ", ".join(f"{w.id} ({w.status})" for w in found if w.host == wanted) or "none"
        raise click.ClickException(
            f"no live worker on host {wanted!r} (heartbeat within {max_age:g} s); "
            f"its workers: {seen}"
        )
    click.echo(f"ok: {', '.join(w.id for w in alive)}")
