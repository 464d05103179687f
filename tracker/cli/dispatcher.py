"""``tracker dispatcher``: hand queued jobs to Slurm (see :mod:`tracker.runner.dispatcher`)."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from tracker.cli.common import open_store, uri_option
from tracker.cli.worker import LOG_FORMAT, housekeeping_options, make_housekeeping_options
from tracker.errors import InvalidInput


@click.command()
@click.option(
    "--executor",
    type=click.Choice(["slurm"]),
    default="slurm",
    show_default=True,
    help="The cluster scheduler jobs go to.",
)
@click.option("--partition", default=None, help="Slurm partition (sbatch --partition).")
@click.option("--account", default=None, help="Slurm account (sbatch --account).")
@click.option("--qos", default=None, help="Slurm QOS (sbatch --qos).")
@click.option(
    "--sbatch",
    "extra",
    multiple=True,
    metavar="--OPTION[=VALUE]",
    help="Extra sbatch option for every job (allow-listed); repeatable.",
)
@click.option(
    "--template",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Site template: the head of every batch script (#SBATCH lines, module "
    'loads); the job\'s command follows as `exec "$@"`.',
)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False),
    default=".tracker/slurm",
    show_default=True,
    help="Where Slurm writes each job's stdout/stderr; must be shared with the "
    "compute nodes (the dispatcher streams the files into the store).",
)
@click.option(
    "--grace-seconds",
    type=click.IntRange(0, 3600),
    default=60,
    show_default=True,
    help="Slurm sends SIGTERM this long before the time limit (checkpoint, flush).",
)
@click.option(
    "--max-jobs",
    type=click.IntRange(1, 100_000),
    default=100,
    show_default=True,
    help="Jobs handed to Slurm at once (pending or running).",
)
@click.option(
    "--lease-seconds",
    type=click.FloatRange(0.5, 86400),
    default=300.0,
    show_default=True,
    help="Lease length; renewed every third of it. Jobs keep running in Slurm while the "
    "dispatcher is down: a restart within this time adopts them, after it the reaper "
    "crashes and retries them.",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(0.1, 600),
    default=5.0,
    show_default=True,
    help="Seconds between squeue polls and claims.",
)
@click.option(
    "--log-limit",
    type=click.IntRange(1024, 10**10),
    default=10_000_000,
    show_default=True,
    help="Most characters of output kept per job.",
)
@click.option(
    "--job-uri",
    default=None,
    help="TRACKER_URI given to jobs (default: this store), e.g. the dashboard's URL: each "
    "job then gets a token of its own for its run (never this dispatcher's TRACKER_TOKEN).",
)
@click.option(
    "--project-root",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="The project on the shared filesystem: relative job directories run there.",
)
@click.option(
    "--snapshot-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where jobs submitted with a code snapshot run, a fresh copy per attempt; it must be "
    "on the file system the nodes share. Default: LOG_DIR/snapshots.",
)
@click.option("--name", "dispatcher_id", default=None, help="Dispatcher id (lease owner).")
@click.option(
    "--no-housekeeping", is_flag=True, help="Do not run the lease reaper and cron schedules here."
)
@click.option("--once", is_flag=True, help="Exit once the first job has ended.")
@click.option(
    "--exit-when-idle", is_flag=True, help="Exit when nothing is queued and no job is in Slurm."
)
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
@housekeeping_options
@uri_option
def dispatcher(executor: str, partition: str | None, account: str | None, qos: str | None,
               extra: tuple[str, ...], template: str | None, log_dir: str, grace_seconds: int,
               max_jobs: int, lease_seconds: float, poll_interval: float, log_limit: int,
               job_uri: str | None, project_root: str | None, snapshot_dir: str | None,
               dispatcher_id: str | None, no_housekeeping: bool, once: bool,
               exit_when_idle: bool, quiet: bool,
               reap_interval: float, retry_delay: float, max_retry_delay: float,
               run_stale_seconds: float, uri: str | None, **_: Any) -> None:  # fmt: skip
    """Submit queued jobs to Slurm and mirror their state, logs and end into the tracker.

    Run it on a login node. It keeps no state of its own: stopping and restarting it
    leaves the jobs running in Slurm and adopts them again (nothing is submitted twice).
    """
    from tracker.rules.slurm import SlurmSite, check_extra_options
    from tracker.runner.dispatcher import DispatcherOptions, run_dispatcher
    from tracker.runner.slurm import SlurmExecutor

    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format=LOG_FORMAT)
    try:
        checked = check_extra_options(list(extra))
    except InvalidInput as exc:
        raise click.BadParameter(exc.message, param_hint="--sbatch") from None
    site = SlurmSite(
        partition=partition,
        account=account,
        qos=qos,
        template=Path(template).read_text() if template else None,
        extra=checked,
        grace_s=grace_seconds,
    )
    options = DispatcherOptions(
        max_jobs=max_jobs,
        lease_s=lease_seconds,
        poll_interval=poll_interval,
        dispatcher_id=dispatcher_id,
        housekeeping=not no_housekeeping,
        housekeeping_options=dataclasses.replace(
            make_housekeeping_options(
                reap_interval, retry_delay, max_retry_delay, run_stale_seconds
            ),
            pending_reasons=False,
        ),
        log_limit=log_limit,
        job_uri=job_uri,
        once=once,
        exit_when_idle=exit_when_idle,
        project_root=project_root,
        snapshot_dir=os.path.abspath(snapshot_dir or os.path.join(log_dir, "snapshots")),
    )
    store = open_store(uri, create=True)
    sys.exit(run_dispatcher(store, SlurmExecutor(site, os.path.abspath(log_dir)), options))
