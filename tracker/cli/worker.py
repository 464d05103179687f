"""``tracker worker``: run queued jobs on this host (see :mod:`tracker.runner.worker`)."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from tracker.cli.common import open_store, uri_option
from tracker.rules.liveness import RUN_STALE_S

if TYPE_CHECKING:
    from tracker.runner.housekeeping import HousekeepingOptions

LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"


REAP_INTERVAL_S = 5.0


def housekeeping_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Options of the housekeeping both ``worker`` and ``scheduler`` run.

    ``--sweep-interval`` is the old name of ``--reap-interval``, hidden and kept so scripts
    keep working; the command receives one ``reap_interval``.
    """

    @functools.wraps(f)
    def command(*args: Any, reap_interval: float | None, sweep_interval: float | None,
                **kwargs: Any) -> Any:  # fmt: skip
        if reap_interval is None:
            reap_interval = REAP_INTERVAL_S if sweep_interval is None else sweep_interval
        return f(*args, reap_interval=reap_interval, **kwargs)

    decorators = [
        click.option("--reap-interval", type=click.FloatRange(0.05, 3600), default=None,
                     show_default=str(REAP_INTERVAL_S),
                     help="Seconds between passes of the reaper for expired leases and silent "
                          "runs."),
        click.option("--sweep-interval", type=click.FloatRange(0.05, 3600), default=None,
                     hidden=True, help="Deprecated name of --reap-interval."),
        click.option("--retry-delay", type=click.FloatRange(0, 86400), default=10.0,
                     show_default=True,
                     help="Backoff before the first retry; doubles with each attempt."),
        click.option("--max-retry-delay", type=click.FloatRange(0, 86400), default=600.0,
                     show_default=True, help="Longest backoff between retries."),
        click.option("--run-stale-seconds", type=click.FloatRange(1, 10**6),
                     default=RUN_STALE_S, show_default=True,
                     help="A running run without heartbeats this long is marked crashed, "
                     "ended at its last heartbeat (clients send one every 5 s)."),
    ]  # fmt: skip
    wrapped: Callable[..., Any] = command
    for decorator in reversed(decorators):
        wrapped = decorator(wrapped)
    return wrapped


def make_housekeeping_options(
    reap_interval: float,
    retry_delay: float,
    max_retry_delay: float,
    run_stale_seconds: float,
    schedules: bool = True,
) -> HousekeepingOptions:
    from tracker.runner.housekeeping import HousekeepingOptions
    from tracker.runner.retry import RetryPolicy

    return HousekeepingOptions(
        interval_s=reap_interval,
        run_stale_s=run_stale_seconds,
        schedules=schedules,
        policy=RetryPolicy(retry_delay, max(retry_delay, max_retry_delay)),
    )


@click.command()
@click.option(
    "--gpus",
    default="auto",
    show_default=True,
    help="GPUs to hand out: 'auto' (every GPU NVML sees), 'none' (CPU-only: runs only "
    "jobs asking for no GPU), or indices like 0,1.",
)
@click.option(
    "--max-jobs",
    type=click.IntRange(1, 1024),
    default=1,
    show_default=True,
    help="Jobs run at once.",
)
@click.option(
    "--lease-seconds",
    type=click.FloatRange(0.5, 86400),
    default=30.0,
    show_default=True,
    help="Lease length; renewed every third of it. A worker silent this long loses "
    "its jobs to the reaper.",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(0.01, 60),
    default=0.5,
    show_default=True,
    help="Seconds between claims while the queue is empty.",
)
@click.option(
    "--grace-seconds",
    type=click.FloatRange(0, 3600),
    default=10.0,
    show_default=True,
    help="After SIGTERM (cancel, timeout, shutdown), wait this long before SIGKILL.",
)
@click.option(
    "--log-limit",
    type=click.IntRange(1024, 10**10),
    default=10_000_000,
    show_default=True,
    help="Most characters of output kept per job; the oldest are trimmed.",
)
@click.option(
    "--job-uri",
    default=None,
    help="TRACKER_URI given to jobs (default: this worker's store), e.g. the "
    "dashboard's http://host:port: each job then gets a token of its own for its run "
    "(never this worker's TRACKER_TOKEN).",
)
@click.option(
    "--project-root",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="This host's copy of the project: jobs submitted with a relative directory "
    "(the default of `tracker submit`) run under it. Default: the current directory.",
)
@click.option(
    "--snapshot-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where jobs submitted with a code snapshot run, a fresh copy per attempt. "
    "Default: $XDG_CACHE_HOME/tracker/snapshots/store-<hash> (~/.cache/...), one per store.",
)
@click.option(
    "--env",
    "python_env",
    type=click.Choice(["worker", "venv"]),
    default="worker",
    show_default=True,
    help="Python of a job: this worker's ('worker'), or ('venv') an environment built once "
    "per requirements.txt / pyproject.toml of the job's project (it also sees this worker's "
    "packages); a project with neither runs with this worker's.",
)
@click.option(
    "--env-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where --env venv builds environments. Default: 'envs' beside --snapshot-dir.",
)
@click.option("--name", "worker_id", default=None, help="Worker id (default: host-pid-random).")
@click.option(
    "--no-housekeeping",
    is_flag=True,
    help="Do not run the lease reaper and cron schedules here (a `tracker scheduler` does).",
)
@click.option("--once", is_flag=True, help="Run one job, then exit.")
@click.option("--exit-when-idle", is_flag=True, help="Exit when no job is ready to claim.")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
@housekeeping_options
@uri_option
def worker(gpus: str, max_jobs: int, lease_seconds: float, poll_interval: float,
           grace_seconds: float, log_limit: int, job_uri: str | None, project_root: str | None,
           snapshot_dir: str | None, python_env: str, env_dir: str | None,
           worker_id: str | None,
           no_housekeeping: bool, once: bool, exit_when_idle: bool, quiet: bool,
           reap_interval: float, retry_delay: float, max_retry_delay: float,
           run_stale_seconds: float, uri: str | None) -> None:  # fmt: skip
    """Claim and run queued jobs on this host until stopped.

    Ctrl-C or SIGTERM drains: no new claims, SIGTERM to running jobs, SIGKILL after the
    grace period. A second signal kills them at once.
    """
    from tracker.runner.devices import Nvml, parse_gpus
    from tracker.runner.worker import WorkerOptions, run_worker

    try:
        parse_gpus(gpus, Nvml())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpus") from None
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format=LOG_FORMAT)
    options = WorkerOptions(
        gpus=gpus,
        max_jobs=max_jobs,
        lease_s=lease_seconds,
        poll_interval=poll_interval,
        grace_s=grace_seconds,
        once=once,
        exit_when_idle=exit_when_idle,
        worker_id=worker_id,
        housekeeping=not no_housekeeping,
        housekeeping_options=make_housekeeping_options(
            reap_interval, retry_delay, max_retry_delay, run_stale_seconds
        ),
        log_limit=log_limit,
        job_uri=job_uri,
        project_root=project_root,
        snapshot_dir=snapshot_dir,
        python_env=python_env,
        env_dir=env_dir,
    )
    sys.exit(run_worker(open_store(uri, create=True), options))
