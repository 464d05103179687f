"""``tracker runs``: list, show, export, delete and restore runs; tag, untag, rename, note and
star them (:mod:`tracker.cli.run_annotations`)."""

from __future__ import annotations

import csv
import json
import sys
from typing import Any

import click

from tracker.cli.common import (
    echo_json,
    fmt_duration,
    fmt_time,
    json_option,
    open_store,
    print_table,
    store_label,
    uri_option,
)
from tracker.cli.listing import config_cells, limit_option
from tracker.cli.reading import open_reader, reader_options
from tracker.cli.run_annotations import ANNOTATION_COMMANDS
from tracker.cli.suggest import SuggestingGroup
from tracker.entities import RUN_STATUSES, RunInfo
from tracker.errors import InvalidInput
from tracker.rules.display import format_metric
from tracker.rules.units import format_bytes


@click.group(cls=SuggestingGroup)
def runs() -> None:
    """List, inspect and export runs; tag, rename, annotate and star them."""


for _command in ANNOTATION_COMMANDS:
    runs.add_command(_command)


@runs.command("ls")
@reader_options
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
@limit_option("runs")
@click.option(
    "--deleted",
    is_flag=True,
    help="Only deleted runs (hidden otherwise; the same as --filter 'deleted == true').",
)
@json_option
def ls(
    uri: str | None, token: str | None, query: str, project: str | None, status: str | None,
    tag: str | None, limit: int, deleted: bool, as_json: bool,
) -> None:  # fmt: skip
    """List runs, newest first, with their config and last metric values.

    The config column shows the keys whose values differ between the listed runs (every key
    when none differs); --json prints whole configs.

    Deleted runs are left out unless --deleted (or a filter naming deleted) asks for them.
    --uri may be a dashboard's http://host:port (with --token or TRACKER_TOKEN).
    A query that does not parse, or compares impossibly, is an error (exit status 2).
    """
    if deleted:
        query = f"({query}) and deleted == true" if query.strip() else "deleted == true"
    reader = open_reader(uri, token)
    found = reader.search_runs(query, project, status, tag, limit)
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo(f"no runs match in {store_label(reader.where)}", err=True)
        return
    configs = config_cells([r.config for r in found])
    print_table(
        ["id", "project", "name", "status", "started", "duration", "config", "last metrics"],
        [_row(r, config) for r, config in zip(found, configs, strict=True)],
    )


def _row(run: RunInfo, config: str) -> list[Any]:
    status = run.status + (f" ({run.failure_class})" if run.failure_class else "")
    return [
        run.id,
        run.project,
        run.name,
        status,
        fmt_time(run.started_at),
        fmt_duration(run.duration),
        config,
        _metrics_summary(run.last_metrics),
    ]


def _metrics_summary(metrics: dict[str, float]) -> str:
    shown = {k: v for k, v in sorted(metrics.items()) if not k.startswith("sys/")}
    return " ".join(f"{k}={format_metric(k, v)}" for k, v in shown.items())


@runs.command()
@reader_options
@click.argument("run_id", type=int)
@json_option
def show(uri: str | None, token: str | None, run_id: int, as_json: bool) -> None:
    """Show one run: status, config, last metrics, checkpoints and events.

    Metrics named *_bytes read with units (499 MiB); paths and commands are never cut.
    --uri may be a dashboard's http://host:port (with --token or TRACKER_TOKEN).
    """
    reader = open_reader(uri, token)
    run = reader.run(run_id)
    checkpoints = reader.checkpoints(run_id)
    events = reader.events(run_id)
    if as_json:
        echo_json({"run": run, "checkpoints": checkpoints, "events": events})
        return
    status = run.status + (
        f" ({run.failure_class}: {run.failure_hint})" if run.failure_class else ""
    )
    for label, value in [
        ("run", f"{run.id}  {run.project}/{run.name}"),
        ("status", status),
        ("exit code", "-" if run.exit_code is None else str(run.exit_code)),
        ("error", run.error or "-"),
        ("started", fmt_time(run.started_at)),
        ("ended", fmt_time(run.ended_at)),
        ("duration", fmt_duration(run.duration)),
        ("host", f"{run.host or '-'} (pid {run.pid or '-'})"),
        ("git commit", run.git_commit or "-"),
        ("command", " ".join(run.command or []) or "-"),
        ("tags", ", ".join(run.tags) or "-"),
        ("starred", "yes" if run.starred else "no"),
        *([("deleted", f"{fmt_time(run.deleted_at)} (tracker runs restore {run.id})")]
          if run.deleted_at is not None else []),
    ]:  # fmt: skip
        click.echo(f"{label:>11}: {value}")
    if run.notes is not None:
        click.echo("\nnotes:")
        click.echo(run.notes.rstrip("\n"))
    click.echo("\nconfig:")
    click.echo(json.dumps(run.config, indent=2, sort_keys=True))
    click.echo("\nlast metrics:")
    for metric, number in sorted(run.last_metrics.items()):
        click.echo(f"  {metric} = {format_metric(metric, number)}")
    if checkpoints:
        click.echo("\ncheckpoints:")
        print_table(
            ["step", "size", "state", "sha256", "metrics", "path"],
            [[c.step, format_bytes(c.bytes), c.state, c.sha256[:12],
              _metrics_text(c.metrics), c.path] for c in checkpoints],
            cap=None,
        )  # fmt: skip
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


def _metrics_text(metrics: dict[str, Any]) -> str:
    return " ".join(f"{k}={format_metric(k, v)}" for k, v in sorted(metrics.items())) or "-"


@runs.command()
@reader_options
@click.argument("run_id", type=int)
@click.option("--format", "fmt", type=click.Choice(["csv"]), default="csv", show_default=True)
@click.option("--key", "keys", multiple=True, help="Only these metric keys (repeatable).")
@click.option("--output", "-o", type=click.File("w"), default="-", help="File (default stdout).")
def export(uri: str | None, token: str | None, run_id: int, fmt: str, keys: tuple[str, ...],
           output: Any) -> None:  # fmt: skip
    """Export every metric point of a run as CSV: key, step, wall_time, value.

    NaN and infinities are written as nan, inf and -inf. A --key the run does not have is
    an error (exit status 2) that lists the keys it has; nothing is written then.
    --uri may be a dashboard's http://host:port (with --token or TRACKER_TOKEN).
    """
    reader = open_reader(uri, token)
    reader.run(run_id)  # NotFound with a clear message
    have = reader.metric_keys(run_id)
    missing = [k for k in dict.fromkeys(keys) if k not in have]
    if missing:
        listed = ", ".join(have) if have else "none: it has logged no metrics"
        raise InvalidInput(
            f"run {run_id} has no metric {', '.join(map(repr, missing))}; its metrics: {listed}",
            field="key",
        )
    wanted = list(dict.fromkeys(keys)) or have
    writer = csv.writer(output, lineterminator="\n")
    writer.writerow(["key", "step", "wall_time", "value"])
    count = 0
    for key in wanted:
        for point in reader.metric_points(run_id, key):
            writer.writerow([key, point.step, f"{point.wall_time:.3f}", repr(point.value)])
            count += 1
    if output is not sys.stdout:
        click.echo(f"{count} points written", err=True)


def _change_lifecycle(uri: str | None, run_ids: tuple[int, ...], delete: bool) -> None:
    from tracker.store.lifecycle import delete_runs, restore_runs

    store = open_store(uri)
    ids = list(dict.fromkeys(run_ids))
    changed = set(delete_runs(store, ids) if delete else restore_runs(store, ids))
    done, already = ("deleted", "was deleted already") if delete else ("restored", "is not deleted")
    for run_id in ids:
        click.echo(f"run {run_id} {done if run_id in changed else already}")
    if delete and changed:
        click.echo(
            "deleted runs are hidden (tracker runs ls --deleted shows them); "
            "tracker runs restore brings them back, tracker gc purges them after 30 days",
            err=True,
        )


@runs.command()
@uri_option
@click.argument("run_ids", metavar="RUN...", type=int, nargs=-1, required=True)
def delete(uri: str | None, run_ids: tuple[int, ...]) -> None:
    """Delete runs softly: hidden everywhere (the runs table, search, the MLflow API) until
    restored; nothing is removed until `tracker gc` purges runs deleted 30 days ago.

    An unknown id is an error (exit status 2) and then nothing is deleted.
    """
    _change_lifecycle(uri, run_ids, delete=True)


@runs.command()
@uri_option
@click.argument("run_ids", metavar="RUN...", type=int, nargs=-1, required=True)
def restore(uri: str | None, run_ids: tuple[int, ...]) -> None:
    """Restore deleted runs (until `tracker gc` has purged them).

    An unknown id is an error (exit status 2) and then nothing is restored.
    """
    _change_lifecycle(uri, run_ids, delete=False)
