"""Atomic checkpoint files: temporary file + fsync + rename, with size and sha256.

A crash mid-save leaves at most a ``.tmp-*`` file beside the target, never a file under
the final name; the checkpoint row is written only after the rename.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from tracker.errors import CheckpointError
from tracker.filedigest import CHUNK, file_sha256

__all__ = ["CHUNK", "atomic_save", "file_sha256"]


def atomic_save(obj: Any, path: Path) -> tuple[int, str]:
    """``torch.save`` ``obj`` to ``path`` atomically; returns (bytes, sha256 hex).

    Raises:
        CheckpointError: torch is not installed, or writing failed (the target is untouched).
    """
    try:
        import torch
    except ImportError as exc:
        raise CheckpointError("save_checkpoint needs torch: pip install torch") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            hashing = _HashingWriter(fh)
            torch.save(obj, hashing)  # type: ignore[arg-type]  # a write-only file object
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if isinstance(exc, Exception):
            raise CheckpointError(f"saving checkpoint {path} failed: {exc}") from exc
        raise
    return hashing.size, hashing.sha256.hexdigest()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _HashingWriter:
    """A file-like object that hashes what passes through, so the file is read only once."""

    def __init__(self, fh: Any) -> None:
        self._fh = fh
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self._fh.write(data)

    def flush(self) -> None:
        self._fh.flush()
