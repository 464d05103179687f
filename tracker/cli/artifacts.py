"""``tracker artifacts ls|get`` (a run's files) and ``tracker gc`` (blobs no run refers to).

``ls`` and ``get`` read through :func:`tracker.cli.reading.open_reader`: a database URL (the
artifact root from ``--artifact-root`` / ``TRACKER_ARTIFACT_ROOT``, else ``artifacts/``
beside the SQLite file) or a dashboard's ``http://host:port``. ``get`` streams to
``FILE.part``, checks size and sha256 against the recorded ones, then renames: a
download that does not match leaves no ``FILE`` (``artifact_corrupt``, exit status 2).

``gc`` works on a database only: it lists the blobs of the artifact root, and deletes
(with ``--yes``; a dry run otherwise) those no artifact row refers to and that are older than
``--grace`` (an upload may be between its blob and its row).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

import click

from tracker.cli.common import (
    echo_json,
    fmt_time,
    json_option,
    open_store,
    print_table,
    store_label,
    uri_option,
)
from tracker.cli.reading import open_reader, reader_options
from tracker.entities import ArtifactInfo
from tracker.errors import ArtifactCorrupt
from tracker.rules.units import format_bytes, parse_duration

CHUNK = 1 << 20

artifact_root_option = click.option(
    "--artifact-root",
    envvar="TRACKER_ARTIFACT_ROOT",
    default=None,
    help="Where artifact bytes live: a directory or s3://bucket/prefix (default: "
    "TRACKER_ARTIFACT_ROOT, else artifacts/ beside the SQLite file; PostgreSQL needs one).",
)


@click.group()
def artifacts() -> None:
    """List and download the files of a run."""


@artifacts.command("ls")
@reader_options
@artifact_root_option
@click.argument("run_id", type=int)
@click.option("--prefix", default="", help="Only paths starting with this ('dir/' for a folder).")
@json_option
def ls(
    uri: str | None, token: str | None, artifact_root: str | None, run_id: int, prefix: str,
    as_json: bool,
) -> None:  # fmt: skip
    """List a run's artifacts (path, size, type, step, sha256), sorted by path."""
    reader = open_reader(uri, token, artifact_root=artifact_root)
    found = reader.artifacts(run_id, prefix)
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo(f"run {run_id} has no artifacts in {store_label(reader.where)}", err=True)
        return
    print_table(
        ["path", "size", "type", "step", "sha256", "created"],
        [_row(a) for a in found],
        cap=None,
    )


def _row(a: ArtifactInfo) -> list[Any]:
    step = "-" if a.step is None else a.step
    return [a.path, format_bytes(a.size), a.media_type, step, a.sha256[:12], fmt_time(a.created_at)]


@artifacts.command("get")
@reader_options
@artifact_root_option
@click.argument("run_id", type=int)
@click.argument("path")
@click.option(
    "--output", "-o", default=None,
    help="File to write (default: the artifact's file name here; '-' for stdout).",
)  # fmt: skip
def get(
    uri: str | None, token: str | None, artifact_root: str | None, run_id: int, path: str,
    output: str | None,
) -> None:  # fmt: skip
    """Download one artifact, checking its size and sha256."""
    reader = open_reader(uri, token, artifact_root=artifact_root)
    info = reader.artifact(run_id, path)
    with reader.open_artifact(run_id, path) as source:
        if output == "-":
            _copy(source, sys.stdout.buffer, info)
            return
        target = Path(output or path.rsplit("/", 1)[-1])
        part = target.with_name(target.name + ".part")
        try:
            with open(part, "wb") as sink:
                _copy(source, sink, info)
            os.replace(part, target)
        finally:
            part.unlink(missing_ok=True)
    click.echo(f"{target}  {format_bytes(info.size)}  sha256 {info.sha256}", err=True)


def _copy(source: BinaryIO, sink: BinaryIO, info: ArtifactInfo) -> None:
    """Copy in chunks; raise ArtifactCorrupt if size or hash differ from the record."""
    digest = hashlib.sha256()
    size = 0
    while chunk := source.read(CHUNK):
        digest.update(chunk)
        size += len(chunk)
        sink.write(chunk)
    sink.flush()
    if size != info.size or digest.hexdigest() != info.sha256:
        raise ArtifactCorrupt(
            f"artifact {info.path!r} of run {info.run_id} came back as {size} bytes with sha256 "
            f"{digest.hexdigest()}, but {info.size} bytes with sha256 {info.sha256} were stored",
            field="sha256",
        )


@click.command()
@uri_option
@artifact_root_option
@click.option("--yes", is_flag=True, help="Delete the unreferenced blobs (default: a dry run).")
@click.option(
    "--grace", default="1h", show_default=True,
    help="Keep unreferenced blobs younger than this (an upload may be in flight).",
)  # fmt: skip
@json_option
def gc(uri: str | None, artifact_root: str | None, yes: bool, grace: str, as_json: bool) -> None:
    """Remove artifact blobs no run refers to (a dry run unless --yes).

    Blobs become unreferenced when artifacts are overwritten or deleted, or runs deleted.
    """
    from tracker.store import artifacts as store_artifacts

    grace_s = parse_duration(grace, field="grace", allow_zero=True)
    store = open_store(uri)
    store.artifact_root = artifact_root
    root = store_artifacts.artifact_root(store)
    report = store_artifacts.gc_blobs(store, dry_run=not yes, grace_seconds=grace_s)
    if as_json:
        echo_json({"artifact_root": root, **report.__dict__})
        return
    click.echo(f"artifact root: {root}")
    click.echo(f"blobs: {report.blobs} ({report.referenced} referenced)")
    click.echo(
        f"unreferenced: {report.unreferenced} blobs, {format_bytes(report.unreferenced_bytes)} "
        f"({report.unreferenced_bytes} bytes)"
    )
    if report.temporary:
        verb = "removed" if yes else "to remove"
        click.echo(f"leftover temporary files (interrupted uploads) {verb}: {report.temporary}")
    if report.young:
        click.echo(f"kept: {report.young} unreferenced blobs younger than {grace}")
    if yes:
        click.echo(f"deleted: {report.deleted} blobs")
    elif report.unreferenced:
        click.echo("dry run: nothing deleted; run again with --yes to delete them")
