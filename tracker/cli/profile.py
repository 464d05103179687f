"""``tracker profile RUN``: ask a running run to profile its next N steps, wait for the trace,
and say where the time goes.

Against the database (``--uri`` a SQLite or PostgreSQL URL, or the store found as for every
command) through :mod:`tracker.store.profiles` and :mod:`tracker.store.profile_views`;
against a dashboard (``--uri http://host:port``) through its API (``web/API.md``: Profiles;
asking needs an ``admin`` token, reading a ``log`` one). The run's client takes the request
on its next heartbeat (about every 10 s), profiles the steps and stores the trace; the
summary is computed when first read.

Errors (exit status 2 with the message): a run that is not running, one that already has an
open profile, a bad --steps or --ranks (the rule of :mod:`tracker.rules.profiles`), an
unknown run or profile. ``--wait`` past ``--timeout``, or a profile that failed: exit 1.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import click

from tracker.cli.common import echo_json, open_store, print_table
from tracker.cli.profile_text import detail_lines, list_rows, progress_line
from tracker.cli.reading import reader_options
from tracker.cli.remote import is_http
from tracker.errors import TrackerError

__all__ = ["profile"]

RETRY_FOR_S = 5.0  # as the CLI's other requests: a restarting dashboard is asked again
POLL_S = 1.0


class Profiles(Protocol):
    def request(self, run_id: int, steps: int, ranks: str) -> dict[str, Any]: ...

    def list(self, run_id: int) -> list[dict[str, Any]]: ...

    def detail(self, run_id: int, profile_id: int) -> dict[str, Any]: ...


class StoreProfiles:
    """Profiles read and asked for in the database directly."""

    def __init__(self, uri: str | None) -> None:
        self.store = open_store(uri)

    def request(self, run_id: int, steps: int, ranks: str) -> dict[str, Any]:
        from tracker.store.profiles import request_profile

        return request_profile(self.store, run_id, steps, ranks, by="cli").json()

    def list(self, run_id: int) -> list[dict[str, Any]]:
        from tracker.store.profiles import list_profiles

        return [p.json() for p in list_profiles(self.store, run_id)]

    def detail(self, run_id: int, profile_id: int) -> dict[str, Any]:
        from tracker.store.profile_views import detail

        return detail(self.store, run_id, profile_id)


class HttpProfiles:
    """Profiles through a dashboard's API."""

    def __init__(self, uri: str, token: str | None) -> None:
        from tracker.client.http import ApiClient

        self.client = ApiClient(uri, token, retry_for=RETRY_FOR_S)

    def _doc(self, method: str, path: str, key: str, **kwargs: Any) -> Any:
        doc = self.client.call(method, path, **kwargs)
        if not isinstance(doc, dict) or key not in doc:
            raise TrackerError(
                f"{self.client.base_url} answered {method} {path} with something that is not "
                "the tracker's JSON: is this a tracker dashboard (`tracker ui`)?"
            )
        return doc

    def request(self, run_id: int, steps: int, ranks: str) -> dict[str, Any]:
        from tracker.rules import jsonvalues

        data = jsonvalues.dumps({"steps": steps, "ranks": ranks}).encode()
        doc = self._doc("POST", f"/runs/{run_id}/profiles", "profile", data=data,
                        headers={"Content-Type": "application/json"}, idempotent=False)  # fmt: skip
        return dict(doc["profile"])

    def list(self, run_id: int) -> list[dict[str, Any]]:
        doc = self._doc("GET", f"/runs/{run_id}/profiles", "profiles", idempotent=True)
        return list(doc["profiles"])

    def detail(self, run_id: int, profile_id: int) -> dict[str, Any]:
        path = f"/runs/{run_id}/profiles/{profile_id}"
        return dict(self._doc("GET", path, "profile", idempotent=True))


def _profiles(uri: str | None, token: str | None) -> Profiles:
    if uri is not None and is_http(uri):
        return HttpProfiles(uri, token)
    return StoreProfiles(uri)


def _wait(source: Profiles, run_id: int, profile_id: int, timeout: float,
          quiet: bool) -> dict[str, Any]:  # fmt: skip
    """Poll until the profile is stored or failed, printing each change of its progress."""
    deadline = time.monotonic() + timeout
    said = None
    while True:
        found = source.detail(run_id, profile_id)
        line = progress_line(found["profile"])
        if line != said and not quiet:
            click.echo(line, err=True)
            said = line
        if found["profile"]["state"] in ("stored", "failed"):
            return found
        if time.monotonic() + POLL_S > deadline:
            raise click.ClickException(
                f"profile {profile_id} of run {run_id} is still {found['profile']['state']} "
                f"after {timeout:g} s (--timeout): is the run still logging steps? "
                f"Look again with `tracker profile {run_id} --show {profile_id}`"
            )
        time.sleep(POLL_S)


def _show(found: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(found)
    else:
        for line in detail_lines(found):
            click.echo(line)


@click.command("profile")
@reader_options
@click.argument("run_id", metavar="RUN", type=int)
@click.option("--steps", type=int, default=20, show_default=True,
              help="How many steps to profile (1 to 500).")  # fmt: skip
@click.option("--ranks", type=click.Choice(["0", "all"]), default="0", show_default=True,
              help="Profile rank 0 only, or every rank of a distributed job.")  # fmt: skip
@click.option("--wait", is_flag=True, help="Wait for the trace, then print its summary.")
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="With --wait: give up after this many seconds (exit status 1).")  # fmt: skip
@click.option("--list", "listing", is_flag=True, help="List the run's profiles instead.")
@click.option("--show", "show", type=int, metavar="PID", default=None,
              help="Show profile PID's summary instead of asking for a new one.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def profile(uri: str | None, token: str | None, run_id: int, steps: int, ranks: str,
            wait: bool, timeout: float, listing: bool, show: int | None,
            as_json: bool) -> None:  # fmt: skip
    """Profile the next N steps of a running run, and say where the time goes.

    The run's client takes the request on its next heartbeat (about every 10 s), profiles
    STEPS steps with torch.profiler and stores the trace (download it from the run's page
    for Perfetto). --wait prints the summary: the likely cause of slow steps and what to
    try, the time split, host syncs per step and the top ops. --list and --show PID read
    the run's profiles. --uri may be a dashboard's http://host:port (an admin --token to
    ask, a log one to read).
    """
    if listing and show is not None:
        raise click.UsageError("give --list or --show PID, not both")
    source = _profiles(uri, token)
    if listing:
        listed = source.list(run_id)
        if as_json:
            echo_json(listed)
        elif not listed:
            click.echo(f"run {run_id} has no profiles: ask for one with `tracker profile "
                       f"{run_id}`")  # fmt: skip
        else:
            print_table(["ID", "STATE", "STEPS", "REQUESTED", "BY", "TRACES"], list_rows(listed))
        return
    if show is not None:
        _show(source.detail(run_id, show), as_json)
        return
    asked = source.request(run_id, steps, ranks)
    if not wait:
        if as_json:
            echo_json(asked)
        else:
            click.echo(f"requested profile {asked['id']} of run {run_id}: the next {steps} "
                       f"steps, rank{'s: all' if ranks == 'all' else ' 0'}; the run takes it "
                       f"on its next heartbeat (~10 s). See it: tracker profile {run_id} "
                       f"--show {asked['id']}")  # fmt: skip
        return
    found = _wait(source, run_id, asked["id"], timeout, quiet=as_json)
    _show(found, as_json)
    if found["profile"]["state"] == "failed":
        raise SystemExit(1)
