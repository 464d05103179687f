"""Checkpoint digests: the sha256 of a file, or of a whole directory (stdlib only).

A directory (a Hugging Face ``checkpoint-N/`` folder) is digested as the sha256 of its
manifest: one line ``<relative posix path>\\0<size>\\0<sha256 of the file>\\n`` per regular
file, sorted by path; its size is the sum of its files' sizes. Renaming, adding, removing or
changing any file inside changes the digest. The client records with it, the store's doctor
and a retried job's resume verify with it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK = 1 << 20

__all__ = ["CHUNK", "file_sha256", "path_digest", "verify"]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def path_digest(path: Path) -> tuple[int, str]:
    """(bytes, sha256 hex) of a file, or of a directory's manifest (see the module doc).

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    if not path.is_dir():
        return path.stat().st_size, file_sha256(path)
    manifest = hashlib.sha256()
    total = 0
    files = sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        size = file.stat().st_size
        total += size
        rel = file.relative_to(path).as_posix()
        manifest.update(f"{rel}\0{size}\0{file_sha256(file)}\n".encode())
    return total, manifest.hexdigest()


def verify(path: Path, size: int, sha256: str) -> str:
    """``"ok"``, ``"missing"`` or ``"corrupt"`` for a recorded checkpoint."""
    try:
        if not path.exists():
            return "missing"
        if not path.is_dir() and path.stat().st_size != size:
            return "corrupt"
        actual_size, digest = path_digest(path)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "corrupt"
    return "ok" if (actual_size, digest) == (size, sha256) else "corrupt"
