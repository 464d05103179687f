"""JSON API ``/api/v1/snapshots``: code snapshots uploaded by ``tracker submit --uri
http://...`` (:mod:`tracker.cli.remote_submit`). Documented in ``web/API.md``.

The submitter asks which blobs the store lacks (``POST /snapshots/missing``), uploads only
those (``PUT /snapshots/blobs/<sha256>``: the raw body, streamed to a temporary file, hashed
and checked against the URL's hash, at most ``MAX_ARTIFACT_BYTES``; nothing is kept on a
mismatch or past the limit), saves the file list (``POST /snapshots``: refused while a
blob is missing) and submits the job naming it (``POST /jobs``, ``snapshot_id``). Writing
needs the ``admin`` scope, as submitting does; reading a snapshot, ``log``. The store calls
are :mod:`tracker.store.snapshots`; the file list's rules :mod:`tracker.rules.snapshot`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flask import Blueprint, request

from tracker.entities import SnapshotInfo
from tracker.errors import InvalidInput, TooLarge
from tracker.store import artifacts
from tracker.store import snapshots as store_snapshots
from tracker.store.blobs import BlobHashMismatch, check_sha256
from tracker.web.core.fields import body_field, check_text
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import json_body
from tracker.web.plumbing.uploads import require_raw_body, upload_limit

bp = Blueprint("snapshots", __name__, url_prefix="/api/v1")

SNAPSHOT_FIELDS = ("files", "git_commit", "git_diff", "root_name")


def snapshot_json(info: SnapshotInfo) -> dict[str, Any]:
    """``id, digest, files`` (how many), ``bytes, git_commit, git_diff, root_name,
    created_at``."""
    return dataclasses.asdict(info)


def _only(body: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for key in body:
        if key not in allowed:
            raise InvalidInput(
                f"unknown field {str(key)[:100]!r}: this body takes {', '.join(allowed)}",
                field=str(key)[:100],
            )


@bp.post("/snapshots/missing")
def missing() -> Any:
    body = json_body()
    _only(body, ("sha256",))
    hashes = body_field(body, "sha256", list, required=True)
    return {"missing": store_snapshots.missing_blobs(state().store, hashes)}


@bp.put("/snapshots/blobs/<sha256>")
def put_blob(sha256: str) -> Any:
    store = state().store
    check_sha256(sha256)  # 400 before a byte is read
    limit = upload_limit()
    require_raw_body("a snapshot file")
    try:
        with artifacts.spool(request.stream, max_bytes=limit, store=store) as (tmp, actual, size):
            if actual != sha256:
                raise BlobHashMismatch(
                    f"the body hashes to sha256 {actual}, not the {sha256} of the URL; "
                    "nothing stored",
                    field="sha256",
                )
            store_snapshots.put_blob_file(store, tmp, sha256)
    except TooLarge:
        raise TooLarge(
            f"the file is larger than this dashboard's limit of {limit} bytes per file "
            "(MAX_ARTIFACT_BYTES, tracker ui --max-artifact-bytes); nothing stored",
            field="body",
        ) from None
    return {"sha256": sha256, "size": size}, 201


@bp.post("/snapshots")
def create() -> Any:
    body = json_body()
    _only(body, SNAPSHOT_FIELDS)
    for name in SNAPSHOT_FIELDS:
        check_text(body.get(name), name)
    info = store_snapshots.save_snapshot(
        state().store,
        body_field(body, "files", list, required=True),
        git_commit=body_field(body, "git_commit", str),
        git_diff=body_field(body, "git_diff", str),
        root_name=body_field(body, "root_name", str, default=""),
    )
    return snapshot_json(info), 201


@bp.get("/snapshots/<int:snapshot_id>")
def snapshot(snapshot_id: int) -> Any:
    store = state().store
    out = snapshot_json(store_snapshots.get_snapshot(store, snapshot_id))
    out["file_list"] = [
        dataclasses.asdict(f) for f in store_snapshots.snapshot_files(store, snapshot_id)
    ]
    return out
