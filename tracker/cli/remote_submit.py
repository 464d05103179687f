"""Submitting to a dashboard: ``tracker submit|sweep --uri http://host:port`` and ``tracker jobs
cancel --uri http://...``, with an ``admin`` token (``--token`` / ``TRACKER_TOKEN``).

A submission over HTTP does what a local one does, through the dashboard's JSON API
(``web/API.md``) and the one HTTP client (:class:`tracker.client.http.ApiClient`: its auth
header, error envelope decoding and retry policy):

1. the spec is checked here first (``tracker.store.jobs.check_spec``, the rules the server
   applies again), so a bad option fails before anything is uploaded;
2. the project's files are collected (:func:`tracker.cli.snapshot.collect`: git's files, or
   the directory less ``.gitignore``'d ones; the caps), the dashboard is asked which of their
   blobs it lacks (``POST /snapshots/missing``), only those are uploaded (``PUT
   /snapshots/blobs/<sha256>``, each checked against its hash there), and the file list is
   saved (``POST /snapshots``): a second submission of the same tree uploads nothing;
3. the job, or one job per config of a sweep, is queued (``POST /jobs``) naming the
   snapshot; or, for a sweep that learns (``tracker sweep --method ...``), the sweep is
   stored (``POST /sweeps`` with the job under ``job``) and the dashboard's periodic work
   queues its trials, each naming the snapshot.

The job's directory and script are recorded relative to the submitter's project root, as
for a local submission; a worker runs them from a fresh copy of the snapshot. With
``--no-snapshot`` the worker runs the job from its own files (its ``--project-root``), as
before snapshots, and a note says so.

Errors: the server's, decoded (400 ``invalid_input`` naming the field, 401 with how to pass
a token, 403 ``forbidden_scope`` for a ``log`` token); a file that changed between being
hashed and uploaded is an ``InvalidInput`` naming it (submit again).
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from tracker.cli.remote import job_from_json
from tracker.cli.snapshot import (
    Collected,
    collect,
    parse_max_bytes,
    say_nothing_to_snapshot,
    say_snapshot,
)
from tracker.client.http import ApiClient
from tracker.entities import CancelResult, JobInfo, JobSpec, SnapshotInfo, SweepInfo, TrialInfo
from tracker.errors import InvalidInput, TrackerError
from tracker.rules import jsonvalues

if TYPE_CHECKING:
    from tracker.rules.sweep_search import SweepSettings

__all__ = [
    "cancel_remote",
    "create_sweep_remote",
    "submit_remote",
    "sweep_from_json",
    "upload_snapshot",
]

RETRY_FOR_S = 5.0  # as the CLI's reads: a restarting dashboard is asked again for this long
HASHES_PER_REQUEST = 10_000  # of POST /snapshots/missing (the server takes up to 50,000)
BUFFERED_MAX = 8 * 1024 * 1024  # files up to this size are sent from memory: retried if lost
_COMPRESS_MIN = 1024
_NOT_SENT = ("schedule_id", "parent_job_id", "not_before")  # never set by a submitter


def _client(uri: str, token: str | None) -> ApiClient:
    return ApiClient(uri, token, retry_for=RETRY_FOR_S)


def _send_json(client: ApiClient, method: str, path: str, body: Any, *, idempotent: bool) -> Any:
    data = jsonvalues.dumps(body, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json"}
    if len(data) >= _COMPRESS_MIN:
        data = gzip.compress(data, compresslevel=1)
        headers["Content-Encoding"] = "gzip"
    return client.call(method, path, data=data, headers=headers, idempotent=idempotent)


# ----------------------------------------------------------------------- snapshot


def _missing(client: ApiClient, hashes: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(hashes), HASHES_PER_REQUEST):
        part = list(hashes[start : start + HASHES_PER_REQUEST])
        doc = _send_json(client, "POST", "/snapshots/missing", {"sha256": part}, idempotent=True)
        found.update(doc["missing"])
    return found


def _put_blob(client: ApiClient, path: str, source: os.PathLike[str] | str, sha256: str) -> None:
    headers = {"Content-Type": "application/octet-stream"}
    where = f"/snapshots/blobs/{sha256}"
    try:
        with open(source, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size <= BUFFERED_MAX:
                client.call("PUT", where, data=fh.read(), headers=headers, idempotent=True)
            else:  # streamed: sent once (a stream cannot be read again)
                headers["Content-Length"] = str(size)
                client.call("PUT", where, data=fh, headers=headers, idempotent=True)
    except OSError as exc:
        raise InvalidInput(
            f"snapshot file {path} cannot be read: {exc.strerror or exc}", field="snapshot"
        ) from None
    except TrackerError as exc:
        if exc.code != "sha256_mismatch":
            raise
        raise InvalidInput(
            f"snapshot file {path} changed while it was uploaded (it no longer hashes to "
            f"{sha256}): submit again",
            field="snapshot",
        ) from None


def upload_snapshot(client: ApiClient, collected: Collected) -> tuple[SnapshotInfo, int]:
    """Upload the blobs the dashboard lacks and save the snapshot; returns ``(info, files
    uploaded)`` (0 when the dashboard had every file already)."""
    wanted = _missing(client, sorted({e.sha256 for e in collected.entries}))
    uploaded = 0
    for entry in collected.entries:
        if entry.sha256 in wanted:
            _put_blob(client, entry.path, collected.sources[entry.path], entry.sha256)
            wanted.discard(entry.sha256)
            uploaded += 1
    body = {
        "files": [dataclasses.asdict(e) for e in collected.entries],
        "git_commit": collected.git_commit,
        "git_diff": collected.git_diff,
        "root_name": os.path.basename(collected.root),
    }
    doc = _send_json(client, "POST", "/snapshots", body, idempotent=True)
    names = {f.name for f in dataclasses.fields(SnapshotInfo)}
    return SnapshotInfo(**{k: v for k, v in doc.items() if k in names}), uploaded


def _snapshot_id(client: ApiClient, spec: JobSpec, options: dict[str, Any]) -> int | None:
    """The snapshot of ``spec``'s project root on the dashboard (uploaded as needed), or None
    with a note on stderr (``--no-snapshot``, or a directory outside the project root)."""
    if options["no_snapshot"]:
        click.echo("note: no code snapshot (--no-snapshot): the worker runs the job from its "
                   "own files (its --project-root)", err=True)  # fmt: skip
        return None
    if spec.project_root is None or spec.cwd is None or os.path.isabs(spec.cwd):
        click.echo("note: no code snapshot: the job's directory is outside its project root; "
                   "the worker runs it from its own files", err=True)  # fmt: skip
        return None
    started = time.monotonic()
    collected = collect(
        spec.project_root,
        max_bytes=parse_max_bytes(options["snapshot_max_bytes"]),
        max_files=options["snapshot_max_files"],
    )
    if not collected.entries:
        say_nothing_to_snapshot(spec.project_root)
        return None
    info, uploaded = upload_snapshot(client, collected)
    say_snapshot(info, uploaded, started)
    return info.id


def _with_snapshot(client: ApiClient, spec: JobSpec, options: dict[str, Any]) -> JobSpec:
    """``spec`` naming its project's snapshot on the dashboard (uploaded as needed; None
    with a note when there is none to take)."""
    return dataclasses.replace(spec, snapshot_id=_snapshot_id(client, spec, options))


# ------------------------------------------------------------------------- jobs


def spec_body(spec: JobSpec) -> dict[str, Any]:
    """The body of ``POST /api/v1/jobs`` for ``spec`` (its fields under their own names)."""
    out = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    for name in _NOT_SENT:
        del out[name]
    out["tags"], out["sbatch"] = list(spec.tags), list(spec.sbatch)
    return out


def submit_remote(
    uri: str,
    token: str | None,
    spec: JobSpec,
    options: dict[str, Any],
    configs: Sequence[dict[str, Any]] | None = None,
) -> list[JobInfo]:
    """Queue ``spec`` on the dashboard at ``uri`` -- once, or once per config of ``configs``
    (a sweep, one snapshot for all) -- with its code snapshot (``options``: the snapshot
    options as click passes them). Returns the queued jobs, in order.

    Raises:
        InvalidInput: the spec breaks a rule of every submission (checked before anything is
            uploaded); the project is over a snapshot cap; a file changed while uploaded.
        TrackerError: the dashboard's answer (403 ``forbidden_scope`` for a ``log`` token).
        StoreUnavailable: the dashboard cannot be reached.
    """
    from tracker.store.jobs import check_spec

    for config in configs if configs is not None else [spec.config]:
        check_spec(dataclasses.replace(spec, config=config))
    client = _client(uri, token)
    body = spec_body(_with_snapshot(client, spec, options))
    if configs is not None:
        del body["config"]
        body["configs"] = list(configs)
    doc = _send_json(client, "POST", "/jobs", body, idempotent=False)
    found = doc["jobs"] if configs is not None else [doc]
    return [job_from_json(j) for j in found]


def create_sweep_remote(
    uri: str,
    token: str | None,
    spec: JobSpec,
    options: dict[str, Any],
    overrides: Sequence[str],
    settings: SweepSettings,
    name: str | None = None,
) -> SweepInfo:
    """Create a sweep that learns on the dashboard at ``uri``: its trials run ``spec`` from
    one code snapshot (``options`` as for :func:`submit_remote`) with the params its sampler
    picks for ``overrides`` (the ``-c`` texts). The dashboard's periodic work queues the
    trials (its first pass within about 2 s). Returns the sweep, env values left empty.

    Raises:
        SweepSpecError / InvalidInput: an option, a ``-c`` or a field of the spec breaks a
            rule (checked before anything is uploaded); a snapshot cap; a changed file.
        TrackerError: the dashboard's answer (403 ``forbidden_scope`` for a ``log`` token).
        StoreUnavailable: the dashboard cannot be reached.
    """
    from tracker.store.sweeps import check_sweep

    check_sweep(spec, overrides, settings, name=name)
    client = _client(uri, token)
    body = {
        "job": spec_body(_with_snapshot(client, spec, options)),
        "overrides": list(overrides),
        **dataclasses.asdict(settings),
        "name": name,
    }
    # not resent: a lost answer would make a second sweep (as POST /jobs, queued once)
    return sweep_from_json(_send_json(client, "POST", "/sweeps", body, idempotent=False))


def sweep_from_json(doc: dict[str, Any]) -> SweepInfo:
    """A sweep of the API (``sweep_json``) as the store returns it: its spec's env holds
    the names only (empty values), as a job read over HTTP does."""
    names = {f.name for f in dataclasses.fields(SweepInfo)}
    values = {k: v for k, v in doc.items() if k in names}
    spec = dict(values.get("spec") or {})
    spec["env"] = dict.fromkeys(spec.pop("env_keys", None) or [], "")
    values["spec"] = spec
    best = values.get("best")
    values["best"] = None if best is None else _trial_from_json(best)
    return SweepInfo(**values)


def _trial_from_json(doc: dict[str, Any]) -> TrialInfo:
    names = {f.name for f in dataclasses.fields(TrialInfo)}
    return TrialInfo(**{k: v for k, v in doc.items() if k in names})


def cancel_remote(uri: str, token: str | None, job_ids: Sequence[int]) -> dict[int, CancelResult]:
    """Cancel jobs on the dashboard at ``uri`` (``POST /api/v1/jobs/<id>/cancel``), with the
    results a local cancel gives."""
    client = _client(uri, token)
    results = {}
    for job_id in job_ids:
        doc = _send_json(client, "POST", f"/jobs/{job_id}/cancel", {}, idempotent=True)
        results[job_id] = CancelResult(str(doc["outcome"]), str(doc["status"]))
    return results
