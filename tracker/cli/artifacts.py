"""``tracker artifacts ls|get`` (a run's files) and the ``blobs`` part of ``tracker gc``.

``ls`` and ``get`` read through :func:`tracker.cli.reading.open_reader`: a database URL (the
artifact root from ``--artifact-root`` / ``TRACKER_ARTIFACT_ROOT``, else ``artifacts/``
beside the SQLite file) or a dashboard's ``http://host:port``. ``get`` streams to
``FILE.part``, checks size and sha256 against the recorded ones, then renames: a
download that does not match leaves no ``FILE`` (``artifact_corrupt``, exit status 2).

``tracker gc`` (:mod:`tracker.cli.gc`) runs :func:`gc_blobs_part` after purging deleted
runs: blobs of the artifact root that no row refers to and that are older than
``--blob-grace`` (an upload may be between its blob and its row) are listed, and removed
with ``--yes``.
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
    print_table,
    store_label,
)
from tracker.cli.reading import open_reader, reader_options
from tracker.cli.suggest import SuggestingGroup
from tracker.entities import ArtifactInfo
from tracker.errors import ArtifactCorrupt
from tracker.rules.units import format_bytes

CHUNK = 1 << 20

artifact_root_option = click.option(
    "--artifact-root",
    envvar="TRACKER_ARTIFACT_ROOT",
    default=None,
    help="Where artifact bytes live: a directory or s3://bucket/prefix (default: "
    "TRACKER_ARTIFACT_ROOT, else artifacts/ beside the SQLite file; PostgreSQL needs one).",
)


@click.group(cls=SuggestingGroup)
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


def gc_blobs_part(store: Any, options: Any) -> Any:
    """The ``blobs`` part of ``tracker gc`` (:mod:`tracker.cli.gc`): artifact blobs no row
    refers to, older than ``options.blob_grace_s``. A PostgreSQL store with no artifact root
    set has no blobs to look at: the part says so and is skipped.

    Raises:
        InvalidInput: a root that contains the SQLite database.
    """
    from tracker.cli.gc import GcPart
    from tracker.errors import InvalidInput
    from tracker.store import artifacts as store_artifacts

    store.artifact_root = options.artifact_root
    try:
        root = store_artifacts.artifact_root(store)
    except InvalidInput as exc:
        if store.database_file() is None:  # PostgreSQL and no root: nothing to collect
            return GcPart("blobs", f"skipped: {exc.message}", data={"skipped": exc.message})
        raise
    report = store_artifacts.gc_blobs(
        store, dry_run=options.dry_run, grace_seconds=options.blob_grace_s, now=options.now
    )
    verb = "would remove" if options.dry_run else "removed"
    size = report.unreferenced_bytes
    summary = (
        f"{verb} {report.unreferenced} unreferenced blob(s), {format_bytes(size)} ({size} "
        f"bytes), of {report.blobs} in {root}"
    )
    lines = []
    if report.young:
        lines.append(f"kept {report.young} unreferenced blob(s) younger than the blob grace")
    if report.temporary:
        lines.append(f"{verb} {report.temporary} leftover temporary file(s) of uploads")
    return GcPart("blobs", summary, lines, {"artifact_root": root, **report.__dict__})
