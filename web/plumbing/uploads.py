"""Raw request bodies spooled to disk: single artifact uploads and multipart uploads.

A body is streamed into a temporary file in chunks (never held in memory), counting and
hashing as it goes, so a file of several GiB costs one chunk of memory. Multipart uploads
(MLflow's ``mpu/create``, part PUTs, ``mpu/complete``) stage their parts in a directory per
upload id (128 random bits) under the system's temporary directory; staged uploads older than
:data:`STALE_UPLOAD_S` are removed when the next one is created.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from tracker.errors import InvalidInput, NotFound

__all__ = ["CHUNK", "STALE_UPLOAD_S", "Spooled", "Staging", "spool"]

CHUNK = 1024 * 1024
STALE_UPLOAD_S = 24 * 3600.0


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class Spooled:
    path: Path
    size: int
    sha256: str


@contextlib.contextmanager
def spool(stream: Readable, *, directory: Path | None = None) -> Iterator[Spooled]:
    """Copy ``stream`` into a temporary file; yield it, remove it afterwards."""
    fd, name = tempfile.mkstemp(prefix="upload-", dir=directory)
    path = Path(name)
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := stream.read(CHUNK):
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        yield Spooled(path, size, digest.hexdigest())
    finally:
        path.unlink(missing_ok=True)


class Staging:
    """Multipart uploads in progress: ``<root>/<upload_id>/`` holds ``upload.json`` (what the
    parts become) and ``<n>.part`` per part received."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or Path(tempfile.gettempdir()) / "tracker-multipart"

    def _dir(self, upload_id: str) -> Path:
        return self.root / upload_id

    def create(self, upload_id: str, target: dict[str, Any]) -> None:
        self._sweep()
        folder = self._dir(upload_id)
        folder.mkdir(parents=True, mode=0o700)
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
        folder = self._dir(upload_id)
        with spool(stream, directory=folder) as part:
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
