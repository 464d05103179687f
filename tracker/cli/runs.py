"""``tracker runs``: list, show and export runs."""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Any

import click

from tracker.cli.common import (
    echo_json,
    fmt_duration,
    fmt_time,
    fmt_value,
    json_option,
    open_store,
    print_table,
    uri_option,
)
from tracker.entities import RUN_STATUSES, RunInfo

if TYPE_CHECKING:  # the store (and SQLAlchemy) load only when a command runs
    from tracker.store import Store


@click.group()
def runs() -> None:
    """List, inspect and export runs."""


@runs.command("ls")
@uri_option
@click.option(
    "--filter",
    "-f",
    "query",
    default="",
    help="Only runs matching this query, in the language of the dashboard's search box "
    "(e.g. 'config.lr > 1e-3 and metrics.val/acc > 0.9').",
)
@click.option("--project", "-p", help="Only runs of this project.")
@click.option("--status", "-s", type=click.Choice(RUN_STATUSES), help="Only runs in this status.")
@click.option("--tag", "-t", help="Only runs with this tag.")
@click.option("--limit", "-n", default=50, show_default=True, help="At most this many runs.")
@json_option
def ls(
    uri: str | None, query: str, project: str | None, status: str | None, tag: str | None,
    limit: int, as_json: bool,
) -> None:  # fmt: skip
    """List runs, newest first, with their config and last metric values.

    A query that does not parse, or compares impossibly, is an error (exit status 2).
    """
    found = _search(open_store(uri), query, project, status, tag, limit)
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo("no runs match", err=True)
        return
    print_table(
        ["id", "project", "name", "status", "started", "duration", "config", "last metrics"],
        [_row(r) for r in found],
    )


def _search(
    store: Store, query: str, project: str | None, status: str | None, tag: str | None,
    limit: int,
) -> list[RunInfo]:  # fmt: skip
    """Up to ``limit`` runs, newest first, found by the dashboard's runs search a page (at
    most MAX_LIMIT runs) at a time."""
    from tracker.store.run_reads import runs_by_ids
    from tracker.store.run_search import MAX_LIMIT, RunSearch, search_runs

    spec = RunSearch(query, project, status, (tag,) if tag else (), sort="id", order="desc")
    ids: list[int] = []
    while len(ids) < limit:
        size = min(MAX_LIMIT, limit - len(ids))
        page = search_runs(store, dataclasses.replace(spec, limit=size, offset=len(ids)))
        ids.extend(r.id for r in page.runs)
        if len(page.runs) < size:
            break
    return runs_by_ids(store, ids)


def _row(run: RunInfo) -> list[Any]:
    status = run.status + (f" ({run.failure_class})" if run.failure_class else "")
    return [
        run.id,
        run.project,
        run.name,
        status,
        fmt_time(run.started_at),
        fmt_duration(run.duration),
        _flat_summary(run.config),
        _metrics_summary(run.last_metrics),
    ]


def _flat_summary(config: dict[str, Any]) -> str:
    from tracker.rules.config import flatten

    return " ".join(f"{k}={fmt_value(v)}" for k, v in flatten(config).items())


def _metrics_summary(metrics: dict[str, float]) -> str:
    shown = {k: v for k, v in sorted(metrics.items()) if not k.startswith("sys/")}
    return " ".join(f"{k}={fmt_value(v)}" for k, v in shown.items())


@runs.command()
@uri_option
@click.argument("run_id", type=int)
@json_option
def show(uri: str | None, run_id: int, as_json: bool) -> None:
    """Show one run: status, config, last metrics, checkpoints and events."""
    store = open_store(uri)
    run = store.get_run(run_id)
    checkpoints = store.list_checkpoints(run_id)
    events = store.list_events(run_id)
    if as_json:
        echo_json({"run": run, "checkpoints": checkpoints, "events": events})
        return
    status = run.status + (
        f" ({run.failure_class}: {run.failure_hint})" if run.failure_class else ""
    )
    for label, value in [
        ("run", f"{run.id}  {run.project}/{run.name}"),
        ("status", status),
        ("error", run.error or "-"),
        ("started", fmt_time(run.started_at)),
        ("ended", fmt_time(run.ended_at)),
        ("duration", fmt_duration(run.duration)),
        ("host", f"{run.host or '-'} (pid {run.pid or '-'})"),
        ("git commit", run.git_commit or "-"),
        ("command", " ".join(run.command or []) or "-"),
        ("tags", ", ".join(run.tags) or "-"),
    ]:
        click.echo(f"{label:>11}: {value}")
    click.echo("\nconfig:")
    click.echo(json.dumps(run.config, indent=2, sort_keys=True))
    click.echo("\nlast metrics:")
    for key, value in sorted(run.last_metrics.items()):
        click.echo(f"  {key} = {fmt_value(value)}")
    if checkpoints:
        click.echo("\ncheckpoints:")
        print_table(
            ["step", "bytes", "state", "sha256", "metrics", "path"],
            [[c.step, c.bytes, c.state, c.sha256[:12], c.metrics, c.path] for c in checkpoints],
        )
    diagnoses = [e for e in events if e.kind == "diagnosis"]
    if diagnoses:  # stored by the doctor (tracker.store.diagnoses)
        click.echo("\nhealth:")
        for event in sorted(diagnoses, key=lambda e: (e.data or {}).get("step") or 0):
            d = event.data or {}
            click.echo(
                f"  [{d.get('severity')}] {d.get('code')} at step {d.get('step')}: {event.message}"
            )
            click.echo(f"      try: {d.get('hint')}")
    events = [e for e in events if e.kind != "diagnosis"]
    if events:
        click.echo("\nevents:")
        for event in events:
            click.echo(f"  {fmt_time(event.at)}  {event.kind}: {event.message}")


@runs.command()
@uri_option
@click.argument("run_id", type=int)
@click.option("--format", "fmt", type=click.Choice(["csv"]), default="csv", show_default=True)
@click.option("--key", "keys", multiple=True, help="Only these metric keys (repeatable).")
@click.option("--output", "-o", type=click.File("w"), default="-", help="File (default stdout).")
def export(uri: str | None, run_id: int, fmt: str, keys: tuple[str, ...], output: Any) -> None:
    """Export every metric point of a run as CSV: key, step, wall_time, value.

    NaN and infinities are written as nan, inf and -inf.
    """
    store = open_store(uri)
    store.get_run(run_id)  # NotFound with a clear message
    wanted = list(keys) or store.metric_keys(run_id)
    writer = csv.writer(output, lineterminator="\n")
    writer.writerow(["key", "step", "wall_time", "value"])
    count = 0
    for key in wanted:
        for point in store.metric_history(run_id, key):
            writer.writerow([key, point.step, f"{point.wall_time:.3f}", repr(point.value)])
            count += 1
    if output is not sys.stdout:
        click.echo(f"{count} points written", err=True)
