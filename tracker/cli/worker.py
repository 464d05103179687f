"""``tracker worker``: run queued jobs on this host (see :mod:`tracker.runner.worker`)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import click

from tracker.cli.common import open_store, uri_option

if TYPE_CHECKING:
    from tracker.runner.scheduler import SweepOptions

LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def sweep_options(f: click.decorators.FC) -> click.decorators.FC:
    """Options of the housekeeping both ``worker`` and ``scheduler`` run."""
    decorators = [
        click.option("--sweep-interval", type=click.FloatRange(0.05, 3600), default=5.0,
                     show_default=True,
                     help="Seconds between sweeps for expired leases and silent runs."),
        click.option("--retry-delay", type=click.FloatRange(0, 86400), default=10.0,
                     show_default=True,
                     help="Backoff before the first retry; doubles with each attempt."),
        click.option("--max-retry-delay", type=click.FloatRange(0, 86400), default=600.0,
                     show_default=True, help="Longest backoff between retries."),
        click.option("--run-stale-seconds", type=click.FloatRange(1, 10**6), default=120.0,
                     show_default=True,
                     help="A running run without heartbeats this long is marked crashed."),
    ]  # fmt: skip
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def make_sweep_options(
    sweep_interval: float,
    retry_delay: float,
    max_retry_delay: float,
    run_stale_seconds: float,
    schedules: bool = True,
) -> SweepOptions:
    from tracker.runner.queue import RetryPolicy
    from tracker.runner.scheduler import SweepOptions

    return SweepOptions(
        interval_s=sweep_interval,
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
    "its jobs to the sweeper.",
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
    "dashboard's http://host:port.",
)
@click.option("--name", "worker_id", default=None, help="Worker id (default: host-pid-random).")
@click.option(
    "--no-housekeeping",
    is_flag=True,
    help="Do not run the sweeper and cron schedules here (a `tracker scheduler` does).",
)
@click.option("--once", is_flag=True, help="Run one job, then exit.")
@click.option("--exit-when-idle", is_flag=True, help="Exit when no job is ready to claim.")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
@sweep_options
@uri_option
def worker(gpus: str, max_jobs: int, lease_seconds: float, poll_interval: float,
           grace_seconds: float, log_limit: int, job_uri: str | None, worker_id: str | None,
           no_housekeeping: bool, once: bool, exit_when_idle: bool, quiet: bool,
           sweep_interval: float, retry_delay: float, max_retry_delay: float,
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
        sweep=make_sweep_options(sweep_interval, retry_delay, max_retry_delay, run_stale_seconds),
        log_limit=log_limit,
        job_uri=job_uri,
    )
    sys.exit(run_worker(open_store(uri), options))
