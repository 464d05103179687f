"""A real small filesystem (a size-limited tmpfs) that a test fills and empties again.

Mounting needs root (the CI runs as root); elsewhere the tests that use it skip with the
reason. ``fill`` writes a file until the filesystem answers ENOSPC, ``free`` deletes it.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_filesystem(path: Path, size_mib: int) -> Iterator[Path]:
    """Mounts a ``size_mib`` MiB tmpfs on ``path`` (created) and unmounts it afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("a small filesystem needs root to mount (the CI runs as root)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0700", "tmpfs", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(path: Path) -> Path:
    """Writes ``path/filler`` until the filesystem is full; returns the file."""
    filler = path / "filler"
    block = b"\0" * (1 << 16)
    with open(filler, "wb", buffering=0) as f:
        while True:
            try:
                f.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    # the last few bytes too: a write smaller than a block may still have fitted
    with open(filler, "ab", buffering=0) as f:
        for _ in range(1 << 12):
            try:
                f.write(b"\0" * 512)
            except OSError:
                break
    return filler


def free(filler: Path) -> None:
    filler.unlink(missing_ok=True)
