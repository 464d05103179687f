"""Blob stores: the bytes of artifacts, content addressed by their sha256.

A blob is written once and never changed; the ``artifacts`` table says which runs and paths
refer to it, so one file logged by a hundred runs is stored once. Garbage (blobs no row
refers to) is removed by ``tracker gc`` (:func:`tracker.store.artifacts.gc_blobs`).

* :class:`LocalBlobStore` keeps ``root/ab/cd/<sha256>``. A write goes to a temporary file in
  ``root/tmp`` (same file system), is hashed while it is copied, fsynced, and renamed into
  place: a reader never sees a partial blob, and a crash leaves only a ``tmp`` file. A copy
  whose hash is not the one announced is refused (:class:`BlobHashMismatch`), nothing stored.
* :func:`open_blob_store` turns a root into a store: ``s3://bucket/prefix`` is an
  :class:`~tracker.store.blobs_s3.S3BlobStore` (the ``s3`` extra: boto3, imported only then),
  ``file:///dir`` or a plain directory is local.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from tracker.errors import InvalidInput, NotFound

__all__ = [
    "CHUNK",
    "BlobHashMismatch",
    "BlobStore",
    "LocalBlobStore",
    "check_sha256",
    "hash_file",
    "open_blob_store",
]

CHUNK = 1 << 20
_SHA_RE = re.compile(r"[0-9a-f]{64}")


class BlobHashMismatch(InvalidInput):
    """The bytes given do not hash to the sha256 announced with them; nothing was stored."""

    code = "sha256_mismatch"


@runtime_checkable
class BlobStore(Protocol):
    """Where blob bytes live. Every method may raise OSError (or the S3 client's errors
    translated to :class:`~tracker.errors.StoreUnavailable`)."""

    url: str

    def put_file(self, path: Path, sha256: str, *, sync: bool = True) -> None:
        """Store the file at ``path`` as blob ``sha256`` (a no-op if it exists).
        ``sync=False``: not flushed to disk yet (many small blobs at once; the caller calls
        :meth:`flush` before recording them). Raises BlobHashMismatch if the file does not
        hash to ``sha256``."""
        ...

    def flush(self) -> None:
        """Make every blob written with ``sync=False`` durable."""
        ...

    def put_bytes(self, data: bytes) -> str:
        """Store ``data``; return its sha256."""
        ...

    def open(self, sha256: str) -> BinaryIO:
        """A binary file object reading the blob. Raises NotFound."""
        ...

    def exists(self, sha256: str) -> bool: ...

    def delete(self, sha256: str) -> None:
        """Remove the blob (no error if it is already gone)."""
        ...

    def iter_hashes(self) -> Iterator[tuple[str, int, float]]:
        """Every stored blob as ``(sha256, size in bytes, last written as epoch seconds)``."""
        ...


def check_sha256(value: object, *, field: str = "sha256") -> str:
    """A sha256 as 64 lowercase hex digits; raise InvalidInput otherwise."""
    if not isinstance(value, str) or not _SHA_RE.fullmatch(value):
        raise InvalidInput(
            f"{field} {str(value)[:80]!r} is not a sha256 (64 lowercase hex digits)", field=field
        )
    return value


def hash_file(path: Path) -> tuple[str, int]:
    """``(sha256 hex, size)`` of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


class LocalBlobStore:
    """Blobs in a directory: ``root/ab/cd/<sha256>``, written by tmp file + rename."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().absolute()
        self.url = str(self.root)
        self._made: set[str] = set()  # directories known to exist (a mkdir per blob is slow)

    def __repr__(self) -> str:
        return f"LocalBlobStore({str(self.root)!r})"

    def _path(self, sha256: str) -> Path:
        check_sha256(sha256)
        return self.root / sha256[:2] / sha256[2:4] / sha256

    def _dir(self, path: Path) -> None:
        key = str(path)
        if key not in self._made:
            path.mkdir(parents=True, exist_ok=True)
            self._made.add(key)

    def _tmp(self) -> tuple[int, str]:
        tmp_dir = self.root / "tmp"
        self._dir(tmp_dir)
        try:
            return tempfile.mkstemp(dir=tmp_dir, prefix="blob-")
        except FileNotFoundError:  # removed meanwhile
            self._made.clear()
            tmp_dir.mkdir(parents=True, exist_ok=True)
            return tempfile.mkstemp(dir=tmp_dir, prefix="blob-")

    def _commit(self, tmp: str, sha256: str) -> None:
        final = self._path(sha256)
        self._dir(final.parent)
        try:
            os.replace(tmp, final)
        except FileNotFoundError:  # its directory was removed meanwhile (gc, by hand)
            self._made.clear()
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, final)

    def _touch(self, sha256: str) -> bool:
        """Whether the blob exists; if so, mark it as just written, so that a ``tracker gc``
        running now keeps it for its grace period while the new row is being inserted."""
        try:
            os.utime(self._path(sha256))
        except FileNotFoundError:
            return False
        return True

    def put_file(self, path: Path, sha256: str, *, sync: bool = True) -> None:
        if self._touch(sha256):
            return
        fd, tmp = self._tmp()
        try:
            digest = hashlib.sha256()
            with open(path, "rb") as src, os.fdopen(fd, "wb") as dst:
                while chunk := src.read(CHUNK):
                    digest.update(chunk)
                    dst.write(chunk)
                dst.flush()
                if sync:
                    os.fsync(dst.fileno())
            if digest.hexdigest() != sha256:
                raise BlobHashMismatch(
                    f"{path} hashes to {digest.hexdigest()}, not the announced {sha256} "
                    "(changed while it was copied?); nothing stored",
                    field="sha256",
                )
            self._commit(tmp, sha256)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def flush(self) -> None:
        # one flush of the file system instead of an fsync per blob (3 ms each here)
        os.sync()

    def put_bytes(self, data: bytes) -> str:
        sha256 = hashlib.sha256(data).hexdigest()
        if self._touch(sha256):
            return sha256
        fd, tmp = self._tmp()
        try:
            with os.fdopen(fd, "wb") as dst:
                dst.write(data)
                dst.flush()
                os.fsync(dst.fileno())
            self._commit(tmp, sha256)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return sha256

    def open(self, sha256: str) -> BinaryIO:
        try:
            return open(self._path(sha256), "rb")
        except FileNotFoundError:
            raise NotFound(f"blob {sha256} is not in {self.root}", field="sha256") from None

    def exists(self, sha256: str) -> bool:
        return self._path(sha256).is_file()

    def delete(self, sha256: str) -> None:
        self._path(sha256).unlink(missing_ok=True)

    def iter_hashes(self) -> Iterator[tuple[str, int, float]]:
        if not self.root.is_dir():
            return
        for first in sorted(self.root.iterdir()):
            if len(first.name) != 2 or not first.is_dir():
                continue  # tmp/ and anything not ours
            for second in sorted(first.iterdir()):
                if not second.is_dir():
                    continue
                for blob in sorted(second.iterdir()):
                    if _SHA_RE.fullmatch(blob.name) and blob.name.startswith(
                        first.name + second.name
                    ):
                        stat = blob.stat()
                        yield blob.name, stat.st_size, stat.st_mtime


def open_blob_store(url: str | Path) -> BlobStore:
    """The blob store for an artifact root: ``s3://bucket/prefix``, ``file:///dir`` or a
    directory path.

    Raises:
        InvalidInput: an unknown scheme, or an s3 URL without a bucket.
        MissingExtra (an InvalidInput): ``s3://`` without boto3 installed (``tracker[s3]``).
    """
    text = str(url)
    if text.startswith("s3://"):
        from tracker.store.blobs_s3 import S3BlobStore

        return S3BlobStore(text)
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif re.match(r"[A-Za-z][A-Za-z0-9+.-]+://", text):
        raise InvalidInput(
            f"artifact root {text!r}: only s3://bucket/prefix, file:///dir or a directory are "
            "supported",
            field="artifact_root",
        )
    if not text:
        raise InvalidInput("the artifact root is empty", field="artifact_root")
    return LocalBlobStore(text)
