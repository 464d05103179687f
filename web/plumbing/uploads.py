"""Multipart uploads (MLflow's ``mpu/create``, part PUTs, ``mpu/complete``): their parts
are staged in a directory per upload id (128 random bits) under a private staging root,
then assembled into one file that is stored like any upload.

Every byte counts against the dashboard's one upload limit (``MAX_ARTIFACT_BYTES``, ``tracker
ui --max-artifact-bytes``): a part is cut off at it while streaming, and so is the upload's
total over its parts (413 ``too_large``), so a ``log`` token cannot fill the disk through
parts. The staging root is ``tmp/multipart`` under a directory artifact root (beside the
blobs it becomes; never the system's shared temporary directory, where another local
account could create it first and swap parts), else a folder in the user's cache; it is
made 0700 and refused unless this process's user owns it and nobody else may enter it.
Staged uploads older than :data:`STALE_UPLOAD_S` are removed when the next one is created.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from tracker.errors import InvalidInput, NotFound, TooLarge

__all__ = [
    "CHUNK",
    "STALE_UPLOAD_S",
    "Quota",
    "Spooled",
    "Staging",
    "check_quotas",
    "private_root",
    "quotas",
    "require_raw_body",
    "spool",
    "upload_limit",
]

CHUNK = 1024 * 1024
STALE_UPLOAD_S = 24 * 3600.0


def require_raw_body(what: str) -> None:
    """Refuse (415) a raw-body upload sent with a ``Content-Encoding``: ``what`` (an
    artifact body, a snapshot file) is stored as the bytes sent."""
    from flask import request

    from tracker.web.plumbing.errors import UnsupportedMediaType

    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding != "identity":
        raise UnsupportedMediaType(
            f"{what} is stored as sent: Content-Encoding {encoding[:40]!r} is not accepted "
            "(send the file's own bytes, e.g. a .gz file as it is)",
            field="Content-Encoding",
        )


def upload_limit(run: tuple[Any, int, str] | None = None) -> int:
    """The dashboard's one upload limit (``MAX_ARTIFACT_BYTES``, ``tracker ui
    --max-artifact-bytes``) for the current request: a body announcing more is refused
    before a byte is read; a chunked one is cut off by the spool that reads it.

    ``run`` -- ``(store, run_id, path)`` of the artifact the body becomes -- also applies the
    quotas (:func:`quotas`; off by default): the limit is then at most what the run, and the
    stored token the request comes with, have left.

    Raises:
        TooLarge (413): the request's Content-Length is past the limit or a quota.
    """
    from flask import current_app, request

    limit = int(current_app.config["MAX_ARTIFACT_BYTES"])
    if request.content_length is not None and request.content_length > limit:
        raise TooLarge(
            f"the upload has {request.content_length} bytes; this dashboard takes at most "
            f"{limit} (MAX_ARTIFACT_BYTES, tracker ui --max-artifact-bytes)",
            field="body",
        )
    if run is not None:
        size = request.content_length
        for quota in quotas(run):
            if quota.left < 0 or (size is not None and size > quota.left):
                raise quota.refusal(size)
            limit = min(limit, quota.left)
    # werkzeug's own cut-off one byte later, so that a chunked body past the limit meets
    # the spool's clear TooLarge first
    request.max_content_length = limit + 1
    return limit


@dataclass(frozen=True)
class Quota:
    """What one quota leaves for an upload: ``left`` bytes of ``total`` for ``holder``."""

    holder: Callable[[], str]  # "run 7", "token 'ci' (#3)": named only when refusing
    left: int
    total: int
    option: str  # the config key and the flag that set it
    remedy: str

    def refusal(self, size: int | None) -> TooLarge:
        has = f"the upload has {size} bytes; " if size is not None else ""
        return TooLarge(
            f"{has}{self.holder()} has {max(self.left, 0)} of its {self.total} artifact bytes "
            f"left ({self.option}): {self.remedy}",
            field="body",
        )


def quotas(run: tuple[Any, int, str]) -> list[Quota]:
    """The quotas an upload to ``run`` -- ``(store, run_id, path)`` -- falls under, with what
    each leaves (the path being replaced not counted):

    - ``MAX_RUN_ARTIFACT_BYTES`` (``--max-run-artifact-bytes``): what one run may hold;
    - ``MAX_TOKEN_ARTIFACT_BYTES`` (``--max-token-artifact-bytes``): what the uploads of one
      stored token may hold over every run, for a request authenticated with a stored token
      (``tracker token create``); the configured token and a dashboard without
      authentication are not counted.
    """
    from flask import current_app

    from tracker.store import artifacts, tokens
    from tracker.web.plumbing.auth import token_id

    store, run_id, path = run
    found = []
    per_run = current_app.config.get("MAX_RUN_ARTIFACT_BYTES")
    if per_run is not None:
        left = int(per_run) - artifacts.run_bytes(store, run_id, besides=path)
        found.append(
            Quota(lambda: f"run {run_id}", left, int(per_run),
                  "MAX_RUN_ARTIFACT_BYTES, tracker ui --max-run-artifact-bytes",
                  "delete some of its artifacts or raise the quota")
        )  # fmt: skip
    per_token = current_app.config.get("MAX_TOKEN_ARTIFACT_BYTES")
    token = token_id() if per_token is not None else None
    if per_token is not None and token is not None:
        left = int(per_token) - artifacts.token_bytes(store, token, besides=(run_id, path))

        def holder(token: int = token) -> str:  # read only for the refusal's message
            name = next((t.name for t in tokens.list_tokens(store) if t.id == token), "")
            return f"token {name!r} (#{token})"

        found.append(
            Quota(holder, left, int(per_token),
                  "MAX_TOKEN_ARTIFACT_BYTES, tracker ui --max-token-artifact-bytes",
                  "delete artifacts uploaded with it, or raise the quota")
        )  # fmt: skip
    return found


def check_quotas(run: tuple[Any, int, str], size: int) -> None:
    """Refuse ``size`` more bytes for ``run`` past any of its :func:`quotas`.

    Raises:
        TooLarge (413): the first quota the upload does not fit, named.
    """
    for quota in quotas(run):
        if size > quota.left:
            raise quota.refusal(size)


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class Spooled:
    path: Path
    size: int
    sha256: str


@contextlib.contextmanager
def spool(
    stream: Readable, *, directory: Path | None = None, max_bytes: int | None = None
) -> Iterator[Spooled]:
    """Copy ``stream`` into a temporary file; yield it, remove it afterwards.

    Raises:
        TooLarge: more than ``max_bytes`` bytes; copying stops there (nothing is kept).
    """
    fd, name = tempfile.mkstemp(prefix="upload-", dir=directory)
    path = Path(name)
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := stream.read(CHUNK):
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise TooLarge(
                        f"the upload is larger than this dashboard's limit of {max_bytes} bytes "
                        "(MAX_ARTIFACT_BYTES, tracker ui --max-artifact-bytes)",
                        field="body",
                    )
                out.write(chunk)
                digest.update(chunk)
        yield Spooled(path, size, digest.hexdigest())
    finally:
        path.unlink(missing_ok=True)


def private_root(path: Path) -> Path:
    """``path`` as a directory only this process's user may enter: created 0700, refused
    when it belongs to another user or others may enter it (a staging root another local
    account made first could swap the parts).

    Raises:
        InvalidInput: naming the directory and what is wrong with it.
    """
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise InvalidInput(f"the upload staging directory {path} is not a directory", field="root")
    if info.st_uid != os.getuid():
        raise InvalidInput(
            f"the upload staging directory {path} belongs to another user (uid {info.st_uid}); "
            "remove it or give the dashboard another artifact root",
            field="root",
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)  # ours: take the others' permissions off
    return path


class Staging:
    """Multipart uploads in progress: ``<root>/<upload_id>/`` holds ``upload.json`` (what the
    parts become) and ``<n>.part`` per part received. ``max_bytes``: the most one upload's
    parts may add up to (and so each part)."""

    def __init__(self, root: Path, *, max_bytes: int | None = None) -> None:
        self.root = root
        self.max_bytes = max_bytes

    def _dir(self, upload_id: str) -> Path:
        return self.root / upload_id

    def create(self, upload_id: str, target: dict[str, Any]) -> None:
        private_root(self.root)
        self._sweep()
        folder = self._dir(upload_id)
        folder.mkdir(mode=0o700)
        (folder / "upload.json").write_text(json.dumps(target))

    def target(self, upload_id: str) -> dict[str, Any]:
        """What ``create`` recorded. Raises NotFound for an unknown (or finished) upload."""
        try:
            return dict(json.loads((self._dir(upload_id) / "upload.json").read_text()))
        except (OSError, ValueError):
            raise NotFound(
                f"multipart upload {upload_id} does not exist (completed, aborted or expired)",
                field="upload_id",
            ) from None

    def put_part(self, upload_id: str, number: int, stream: Readable) -> str:
        """Store part ``number``; return its ETag (the part's sha256)."""
        target = self.target(upload_id)
        if not 1 <= number <= int(target["num_parts"]):
            raise InvalidInput(
                f"part_number {number} is out of range: this upload has parts 1 to "
                f"{target['num_parts']}",
                field="part_number",
            )
        private_root(self.root)
        folder = self._dir(upload_id)
        room = None
        if self.max_bytes is not None:  # what the other parts left of the upload's limit
            others = sum(
                p.stat().st_size for p in folder.glob("*.part") if p.name != f"{number}.part"
            )
            room = max(0, self.max_bytes - others)
        with spool(stream, directory=folder, max_bytes=room) as part:
            os.replace(part.path, folder / f"{number}.part")
            return part.sha256

    @contextlib.contextmanager
    def assemble(self, upload_id: str, numbers: list[int]) -> Iterator[Spooled]:
        """Concatenate the parts in order into one file (yielded; removed afterwards)."""
        folder = self._dir(upload_id)
        missing = [n for n in numbers if not (folder / f"{n}.part").is_file()]
        if missing:
            raise InvalidInput(
                f"multipart upload {upload_id}: part(s) {missing[:10]} were never uploaded",
                field="parts",
            )
        parts = (open(folder / f"{n}.part", "rb") for n in numbers)  # noqa: SIM115
        with spool(_Concat(parts), directory=folder) as whole:
            yield whole

    def remove(self, upload_id: str) -> None:
        shutil.rmtree(self._dir(upload_id), ignore_errors=True)

    def _sweep(self) -> None:
        if not self.root.is_dir():
            return
        cutoff = time.time() - STALE_UPLOAD_S
        for folder in self.root.iterdir():
            with contextlib.suppress(OSError):
                if folder.stat().st_mtime < cutoff:
                    shutil.rmtree(folder, ignore_errors=True)


class _Concat:
    """A readable stream over several open files, closing each when it is exhausted."""

    def __init__(self, files: Iterator[IO[bytes]]) -> None:
        self._files = files
        self._current: IO[bytes] | None = next(self._files, None)

    def read(self, size: int = -1) -> bytes:
        while self._current is not None:
            data = self._current.read(size)
            if data:
                return data
            self._current.close()
            self._current = next(self._files, None)
        return b""
