"""``tracker schedule add|ls|pause|resume|delete`` and ``tracker scheduler``."""

from __future__ import annotations

import logging
import signal
from typing import Any

import click

from tracker.cli.common import echo_json, fmt_time, json_option, open_store, print_table, uri_option
from tracker.cli.jobs import _job_kwargs, job_options, single_overrides, spec_from_options
from tracker.cli.script_args import ScriptCommand
from tracker.cli.suggest import SuggestingGroup
from tracker.cli.worker import LOG_FORMAT, housekeeping_options, make_housekeeping_options
from tracker.wakeup import Wakeup


def _local_timezone() -> str:
    try:
        import tzlocal

        return str(tzlocal.get_localzone_name() or "UTC")
    except Exception:  # no tzlocal or an unnamed local zone: UTC is a safe default
        return "UTC"


@click.group(cls=SuggestingGroup)
def schedule() -> None:
    """Cron schedules that queue a job at each fire time (exactly once, however many
    schedulers or workers run)."""


@schedule.command("add", cls=ScriptCommand, context_settings={"allow_interspersed_args": True})
@click.argument("cron")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@job_options
@click.option("--schedule-name", "schedule_name", default=None, help="Name of the schedule.")
@click.option("--timezone", default=None,
              help="Time zone of the cron fields (default: this machine's).")  # fmt: skip
@uri_option
@json_option
def schedule_add(cron: str, command: tuple[str, ...], overrides: tuple[str, ...],
                 schedule_name: str | None, timezone: str | None, uri: str | None,
                 as_json: bool, **kwargs: Any) -> None:  # fmt: skip
    """Queue SCRIPT.py (or -- PROGRAM ARGS) at every CRON time.

    CRON has 5 fields, minute hour day month weekday (0 or 7 = Sunday); a 6th
    leading field gives seconds.

    \b
        tracker schedule add "0 2 * * *" train.py -c lr=3e-4     # 02:00 every night
        tracker schedule add "30 6 * * 1-5" train.py              # weekdays at 06:30
    """
    from tracker.store.schedules import add_schedule

    spec = spec_from_options(command, single_overrides(overrides), **_job_kwargs(kwargs))
    store = open_store(uri, create=True)
    info = add_schedule(
        store, cron, spec, name=schedule_name, timezone=timezone or _local_timezone()
    )
    if as_json:
        echo_json(info)
    else:
        click.echo(f"schedule {info.id} added; next fire {fmt_time(info.next_fire_at)}")


@schedule.command("ls")
@uri_option
@json_option
def schedule_ls(uri: str | None, as_json: bool) -> None:
    """List schedules with their next fire time."""
    from tracker.store.schedules import list_schedules

    found = list_schedules(open_store(uri))
    if as_json:
        echo_json(found)
        return
    rows = [
        (s.id, s.name, s.cron, s.timezone, "paused" if s.paused else "active",
         fmt_time(s.last_fire_at), fmt_time(s.next_fire_at))
        for s in found
    ]  # fmt: skip
    print_table(("ID", "NAME", "CRON", "TZ", "STATE", "LAST FIRE", "NEXT FIRE"), rows)


def _set_paused(schedule_id: int, paused: bool, uri: str | None) -> None:
    from tracker.store.schedules import set_paused

    info = set_paused(open_store(uri), schedule_id, paused)
    state = "paused" if info.paused else f"active; next fire {fmt_time(info.next_fire_at)}"
    click.echo(f"schedule {info.id}: {state}")


@schedule.command("pause")
@click.argument("schedule_id", type=int)
@uri_option
def schedule_pause(schedule_id: int, uri: str | None) -> None:
    """Stop a schedule from firing."""
    _set_paused(schedule_id, True, uri)


@schedule.command("resume")
@click.argument("schedule_id", type=int)
@uri_option
def schedule_resume(schedule_id: int, uri: str | None) -> None:
    """Fire again from the next cron time (times missed while paused are skipped)."""
    _set_paused(schedule_id, False, uri)


@schedule.command("delete")
@click.argument("schedule_id", type=int)
@uri_option
def schedule_delete(schedule_id: int, uri: str | None) -> None:
    """Delete a schedule; the jobs it queued stay."""
    from tracker.store.schedules import delete_schedule

    delete_schedule(open_store(uri), schedule_id)
    click.echo(f"schedule {schedule_id} deleted")


@click.command()
@click.option(
    "--no-schedules",
    is_flag=True,
    help="Only reap expired leases and silent runs; do not fire cron schedules or drive sweeps.",
)
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
@housekeeping_options
@uri_option
def scheduler(
    no_schedules: bool,
    quiet: bool,
    reap_interval: float,
    retry_delay: float,
    max_retry_delay: float,
    run_stale_seconds: float,
    uri: str | None,
) -> None:
    """Run only the housekeeping: cron schedules, the sweep controller, the reaper for
    expired leases and silent runs, retries and pending reasons. Safe to run several; stops
    on SIGTERM or Ctrl-C."""
    from tracker.runner.housekeeping import run_housekeeping

    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format=LOG_FORMAT)
    options = make_housekeeping_options(
        reap_interval, retry_delay, max_retry_delay, run_stale_seconds, not no_schedules
    )
    stop = Wakeup()  # not a threading.Event: its set() in a handler can deadlock (wakeup.py)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run_housekeeping(open_store(uri, create=True), options, stop.wait)
