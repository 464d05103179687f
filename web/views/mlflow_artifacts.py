"""MLflow's artifact proxy API under ``/api/2.0/mlflow-artifacts/``, as the real ``mlflow``
client uses it for ``mlflow-artifacts:/`` URIs (every run's ``artifact_uri`` here): upload,
download, list, delete, and multipart upload (``MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD``).
The files are the runs' artifacts (``tracker.store.artifacts``): the same blob root, the
same Artifacts tab, the same ``tracker artifacts`` commands. The path mapping is pure
(``web/core/mlflow_artifacts.py``); documented in ``web/API.md`` ("MLflow compatibility").

Uploads are raw bodies (exempt from the JSON-body rule, ``security.RAW_BODY_ENDPOINTS``)
streamed to a temporary file under the artifact root, so they are not bound by
``MAX_CONTENT_LENGTH`` but by the one upload limit of every upload path,
``MAX_ARTIFACT_BYTES`` (a single PUT, each part, and a multipart upload's parts together:
413 while streaming); JSON requests (multipart create/complete/abort) are bound by
``MAX_CONTENT_LENGTH``. Errors use MLflow's shape.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, current_app, request, stream_with_context

from tracker.entities import ArtifactInfo
from tracker.errors import NotFound, TooLarge
from tracker.rules.artifact_paths import check_artifact_path
from tracker.store import artifacts as astore
from tracker.store import logged_models
from tracker.store.runs import get_run
from tracker.web.core import mlflow_artifacts as core
from tracker.web.core.mlflow_compat import MlflowError
from tracker.web.plumbing.auth import token_id
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import json_body
from tracker.web.plumbing.uploads import CHUNK, Staging, check_quotas, upload_limit
from tracker.web.views.mlflow import on_error

bp = Blueprint("mlflow_artifacts", __name__, url_prefix="/api/2.0/mlflow-artifacts")
bp.register_error_handler(Exception, on_error)
# The client asks /api/3.0/mlflow/server-info whether the proxy takes multipart uploads
# (it uses them for files of MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE, 500 MB, and more).
info_bp = Blueprint("mlflow_info", __name__, url_prefix="/api/3.0/mlflow")
info_bp.register_error_handler(Exception, on_error)


def _staging() -> Staging:
    """Multipart staging under the artifact root (a directory root), else the user's cache."""
    store = state().store
    blobs = astore.blob_store(store)
    root = getattr(blobs, "root", None)
    if isinstance(root, Path):
        base = root / "tmp" / "multipart"
    else:  # an s3:// root: parts are staged on this host, privately
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        base = base / "tracker" / "multipart"
    return Staging(base, max_bytes=int(current_app.config["MAX_ARTIFACT_BYTES"]))


def _owner(location: str) -> tuple[int, str, core.Location]:
    """``(run id, run-artifact path, location)`` of an artifact proxy path; the run (or the
    logged model) must exist."""
    where = core.parse_location(location)
    if where.kind == "run":
        run_id = int(where.owner)
        get_run(state().store, run_id)  # NotFound -> RESOURCE_DOES_NOT_EXIST
    else:
        run_id = logged_models.get(state().store, str(where.owner)).run_id
    prefix = core.run_prefix(where)
    path = f"{prefix}/{where.path}".strip("/") if prefix else where.path
    return run_id, path, where


def _file_path(location: str) -> tuple[int, str]:
    run_id, path, _ = _owner(location)
    if not path:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE",
            f"{location[:200]!r} is an artifact root, not a file",
            field="path",
        )
    return run_id, path


def _media_type() -> str | None:
    mimetype = request.mimetype
    return mimetype or None


@info_bp.get("/server-info")
def server_info() -> Any:
    return {
        "multipart_uploads_enabled": True,
        "multipart_downloads_enabled": False,
        "workspaces_enabled": False,
    }


# ----------------------------------------------------------------- single files


@bp.put("/artifacts/<path:location>")
def upload(location: str) -> Any:
    run_id, path = _file_path(location)
    store = state().store
    limit = upload_limit((store, run_id, path))
    with astore.spool(request.stream, max_bytes=limit, store=store) as (tmp, sha256, _):
        astore.put_artifact(
            store, run_id, path, tmp, media_type=_media_type(), sha256=sha256,
            token_id=token_id(),
        )  # fmt: skip
    return {}


@bp.get("/artifacts/<path:location>")
def download(location: str) -> Response:
    run_id, path = _file_path(location)
    store = state().store
    info = astore.get_artifact(store, run_id, path)
    handle = astore.open_artifact(store, run_id, path)

    def chunks() -> Iterator[bytes]:
        with handle:
            while data := handle.read(CHUNK):
                yield data

    response = Response(stream_with_context(chunks()), mimetype="application/octet-stream")
    response.headers["Content-Length"] = str(info.size)
    response.headers["Content-Disposition"] = "attachment"
    return response


@bp.get("/artifacts")
def list_files() -> Any:
    location = request.args.get("path") or ""
    if not location.strip("/"):
        return {"files": []}
    run_id, path, where = _owner(location)
    infos: list[ArtifactInfo] = astore.list_artifacts(state().store, run_id, prefix=path)
    return {"files": core.listing(infos, path, hide_models=where.kind == "run")}


@bp.delete("/artifacts/<path:location>")
def delete(location: str) -> Any:
    """A file, or every file under a folder (MLflow's ``delete_artifacts``); nothing there
    is not an error."""
    run_id, path, _ = _owner(location)
    store = state().store
    try:
        astore.delete_artifact(store, run_id, path)
        return {}
    except NotFound:
        pass
    start = f"{path}/" if path else ""
    for info in astore.list_artifacts(store, run_id, prefix=path):
        if info.path.startswith(start):
            astore.delete_artifact(store, run_id, info.path)
    return {}


@bp.get("/presigned/<path:location>")
def presigned(location: str) -> Any:
    # 404, not 501: the server announces no multipart downloads, so the client never asks;
    # a 5xx here would read as a server fault (and make clients retry)
    raise MlflowError(
        "ENDPOINT_NOT_FOUND", "presigned downloads are not supported: download through the proxy"
    )


# -------------------------------------------------------------------- multipart


def _mpu_target(location: str, body: dict[str, Any]) -> tuple[int, str]:
    """The run and artifact path of a multipart upload: the URL names the folder, the
    body's ``path`` (the client's local file) the file name."""
    local = body.get("path")
    if not isinstance(local, str) or not local:
        raise MlflowError("INVALID_PARAMETER_VALUE", "path is required", field="path")
    name = Path(local.replace("\\", "/")).name
    run_id, folder, _ = _owner(location)
    path = f"{folder}/{name}" if folder else name
    check_artifact_path(path)
    return run_id, path


@bp.post("/mpu/create/<path:location>")
def mpu_create(location: str) -> Any:
    body = json_body()
    run_id, path = _mpu_target(location, body)
    num_parts = core.num_parts_of(body.get("num_parts"))
    upload_id = core.new_upload_id()
    _staging().create(upload_id, {"run_id": run_id, "path": path, "num_parts": num_parts})
    headers = {}
    if "Authorization" in request.headers:  # the parts are PUT by the same client
        headers["Authorization"] = request.headers["Authorization"]
    base = request.host_url.rstrip("/") + bp.url_prefix  # type: ignore[operator]
    credentials = [
        {"url": f"{base}/mpu/part/{upload_id}/{n}", "part_number": n, "headers": headers}
        for n in range(1, num_parts + 1)
    ]
    return {"upload_id": upload_id, "credentials": credentials}


@bp.put("/mpu/part/<upload_id>/<int:number>")
def mpu_part(upload_id: str, number: int) -> Response:
    upload_id = core.check_upload_id(upload_id)
    upload_limit()
    etag = _staging().put_part(upload_id, number, request.stream)
    response = Response(status=200)
    response.headers["ETag"] = etag
    return response


@bp.post("/mpu/complete/<path:location>")
def mpu_complete(location: str) -> Any:
    body = json_body()
    run_id, path = _mpu_target(location, body)
    upload_id = core.check_upload_id(body.get("upload_id"))
    staging = _staging()
    target = staging.target(upload_id)
    if (target["run_id"], target["path"]) != (run_id, path):
        raise MlflowError(
            "INVALID_PARAMETER_VALUE",
            f"multipart upload {upload_id} was created for another artifact",
            field="upload_id",
        )
    numbers = core.part_numbers(body.get("parts"), int(target["num_parts"]))
    store = state().store
    with staging.assemble(upload_id, numbers) as whole:
        try:
            check_quotas((store, run_id, path), whole.size)
        except TooLarge:
            staging.remove(upload_id)
            raise
        astore.put_artifact(
            store, run_id, path, whole.path, sha256=whole.sha256, token_id=token_id()
        )
    staging.remove(upload_id)
    return {}


@bp.post("/mpu/abort/<path:location>")
def mpu_abort(location: str) -> Any:
    body = json_body()
    _mpu_target(location, body)
    _staging().remove(core.check_upload_id(body.get("upload_id")))
    return {}
