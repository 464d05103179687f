"""``tracker gc``: remove what nothing needs any more. Dry run unless ``--yes``.

The command runs its parts in order, each a function ``(store, GcOptions) -> GcPart``:

1. ``runs``: purge runs soft-deleted longer ago than ``--older-than`` (default 30 days),
   and deleted projects left without runs (:func:`tracker.store.purge.purge_deleted`).
2. ``blobs``: artifact blobs no artifact refers to (purged runs' blobs included), by the
   artifact store (``tracker.store.artifacts.gc_blobs``), when that store is part of this
   installation.

A part added later appends itself to ``PARTS``; parts must not depend on each other's
output, only on the order (blobs after runs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click

from tracker.cli.artifacts import artifact_root_option
from tracker.cli.common import Duration, echo_json, fmt_time, json_option, open_store, uri_option

GRACE_DEFAULT = "30d"


@dataclass(frozen=True)
class GcOptions:
    older_than_s: float  # the grace period of soft-deleted runs
    dry_run: bool
    now: float
    artifact_root: str | None = None  # --artifact-root (else TRACKER_ARTIFACT_ROOT, default)
    blob_grace_s: float = 3600.0  # keep unreferenced blobs younger than this (uploads)


@dataclass(frozen=True)
class GcPart:
    name: str
    summary: str  # one line: what was (or would be) removed
    lines: list[str] = field(default_factory=list)  # one per item, for the text output
    data: dict[str, Any] = field(default_factory=dict)  # for --json


def purge_runs(store: Any, options: GcOptions) -> GcPart:
    from tracker.store.purge import purge_deleted

    report = purge_deleted(
        store, older_than=options.now - options.older_than_s, dry_run=options.dry_run
    )
    verb = "would purge" if options.dry_run else "purged"
    lines = [
        f"run {r.id}  {r.project}/{r.name}  deleted {fmt_time(r.deleted_at)}  {r.points} points"
        for r in report.runs
    ]
    lines += [f"project {name}" for name in report.projects]
    summary = (
        f"{verb} {len(report.runs)} deleted run(s) ({report.points} metric points) and "
        f"{len(report.projects)} deleted project(s)"
    )
    data = {
        "runs": [r.__dict__ for r in report.runs],
        "projects": report.projects,
        "points": report.points,
    }
    return GcPart("runs", summary, lines, data)


def _blob_part() -> list[tuple[str, Callable[[Any, GcOptions], GcPart]]]:
    """The blob part (``tracker.cli.artifacts.gc_blobs_part``)."""
    from tracker.cli.artifacts import gc_blobs_part

    return [("blobs", gc_blobs_part)]


PARTS: list[tuple[str, Callable[[Any, GcOptions], GcPart]]] = [
    ("runs", purge_runs),
    *_blob_part(),
]


@click.command()
@uri_option
@click.option(
    "--older-than",
    "older_than_s",
    type=Duration(allow_zero=True),
    default=GRACE_DEFAULT,
    show_default=True,
    help="Purge runs deleted at least this long ago (e.g. 7d, 12h, 0 for all).",
)
@click.option("--yes", is_flag=True, help="Remove for real (default: only show what would go).")
@artifact_root_option
@click.option(
    "--blob-grace",
    "blob_grace_s",
    type=Duration(allow_zero=True),
    default="1h",
    show_default=True,
    help="Keep unreferenced artifact blobs younger than this (an upload may be in flight).",
)
@json_option
def gc(
    uri: str | None, older_than_s: float, yes: bool, artifact_root: str | None,
    blob_grace_s: float, as_json: bool,
) -> None:  # fmt: skip
    """Purge deleted runs past their grace period, then unreferenced data.

    Without --yes nothing is removed: it prints what would be. Purging is permanent
    (restore a run with `tracker runs restore` before it is purged).
    """
    store = open_store(uri)
    options = GcOptions(
        older_than_s=older_than_s, dry_run=not yes, now=time.time(),
        artifact_root=artifact_root, blob_grace_s=blob_grace_s,
    )  # fmt: skip
    parts = [part(store, options) for _, part in PARTS]
    if as_json:
        echo_json({"dry_run": options.dry_run, **{p.name: p.data for p in parts}})
        return
    for part in parts:
        click.echo(f"{part.name}: {part.summary}")
        for line in part.lines:
            click.echo(f"  {line}")
    if options.dry_run:
        click.echo("dry run: nothing was removed (run again with --yes to remove)", err=True)
