"""S3BlobStore against a real S3-protocol server (moto's server mode in a subprocess): the
same contract as the local store, multipart for large files, and the store's artifacts on
an ``s3://`` root (SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.support.s3 import S3Server
from tracker.errors import InvalidInput, NotFound, StoreUnavailable
from tracker.store import Store
from tracker.store import artifacts as art
from tracker.store.blobs import BlobHashMismatch, hash_file, open_blob_store
from tracker.store.blobs_s3 import MULTIPART_CHUNK, MULTIPART_THRESHOLD, S3BlobStore
from tracker.store.runs import create_run


def test_round_trip_listing_and_delete(s3_env: str, s3_server: S3Server) -> None:
    blobs = open_blob_store(s3_env)
    assert isinstance(blobs, S3BlobStore)
    sha = blobs.put_bytes(b"hello s3")
    assert sha == hashlib.sha256(b"hello s3").hexdigest() and blobs.exists(sha)
    bucket = s3_env.split("/")[2]
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == [f"artifacts/{sha[:2]}/{sha[2:4]}/{sha}"]
    s3_server.client().put_object(Bucket=bucket, Key="artifacts/README", Body=b"not ours")
    assert [(s, n) for s, n, _ in blobs.iter_hashes()] == [(sha, 8)]
    with blobs.open(sha) as f:
        assert f.read() == b"hello s3"
    blobs.delete(sha)
    assert not blobs.exists(sha)
    with pytest.raises(NotFound, match=sha):
        blobs.open(sha)


def test_put_file_checks_the_hash(s3_env: str, tmp_path: Path) -> None:
    blobs = open_blob_store(s3_env)
    src = tmp_path / "f"
    src.write_bytes(b"abc")
    with pytest.raises(BlobHashMismatch):
        blobs.put_file(src, "1" * 64)
    assert list(blobs.iter_hashes()) == []


def test_bad_urls_and_an_unreachable_server(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInput, match="names no bucket"):
        open_blob_store("s3:///prefix")
    monkeypatch.setenv("TRACKER_S3_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens
    fake = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "1"}  # fmt: skip
    for name, value in fake.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(StoreUnavailable, match="s3://nobucket/p"):
        open_blob_store("s3://nobucket/p").exists("a" * 64)


def test_artifacts_on_an_s3_root(store: Store, s3_env: str, tmp_path: Path) -> None:
    store.artifact_root = s3_env
    run = create_run(store, "s3", "r").id
    info = art.put_artifact(store, run, "cfg/config.yaml", b"lr: 0.1\n")
    assert info.media_type == "application/yaml"
    with art.open_artifact(store, run, "cfg/config.yaml") as f:
        assert f.read() == b"lr: 0.1\n"
    art.delete_artifact(store, run, "cfg/config.yaml")
    report = art.gc_blobs(store, dry_run=False, grace_seconds=0)
    assert (report.blobs, report.deleted) == (1, 1)
    assert list(art.blob_store(store).iter_hashes()) == []


@pytest.mark.slow
def test_a_file_past_100_mb_goes_up_in_parts_and_comes_back_byte_exact(
    s3_env: str, s3_server: S3Server, tmp_path: Path
) -> None:
    size = 100 * 1024 * 1024 + 12345
    assert size > MULTIPART_THRESHOLD
    src = tmp_path / "big.bin"
    block = os.urandom(1024 * 1024)
    with open(src, "wb") as f:
        for i in range(size // len(block)):
            f.write(block[i % 7 :] + block[: i % 7])  # no two MiB alike
        f.write(os.urandom(size % len(block)))
    sha, _ = hash_file(src)
    blobs = open_blob_store(s3_env)
    blobs.put_file(src, sha)
    bucket = s3_env.split("/")[2]
    head = s3_server.client().head_object(
        Bucket=bucket, Key=f"artifacts/{sha[:2]}/{sha[2:4]}/{sha}"
    )
    parts = -(-size // MULTIPART_CHUNK)
    assert head["ContentLength"] == size and head["ETag"].strip('"').endswith(f"-{parts}")
    digest = hashlib.sha256()
    with blobs.open(sha) as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    assert digest.hexdigest() == sha


def test_without_boto3_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tracker.store.blobs_s3 import MissingExtra

    monkeypatch.setitem(sys.modules, "boto3", None)  # what a missing package looks like
    with pytest.raises(MissingExtra, match=r"pip install 'tracker\[s3\]'") as err:
        open_blob_store("s3://bucket/prefix")
    assert err.value.field == "artifact_root"
