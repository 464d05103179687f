"""Helpers shared by the CLI commands: opening the store, printing tables and JSON.

Opening the store: :func:`open_store` never creates one unless asked (``create=True``, for
the commands that write: submit, sweep, worker, schedule add, token create), so a read
command given a mistyped SQLite path fails with NotFound naming the path instead of
creating an empty database there. With the global ``tracker -v`` every command prints the
store it opened (password hidden) on stderr.

Which store: ``--uri``, else ``TRACKER_URI``, else the nearest ``.tracker/tracker.db`` here or
above, else the store of the one running dashboard (said on stderr), else
``./.tracker/tracker.db`` (:mod:`tracker.discovery`, the same rule as ``tracker.init``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any

import click

from tracker.entities import JobInfo, ScheduleInfo
from tracker.rules import jsonvalues
from tracker.rules.secrets import env_keys_only

uri_option = click.option(
    "--uri",
    envvar="TRACKER_URI",
    default=None,
    help="Store URL (default: TRACKER_URI, else the nearest .tracker/tracker.db here or "
    "above, else the one running dashboard's store, else ./.tracker/tracker.db). SQLite: "
    "sqlite:///relative/path.db (relative to the current directory) or "
    "sqlite:////absolute/path.db.",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


VERBOSE_KEY = "tracker.verbose"


class Duration(click.ParamType):
    """A duration option (``90s``, ``45m``, ``2h``, ``30d``, ``1h30m`` or seconds) as float
    seconds (:func:`tracker.rules.units.parse_duration`); ``allow_zero`` accepts ``0``."""

    name = "duration"

    def __init__(self, *, allow_zero: bool = False) -> None:
        self.allow_zero = allow_zero

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int | float):
            return float(value)
        from tracker.rules.units import DurationError, parse_duration

        try:
            return parse_duration(str(value), allow_zero=self.allow_zero)
        except DurationError as exc:
            self.fail(exc.message, param, ctx)


def open_store(uri: str | None, *, create: bool = False) -> Any:
    """The Store for ``--uri`` / ``TRACKER_URI``, else the one :mod:`tracker.discovery`
    finds (a store adopted from the running dashboard is named on stderr).

    Raises:
        NotFound: ``create`` is False and the SQLite file does not exist (nothing created).
        InvalidInput: a malformed URL (the message shows the SQLite forms).
        StoreUnavailable, SchemaError: as :class:`tracker.store.Store`.
    """
    from tracker.cli.remote import refuse_http
    from tracker.discovery import locate
    from tracker.store import Store

    refuse_http(uri)  # a dashboard's http:// address: say which commands read over HTTP
    choice = locate(uri)
    if choice.how == "server" and choice.server is not None:
        click.echo(f"store: {store_label(choice.uri)}, the store of the dashboard running at "
                   f"{choice.server.url} (no .tracker/ here or above)", err=True)  # fmt: skip
    else:
        say_store(choice.uri)
    return Store(choice.uri, create=create)


def say_store(uri: str) -> None:
    """Print ``store: URL`` on stderr when the global ``-v`` was given."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().meta.get(VERBOSE_KEY):
        click.echo(f"store: {store_label(uri)}", err=True)


def store_label(uri: str) -> str:
    """``uri`` as shown to the user: password hidden, a relative SQLite path made absolute."""
    import os

    from tracker.rules.store_uri import redact, sqlite_path

    path = sqlite_path(uri)
    if path is not None:
        return f"sqlite:///{os.path.abspath(path)}"
    return redact(uri)


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON: dataclasses as objects, NaN and ±Inf in the wire
    form of :mod:`tracker.rules.jsonvalues`. Jobs and schedules show their env names only
    (``env_keys``), never the values, as the dashboard does: printed JSON ends up in pastes
    and CI logs."""
    click.echo(jsonvalues.dumps(jsonvalues.encode(_public(value)), indent=2, sort_keys=True))


def _public(value: Any) -> Any:
    if isinstance(value, JobInfo):
        return env_keys_only(dataclasses.asdict(value))
    if isinstance(value, ScheduleInfo):
        out = dataclasses.asdict(value)
        out["spec"] = env_keys_only(value.spec)
        return out
    if isinstance(value, list | tuple):
        return [_public(v) for v in value]
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items()}
    return value


def fmt_time(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, cap: int | None = 60
) -> None:
    """A plain aligned text table (columns as wide as their widest cell, cut at ``cap``
    characters; ``cap=None`` never cuts, for cells such as paths)."""
    cells = [[str(h) for h in headers]] + [[_cell(c, cap) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for i, row in enumerate(cells):
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            click.echo("  ".join("-" * w for w in widths))


def _cell(value: Any, cap: int | None = 60) -> str:
    text = fmt_value(value)
    return text if cap is None or len(text) <= cap else text[: cap - 3] + "..."
