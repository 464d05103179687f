"""tracker.store.snapshots on SQLite and PostgreSQL: a snapshot is stored once per tree,
never with a file missing, written back exactly (bytes and executable bits) into a new
directory or not at all, and its files survive ``tracker gc``."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tracker.entities import JobSpec
from tracker.errors import InvalidInput, NotFound
from tracker.rules.snapshot import FileEntry
from tracker.store import Store, queue, snapshots
from tracker.store.artifacts import blob_store, gc_blobs
from tracker.store.jobs import get_job


def _put(store: Store, tmp: Path, name: str, data: bytes, executable: bool = False) -> FileEntry:
    path = tmp / "src" / name.replace("/", "_")
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    snapshots.put_blob_file(store, path, sha)
    return FileEntry(name, sha, len(data), executable)


def test_the_same_tree_is_one_snapshot_and_a_job_names_it(
    store: Store, artifact_root: Path, tmp_path: Path
) -> None:
    files = [_put(store, tmp_path, "train.py", b"print(1)\n"), _put(store, tmp_path, "a/b", b"")]
    first = snapshots.save_snapshot(store, files, git_commit="abc1234", root_name="proj")
    again = snapshots.save_snapshot(store, files[::-1], git_commit="abc1234", root_name="proj")
    assert first.id == again.id and (first.files, first.bytes) == (2, 9)
    other = snapshots.save_snapshot(store, files[:1])
    assert other.id != first.id
    assert [f.path for f in snapshots.snapshot_files(store, first.id)] == ["a/b", "train.py"]
    job = queue.enqueue(store, JobSpec(argv=["python", "train.py"], snapshot_id=first.id))
    assert get_job(store, job.id).snapshot_id == first.id
    with pytest.raises(InvalidInput, match="snapshot 999 does not exist"):
        queue.enqueue(store, JobSpec(argv=["python", "train.py"], snapshot_id=999))


def test_a_file_not_uploaded_refuses_the_snapshot(
    store: Store, artifact_root: Path, tmp_path: Path
) -> None:
    ok = _put(store, tmp_path, "ok.py", b"x")
    lacking = FileEntry("later.py", hashlib.sha256(b"never sent").hexdigest(), 10)
    assert snapshots.missing_blobs(store, [ok.sha256, lacking.sha256]) == [lacking.sha256]
    with pytest.raises(InvalidInput, match=r"1 file\(s\) .* not uploaded yet \(first: later.py"):
        snapshots.save_snapshot(store, [ok, lacking])
    with pytest.raises(InvalidInput, match="at least one file"):
        snapshots.save_snapshot(store, [])
    with pytest.raises(InvalidInput, match="git_commit"):
        snapshots.save_snapshot(store, [ok], git_commit="not a commit")


def test_materialize_writes_the_exact_files_into_a_new_directory_only(
    store: Store, artifact_root: Path, tmp_path: Path
) -> None:
    data = os.urandom(3 * 1024 * 1024 + 5)  # several copy chunks
    files = [
        _put(store, tmp_path, "run.sh", b"#!/bin/sh\necho ok\n", executable=True),
        _put(store, tmp_path, "deep/er/weights.bin", data),
    ]
    info = snapshots.save_snapshot(store, files)
    dest = snapshots.materialize(store, info.id, tmp_path / "copies" / "attempt-1")
    assert (dest / "deep" / "er" / "weights.bin").read_bytes() == data
    assert os.access(dest / "run.sh", os.X_OK)
    assert not os.access(dest / "deep" / "er" / "weights.bin", os.X_OK)
    with pytest.raises(InvalidInput, match="exists"):
        snapshots.materialize(store, info.id, dest)
    # a blob gone: nothing half-written is left behind, and the error names the file
    blob_store(store).delete(files[1].sha256)
    with pytest.raises(NotFound, match=r"deep/er/weights\.bin"):
        snapshots.materialize(store, info.id, tmp_path / "copies" / "attempt-2")
    assert sorted(p.name for p in (tmp_path / "copies").iterdir()) == ["attempt-1"]
    with pytest.raises(NotFound, match="snapshot 12345 does not exist"):
        snapshots.materialize(store, 12345, tmp_path / "copies" / "attempt-3")


def test_gc_keeps_the_files_of_snapshots(store: Store, artifact_root: Path, tmp_path: Path) -> None:
    kept = _put(store, tmp_path, "train.py", b"used by a snapshot")
    snapshots.save_snapshot(store, [kept])
    loose = _put(store, tmp_path, "loose.py", b"uploaded, never saved in a snapshot")
    report = gc_blobs(store, dry_run=False, grace_seconds=0)
    assert report.deleted == 1
    assert blob_store(store).exists(kept.sha256) and not blob_store(store).exists(loose.sha256)
