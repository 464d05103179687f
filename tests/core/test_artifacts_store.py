"""Artifacts in the store: rows per (run, path), content-addressed blobs, media keys, gc.

Every test runs on a real SQLite file and on PostgreSQL, with a real directory as the root.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from tracker.errors import InvalidInput, NotFound
from tracker.store import Store
from tracker.store import artifacts as art
from tracker.store.blobs import LocalBlobStore
from tracker.store.runs import create_run


@pytest.fixture
def astore(store: Store, tmp_path: Path) -> Store:
    store.artifact_root = str(tmp_path / "blobs")
    return store


def _run(store: Store, name: str = "r") -> int:
    return create_run(store, "art", name).id


def _blobs(store: Store) -> list[str]:
    return sorted(sha for sha, _, _ in art.blob_store(store).iter_hashes())


def test_put_bytes_then_get_list_and_read_back(astore: Store) -> None:
    run = _run(astore)
    info = art.put_artifact(
        astore, run, "eval/report.txt", b"hello", step=3, meta={"caption": "c"}, now=10.0
    )
    sha = hashlib.sha256(b"hello").hexdigest()
    assert (info.run_id, info.path, info.size, info.sha256) == (run, "eval/report.txt", 5, sha)
    assert (info.media_type, info.step, info.created_at, info.meta) == (
        "text/plain",
        3,
        10.0,
        {"caption": "c"},
    )
    assert art.get_artifact(astore, run, "eval/report.txt") == info
    assert art.list_artifacts(astore, run) == [info]
    with art.open_artifact(astore, run, "eval/report.txt") as f:
        assert f.read() == b"hello"
    assert _blobs(astore) == [sha]


def test_put_a_file_streams_it_and_dedupes_across_runs(astore: Store, tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 7)
    src = tmp_path / "weights.bin"
    src.write_bytes(data)
    a, b = _run(astore, "a"), _run(astore, "b")
    ia = art.put_artifact(astore, a, "w.bin", src)
    ib = art.put_artifact(astore, b, "copy/w.bin", data)
    assert ia.sha256 == ib.sha256 == hashlib.sha256(data).hexdigest()
    assert ia.size == len(data) and ia.media_type == "application/octet-stream"
    assert _blobs(astore) == [ia.sha256]  # one blob for both runs
    with art.open_artifact(astore, b, "copy/w.bin") as f:
        assert f.read() == data


def test_writing_a_path_again_replaces_its_row(astore: Store) -> None:
    run = _run(astore)
    art.put_artifact(astore, run, "a.json", b"{}", step=1)
    new = art.put_artifact(astore, run, "a.json", b"[1]", media_type="text/plain", step=2)
    assert art.list_artifacts(astore, run) == [new]
    assert (new.media_type, new.step) == ("text/plain", 2)
    with art.open_artifact(astore, run, "a.json") as f:
        assert f.read() == b"[1]"


def test_list_by_prefix_is_literal_and_sorted(astore: Store) -> None:
    run = _run(astore)
    for path in ["d/b", "d/a", "dx/c", "d%/e", "d_/f", "top"]:
        art.put_artifact(astore, run, path, path.encode())
    assert [i.path for i in art.list_artifacts(astore, run)] == [
        "d%/e",
        "d/a",
        "d/b",
        "d_/f",
        "dx/c",
        "top",
    ]
    assert [i.path for i in art.list_artifacts(astore, run, "d/")] == ["d/a", "d/b"]
    assert [i.path for i in art.list_artifacts(astore, run, "d%/")] == ["d%/e"]
    assert [i.path for i in art.list_artifacts(astore, run, "d_")] == ["d_/f"]
    assert art.list_artifacts(astore, _run(astore, "other")) == []


def test_missing_run_and_missing_path_are_not_found(astore: Store) -> None:
    run = _run(astore)
    with pytest.raises(NotFound, match="run 999 does not exist"):
        art.put_artifact(astore, 999, "a", b"x")
    assert _blobs(astore) == []  # nothing stored for a run that is not there
    with pytest.raises(NotFound, match="run 999"):
        art.list_artifacts(astore, 999)
    with pytest.raises(NotFound, match="run 999"):
        art.get_artifact(astore, 999, "a")
    with pytest.raises(NotFound, match=f"run {run} has no artifact 'a'"):
        art.get_artifact(astore, run, "a")
    with pytest.raises(NotFound, match=f"run {run} has no artifact 'a'"):
        art.open_artifact(astore, run, "a")
    with pytest.raises(NotFound, match=f"run {run} has no artifact 'a'"):
        art.delete_artifact(astore, run, "a")


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../x", "'..' segment"),
        ("/etc/passwd", "is absolute"),
        ("a\\b", "backslash"),
        ("a\x00b", "NUL"),
        ("a//b", "empty segment"),
        ("", "0 characters"),
    ],
)
def test_bad_paths_are_refused_and_nothing_is_stored(
    astore: Store, path: str, problem: str
) -> None:
    run = _run(astore)
    with pytest.raises(InvalidInput, match=problem) as err:
        art.put_artifact(astore, run, path, b"x")
    assert err.value.field == "path" and "relative posix" in err.value.message
    assert _blobs(astore) == [] and art.list_artifacts(astore, run) == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"media_type": "text/html; x"}, "media_type"),
        ({"step": 1.5}, "step"),
        ({"step": True}, "step"),
        ({"meta": {"x": float("nan")}}, "meta"),
        ({"meta": ["not", "a", "dict"]}, "meta"),
        ({"sha256": "0" * 64}, "sha256"),
    ],
)
def test_bad_fields_are_refused_and_nothing_is_stored(
    astore: Store, kwargs: dict, field: str
) -> None:
    run = _run(astore)
    art.put_artifact(astore, run, "keep.txt", b"old")
    with pytest.raises(InvalidInput) as err:
        art.put_artifact(astore, run, "keep.txt", b"new", **kwargs)
    assert err.value.field == field
    with art.open_artifact(astore, run, "keep.txt") as f:
        assert f.read() == b"old"  # bad input never loses stored data
    assert len(_blobs(astore)) == 1


def test_delete_removes_the_row_and_keeps_the_blob_for_gc(astore: Store) -> None:
    run = _run(astore)
    info = art.put_artifact(astore, run, "x.bin", b"abc")
    art.delete_artifact(astore, run, "x.bin")
    assert art.list_artifacts(astore, run) == []
    assert _blobs(astore) == [info.sha256]


def test_media_keys_from_media_paths(astore: Store) -> None:
    run = _run(astore)
    for path in [
        "media/images/samples/000000002.png",
        "media/images/samples/000000001.jpg",
        "media/images/val/pred/000000010.png",
        "media/figures/cm/000000005.plotly.json",
        "media/histograms/w/layer1/000000000.json",
        "media/histograms/w/layer1/000000001.json",
        "media/images/bad/notastep.png",  # ignored: not a media path
        "media/other/k/000000001.png",
        "images/k/000000001.png",
    ]:
        art.put_artifact(astore, run, path, path.encode())
    assert art.media_keys(astore, run) == {
        "figures": {"cm": [5]},
        "histograms": {"w/layer1": [0, 1]},
        "images": {"samples": [1, 2], "val/pred": [10]},
    }
    assert art.media_keys(astore, _run(astore, "empty")) == {}
    with pytest.raises(NotFound):
        art.media_keys(astore, 999)


def test_gc_is_a_dry_run_by_default_and_keeps_young_and_referenced_blobs(
    astore: Store,
) -> None:
    run = _run(astore)
    kept = art.put_artifact(astore, run, "kept", b"kept")
    art.put_artifact(astore, run, "gone", b"gone-bytes")
    art.delete_artifact(astore, run, "gone")
    young = art.blob_store(astore).put_bytes(b"young")

    report = art.gc_blobs(astore, now=0.0)  # everything is "in the future": all young
    assert (report.blobs, report.referenced, report.unreferenced, report.young) == (3, 1, 0, 2)

    later = 1e12
    report = art.gc_blobs(astore, now=later)
    assert (report.unreferenced, report.unreferenced_bytes, report.deleted) == (2, 15, 0)
    assert report.dry_run and len(_blobs(astore)) == 3

    report = art.gc_blobs(astore, dry_run=False, now=later)
    assert (report.unreferenced, report.deleted, report.dry_run) == (2, 2, False)
    assert _blobs(astore) == [kept.sha256] and young not in _blobs(astore)
    with art.open_artifact(astore, run, "kept") as f:
        assert f.read() == b"kept"


def test_cascade_when_a_run_is_deleted(astore: Store) -> None:
    run = _run(astore)
    art.put_artifact(astore, run, "a", b"a")
    with astore.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM runs WHERE id = :id"), {"id": run})
        assert conn.execute(sa.text("SELECT count(*) FROM artifacts")).scalar() == 0


def test_default_root_sits_beside_the_sqlite_file(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'db' / 'tracker.db'}")
    assert art.artifact_root(store) == str(tmp_path / "db" / "artifacts")
    blobs = art.blob_store(store)
    assert isinstance(blobs, LocalBlobStore) and blobs.root == tmp_path / "db" / "artifacts"
    store.close()


def test_env_root_and_explicit_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(f"sqlite:///{tmp_path / 'tracker.db'}")
    monkeypatch.setenv(art.ARTIFACT_ROOT_ENV, str(tmp_path / "env-root"))
    assert art.artifact_root(store) == str(tmp_path / "env-root")
    store.artifact_root = str(tmp_path / "flag-root")  # the CLI flag wins over the variable
    assert art.artifact_root(store) == str(tmp_path / "flag-root")
    store.close()


@pytest.mark.parametrize("root", [".", "..", "file://{db}"])
def test_a_root_that_holds_the_database_is_refused(tmp_path: Path, root: str) -> None:
    db_dir = tmp_path / "store"
    store = Store(f"sqlite:///{db_dir / 'tracker.db'}")
    os.chdir(db_dir)
    store.artifact_root = root.format(db=db_dir)
    with pytest.raises(InvalidInput, match="contains the database") as err:
        art.put_artifact(store, _run(store), "a", b"a")
    assert err.value.field == "artifact_root"
    assert not (db_dir / "tmp").exists() and not list(db_dir.glob("??/"))
    store.close()


def test_postgresql_needs_a_root(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(art.ARTIFACT_ROOT_ENV, raising=False)
    store = Store(store_url)
    try:
        if store.dialect == "sqlite":
            assert art.artifact_root(store).endswith("artifacts")
            return
        run = _run(store)
        with pytest.raises(InvalidInput, match="TRACKER_ARTIFACT_ROOT") as err:
            art.put_artifact(store, run, "a", b"a")
        assert err.value.field == "artifact_root"
    finally:
        store.close()


def test_spool_writes_into_the_roots_tmp_and_gc_removes_stale_leftovers(astore: Store) -> None:
    import io

    from tracker.errors import TooLarge

    root = Path(art.artifact_root(astore))
    with art.spool(io.BytesIO(b"x" * 3000), store=astore) as (tmp, sha, size):
        assert tmp.parent == root / "tmp" and tmp.read_bytes() == b"x" * 3000
        assert (sha, size) == (hashlib.sha256(b"x" * 3000).hexdigest(), 3000)
    assert list((root / "tmp").iterdir()) == []
    with (
        pytest.raises(TooLarge, match="limit of 100 bytes"),
        art.spool(io.BytesIO(b"x" * 101), max_bytes=100, store=astore),
    ):
        pass
    assert list((root / "tmp").iterdir()) == []
    leftover = root / "tmp" / "upload-crashed"
    leftover.write_bytes(b"partial")
    assert art.gc_blobs(astore, now=0.0).temporary == 0  # young: may be an upload in flight
    report = art.gc_blobs(astore, dry_run=True, now=1e12)
    assert report.temporary == 1 and leftover.exists()
    assert art.gc_blobs(astore, dry_run=False, now=1e12).temporary == 1
    assert not leftover.exists()


def test_a_file_with_an_announced_hash_is_checked_new_blob_or_not(
    astore: Store, tmp_path: Path
) -> None:
    run = _run(astore)
    src = tmp_path / "f.bin"
    src.write_bytes(b"payload")
    sha = hashlib.sha256(b"payload").hexdigest()
    other = art.blob_store(astore).put_bytes(b"other")
    for wrong in ["1" * 64, other]:  # a new blob, and one that exists already
        with pytest.raises(InvalidInput) as err:
            art.put_artifact(astore, run, "f.bin", src, sha256=wrong)
        assert err.value.field == "sha256"
    with pytest.raises(InvalidInput, match="not a sha256"):
        art.put_artifact(astore, run, "f.bin", src, sha256="xyz")
    assert art.list_artifacts(astore, run) == [] and _blobs(astore) == [other]
    info = art.put_artifact(astore, run, "f.bin", src, sha256=sha.upper())
    assert (info.sha256, info.size) == (sha, 7)
    again = art.put_artifact(astore, run, "g.bin", src, sha256=sha)  # the blob exists now
    assert again.sha256 == sha and sorted(_blobs(astore)) == sorted([other, sha])
