"""A code snapshot stored the way ``tracker submit`` stores one (tracker.store.snapshots):
each file's bytes put as a blob from a real file, then the list saved with its commit and
diff."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from pathlib import Path

from tracker.entities import SnapshotInfo
from tracker.rules.snapshot import FileEntry
from tracker.store import Store
from tracker.store.snapshots import put_blob_file, save_snapshot


def store_snapshot(
    store: Store,
    workdir: Path,
    files: Mapping[str, bytes],
    *,
    executable: Collection[str] = (),
    git_commit: str | None = None,
    git_diff: str | None = None,
    root_name: str = "project",
) -> SnapshotInfo:
    """Write ``files`` (path -> bytes) under ``workdir``, put each as a blob, save the
    snapshot; ``executable`` names the paths with the executable bit."""
    entries = []
    for path, data in files.items():
        local = workdir.joinpath(*path.split("/"))
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(data)
        sha256 = hashlib.sha256(data).hexdigest()
        put_blob_file(store, local, sha256)
        entries.append(FileEntry(path, sha256, len(data), path in executable))
    return save_snapshot(
        store, entries, git_commit=git_commit, git_diff=git_diff, root_name=root_name
    )
