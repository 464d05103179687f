"""LocalBlobStore: content addressed, atomic, hash-checked (a real directory)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tracker.errors import InvalidInput, NotFound
from tracker.store.blobs import BlobHashMismatch, LocalBlobStore, hash_file, open_blob_store


def test_layout_round_trip_and_listing(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "root")
    sha = blobs.put_bytes(b"abc")
    assert sha == hashlib.sha256(b"abc").hexdigest()
    assert (tmp_path / "root" / sha[:2] / sha[2:4] / sha).read_bytes() == b"abc"
    assert blobs.exists(sha) and blobs.put_bytes(b"abc") == sha
    with blobs.open(sha) as f:
        assert f.read() == b"abc"
    (tmp_path / "root" / "tmp" / "blob-leftover").write_bytes(b"partial")
    (tmp_path / "root" / "README").write_text("not a blob")
    assert [(s, n) for s, n, _ in blobs.iter_hashes()] == [(sha, 3)]
    blobs.delete(sha)
    blobs.delete(sha)  # already gone: fine
    assert not blobs.exists(sha) and list(blobs.iter_hashes()) == []
    with pytest.raises(NotFound, match=sha):
        blobs.open(sha)


def test_put_file_checks_the_hash_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "root")
    src = tmp_path / "f"
    src.write_bytes(os.urandom(2_500_000))
    sha, size = hash_file(src)
    with pytest.raises(BlobHashMismatch, match="not the announced"):
        blobs.put_file(src, "0" * 64)
    assert not blobs.exists("0" * 64) and list(blobs.iter_hashes()) == []
    blobs.put_file(src, sha)
    assert [(s, n) for s, n, _ in blobs.iter_hashes()] == [(sha, size)]
    assert list((tmp_path / "root" / "tmp").iterdir()) == []


def test_writing_an_existing_blob_again_touches_it(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path)
    sha = blobs.put_bytes(b"x")
    path = tmp_path / sha[:2] / sha[2:4] / sha
    os.utime(path, (1.0, 1.0))
    blobs.put_bytes(b"x")
    assert path.stat().st_mtime > 1.0


@pytest.mark.parametrize("sha", ["../../etc/passwd", "A" * 64, "0" * 63, ""])
def test_names_that_are_not_hashes_are_refused(tmp_path: Path, sha: str) -> None:
    with pytest.raises(InvalidInput, match="not a sha256"):
        LocalBlobStore(tmp_path).open(sha)


def test_open_blob_store_by_url(tmp_path: Path) -> None:
    assert isinstance(open_blob_store(str(tmp_path)), LocalBlobStore)
    local = open_blob_store(f"file://{tmp_path}/x")
    assert isinstance(local, LocalBlobStore) and local.root == tmp_path / "x"
    with pytest.raises(InvalidInput, match="only s3://"):
        open_blob_store("gs://bucket/x")
