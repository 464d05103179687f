"""JSON API for artifacts and media under ``/api/v1/runs/<id>/``. Documented in ``web/API.md``.

* ``PUT .../artifacts/<path>``: the raw body is the file (exempt from the JSON-body rule: a
  cross-site page cannot send a PUT without a CORS preflight, which is never granted).
  Query ``step``, ``media_type``; header ``X-Artifact-Meta`` (a JSON object) and
  ``X-Content-SHA256`` (checked: a mismatch stores nothing). The body streams to a
  temporary file, never whole in memory; at most ``MAX_ARTIFACT_BYTES`` (413 naming the
  limit). Scope ``log``, like metric ingest.
* ``GET .../artifacts?prefix=``: the listing; ``GET .../artifacts/<path>``: the bytes,
  streamed (see :mod:`tracker.web.core.artifact_serving` for what may be inline);
  ``DELETE .../artifacts/<path>`` (scope ``admin``: it deletes).
* ``GET .../media``: ``{kind: {key: [steps]}}``; ``GET .../media/<kind>?key=``: one key's
  files, by step (also the images MLflow's ``log_image(key=...)`` stores under ``images/``);
  ``GET .../histograms/<key>``: every step.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import quote

from flask import Blueprint, Response, request
from flask.blueprints import BlueprintSetupState
from werkzeug.routing import PathConverter
from werkzeug.wsgi import wrap_file

from tracker.entities import ArtifactInfo
from tracker.errors import InvalidInput
from tracker.rules.artifact_paths import MEDIA_KINDS
from tracker.store import artifacts
from tracker.web.core.artifact_serving import (
    MAX_HISTOGRAM_STEPS,
    histogram_series,
    parse_meta_header,
    serving,
)
from tracker.web.plumbing.auth import token_id
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import bool_arg, int_arg, optional_int_arg
from tracker.web.plumbing.uploads import require_raw_body, upload_limit

bp = Blueprint("artifacts", __name__, url_prefix="/api/v1")


class ArtifactPathConverter(PathConverter):
    """Any rest of the URL, even one starting with ``/`` or empty: the path rule
    (``tracker.rules.artifact_paths``) then answers 400 naming the problem, where werkzeug's
    ``path`` would match no route and leave a bare 404 (or a confusing 415 for a PUT)."""

    regex = r"[\s\S]*"
    part_isolating = False


@bp.record_once
def _add_converter(setup: BlueprintSetupState) -> None:
    setup.app.url_map.converters["artifact"] = ArtifactPathConverter


CHUNK = 256 * 1024
# The artifact download's own CSP: even a file a browser would render can run nothing.
DOWNLOAD_CSP = "default-src 'none'; sandbox"


def artifact_json(info: ArtifactInfo) -> dict[str, Any]:
    out = dataclasses.asdict(info)
    out["download_url"] = f"/api/v1/runs/{info.run_id}/artifacts/{quote(info.path)}"
    return out


@bp.put("/runs/<int:run_id>/artifacts/<artifact:path>")
def put_artifact(run_id: int, path: str) -> tuple[dict[str, Any], int]:
    store = state().store
    limit = upload_limit((store, run_id, path))
    require_raw_body("an artifact body")
    meta = parse_meta_header(request.headers.get("X-Artifact-Meta"))
    step = optional_int_arg("step")
    media_type = request.args.get("media_type") or None
    announced = request.headers.get("X-Content-SHA256") or None
    with artifacts.spool(request.stream, max_bytes=limit, store=store) as (tmp, sha256, _):
        artifacts.check_announced(announced, sha256)
        info = artifacts.put_artifact(
            store, run_id, path, tmp, media_type=media_type, step=step, meta=meta,
            sha256=sha256,  # hashed while spooled: the store's copy checks it, no re-read
            token_id=token_id(),
        )  # fmt: skip
    return artifact_json(info), 201


@bp.get("/runs/<int:run_id>/artifacts")
def list_artifacts(run_id: int) -> dict[str, Any]:
    prefix = request.args.get("prefix", "")
    found = artifacts.list_artifacts(state().store, run_id, prefix)
    return {"run_id": run_id, "prefix": prefix, "artifacts": [artifact_json(i) for i in found]}


@bp.get("/runs/<int:run_id>/artifacts/<artifact:path>")
def download_artifact(run_id: int, path: str) -> Response:
    store = state().store
    info = artifacts.get_artifact(store, run_id, path)
    if request.if_none_match.contains(info.sha256):
        response = Response(status=304)
        response.set_etag(info.sha256)
        return response
    how = serving(info.media_type, download=bool_arg("download"))
    blob = artifacts.open_artifact(store, run_id, path)
    # streamed in chunks (the server's sendfile where it has one); closed with the response
    body = wrap_file(request.environ, blob, CHUNK)
    response = Response(body, content_type=how.content_type, direct_passthrough=True)
    response.content_length = info.size
    response.set_etag(info.sha256)
    name = path.rsplit("/", 1)[-1]
    kind = "inline" if how.inline else "attachment"
    response.headers["Content-Disposition"] = f"{kind}; filename*=UTF-8''{quote(name, safe='')}"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = DOWNLOAD_CSP
    response.headers["Cache-Control"] = "private, no-cache"
    return response


@bp.delete("/runs/<int:run_id>/artifacts/<artifact:path>")
def delete_artifact(run_id: int, path: str) -> dict[str, Any]:
    artifacts.delete_artifact(state().store, run_id, path)
    return {"deleted": True, "run_id": run_id, "path": path}


@bp.get("/runs/<int:run_id>/media")
def media(run_id: int) -> dict[str, Any]:
    return {"run_id": run_id, "media": artifacts.media_keys(state().store, run_id)}


@bp.get("/runs/<int:run_id>/media/<kind>")
def media_files(run_id: int, kind: str) -> dict[str, Any]:
    if kind not in MEDIA_KINDS:
        raise InvalidInput(f"media kind {kind[:40]!r} is not one of {', '.join(MEDIA_KINDS)}",
                           field="kind")  # fmt: skip
    key = request.args.get("key")
    if not key:
        raise InvalidInput("give the media key: ?key=<key>", field="key")
    found = artifacts.media_files(state().store, run_id, kind, key)
    return {"run_id": run_id, "kind": kind, "key": key, "files": [artifact_json(i) for i in found]}


@bp.get("/runs/<int:run_id>/histograms/<path:key>")
def histogram(run_id: int, key: str) -> dict[str, Any]:
    limit = int_arg("max_steps", MAX_HISTOGRAM_STEPS, 1, MAX_HISTOGRAM_STEPS)
    return histogram_series(state().store, run_id, key, max_steps=limit)
