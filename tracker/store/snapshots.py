"""Code snapshots: the files a job runs, stored once per distinct tree.

A snapshot row lists files (``snapshot_files``: path, sha256, size, executable bit) whose
bytes are blobs of the artifact root (:func:`tracker.store.artifacts.blob_store`), so a file
shared by many snapshots -- or a second submission of the same tree -- is stored once. The
submitter uploads the blobs the store lacks (:func:`missing_blobs`, then
:func:`put_blob_file` or the HTTP upload), then saves the list (:func:`save_snapshot`:
refused while a blob is missing); a job names the snapshot (``jobs.snapshot_id``). An
executor writes it into a fresh directory per attempt (:func:`materialize`) and runs the job
there. ``tracker gc`` keeps the blobs a snapshot file names
(:func:`tracker.store.artifacts.gc_blobs`).

The pure rules (paths, caps, identity, ``.gitignore``) are :mod:`tracker.rules.snapshot`.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tracker.entities import SnapshotInfo
from tracker.errors import InvalidInput, NotFound
from tracker.rules.snapshot import MAX_DIFF_CHARS, FileEntry, check_entries, snapshot_digest
from tracker.store import models as m
from tracker.store.artifacts import blob_store
from tracker.store.blobs import CHUNK, check_sha256
from tracker.store.engine import read_conn, write_begin
from tracker.store.rows import dialect_insert
from tracker.store.store import Store

__all__ = [
    "flush_blobs",
    "get_snapshot",
    "materialize",
    "missing_blobs",
    "put_blob_file",
    "save_snapshot",
    "snapshot_files",
]

_COMMIT = re.compile(r"[0-9a-f]{7,64}")
MAX_HASHES = 50_000  # per missing_blobs call (a body of that many hashes is ~3.3 MB)


def missing_blobs(store: Store, hashes: Iterable[str]) -> list[str]:
    """The hashes among ``hashes`` whose blob the artifact root lacks (sorted, each once).

    Raises InvalidInput: a malformed hash, too many at once, no artifact root.
    """
    wanted = sorted({check_sha256(h) for h in hashes})
    if len(wanted) > MAX_HASHES:
        raise InvalidInput(
            f"{len(wanted)} hashes at once: ask for at most {MAX_HASHES}", field="sha256"
        )
    blobs = blob_store(store)
    return [h for h in wanted if not blobs.exists(h)]


def put_blob_file(store: Store, path: Path, sha256: str, *, sync: bool = True) -> None:
    """Store the file at ``path`` as blob ``sha256`` (nothing if it is there already).
    ``sync=False`` for many at once, then :func:`flush_blobs` before :func:`save_snapshot`.
    Raises BlobHashMismatch when the file does not hash to ``sha256``."""
    blob_store(store).put_file(path, check_sha256(sha256), sync=sync)


def flush_blobs(store: Store) -> None:
    """Make the blobs written with ``sync=False`` durable."""
    blob_store(store).flush()


def save_snapshot(
    store: Store,
    files: Sequence[FileEntry | dict[str, Any]],
    *,
    git_commit: str | None = None,
    git_diff: str | None = None,
    root_name: str = "",
    now: float | None = None,
) -> SnapshotInfo:
    """Store a snapshot of ``files`` (entries or their JSON form) whose blobs are all in the
    artifact root; the same tree (files, commit and diff) gives the same snapshot back.

    Raises:
        InvalidInput: a bad file entry (:func:`tracker.rules.snapshot.check_entries`), no
            files, a bad commit, a blob not uploaded yet (the message counts them and names
            the first).
    """
    entries = check_entries(_as_dicts(files))
    if not entries:
        raise InvalidInput("a snapshot needs at least one file", field="files")
    if git_commit is not None and not _COMMIT.fullmatch(str(git_commit)):
        raise InvalidInput(
            f"git_commit {git_commit!r}: must be a hex commit id (7 to 64 digits)",
            field="git_commit",
        )
    if git_diff is not None and not isinstance(git_diff, str):
        raise InvalidInput("git_diff must be text", field="git_diff")
    if git_diff is not None and len(git_diff) > MAX_DIFF_CHARS:
        git_diff = git_diff[:MAX_DIFF_CHARS] + "\n... (diff cut at 1,000,000 characters)\n"
    root_name = str(root_name or "")[:255]
    lacking = missing_blobs(store, (e.sha256 for e in entries))
    if lacking:
        first = next(e.path for e in entries if e.sha256 == lacking[0])
        raise InvalidInput(
            f"{len(lacking)} file(s) of the snapshot are not uploaded yet (first: {first}, "
            f"sha256 {lacking[0]}): upload them, then save the snapshot",
            field="files",
        )
    digest = snapshot_digest(entries, git_commit, git_diff)
    now = store.now() if now is None else now
    with write_begin(store.engine) as conn:
        found = _by_digest(conn, digest)
        if found is None:
            insert = dialect_insert(conn)(m.SnapshotRow).values(
                digest=digest, files=len(entries), bytes=sum(e.size for e in entries),
                git_commit=git_commit, git_diff=git_diff, root_name=root_name, created_at=now,
            ).on_conflict_do_nothing(index_elements=["digest"])  # fmt: skip
            conn.execute(insert)
            found = _by_digest(conn, digest)
            assert found is not None
            if not conn.execute(
                sa.select(m.SnapshotFileRow.path).where(m.SnapshotFileRow.snapshot_id == found.id)
            ).first():
                conn.execute(
                    sa.insert(m.SnapshotFileRow),
                    [
                        {"snapshot_id": found.id, "path": e.path, "sha256": e.sha256,
                         "size": e.size, "executable": e.executable}
                        for e in entries
                    ],
                )  # fmt: skip
    return _info(found)


def _as_dicts(files: Sequence[FileEntry | dict[str, Any]]) -> list[object]:
    out: list[object] = []
    for f in files:
        if isinstance(f, FileEntry):
            out.append({"path": f.path, "sha256": f.sha256, "size": f.size,
                        "executable": f.executable})  # fmt: skip
        else:
            out.append(f)
    return out


def _by_digest(conn: sa.Connection, digest: str) -> Any:
    query = sa.select(*m.SnapshotRow.__table__.columns).where(m.SnapshotRow.digest == digest)
    return conn.execute(query).first()


def _info(row: Any) -> SnapshotInfo:
    return SnapshotInfo(
        row.id, row.digest, row.files, row.bytes, row.git_commit, row.git_diff,
        row.root_name, row.created_at,
    )  # fmt: skip


def get_snapshot(store: Store, snapshot_id: int) -> SnapshotInfo:
    """Raises NotFound for an unknown snapshot."""
    query = sa.select(*m.SnapshotRow.__table__.columns).where(m.SnapshotRow.id == snapshot_id)
    with read_conn(store.engine) as conn:
        row = conn.execute(query).first()
    if row is None:
        raise NotFound(f"snapshot {snapshot_id} does not exist", field="snapshot")
    return _info(row)


def snapshot_files(store: Store, snapshot_id: int) -> list[FileEntry]:
    """The files of a snapshot, by path. Raises NotFound for an unknown snapshot."""
    get_snapshot(store, snapshot_id)
    f = m.SnapshotFileRow
    query = (
        sa.select(f.path, f.sha256, f.size, f.executable)
        .where(f.snapshot_id == snapshot_id)
        .order_by(f.path)
    )
    with read_conn(store.engine) as conn:
        return [FileEntry(p, s, n, bool(x)) for p, s, n, x in conn.execute(query)]


def materialize(store: Store, snapshot_id: int, dest: Path) -> Path:
    """Write the snapshot's files under ``dest``, which must not exist yet (a fresh directory
    per attempt); returns ``dest``. Written into a temporary sibling and renamed, so ``dest``
    is either complete or absent.

    Raises:
        NotFound: no such snapshot, or one of its blobs is gone from the artifact root.
        InvalidInput: ``dest`` exists already; no artifact root.
        OSError: the local file system refused (full disk, permissions).
    """
    dest = Path(dest)
    if dest.exists():
        raise InvalidInput(
            f"{dest} exists: a snapshot is written into a new directory", field="dest"
        )
    files = snapshot_files(store, snapshot_id)
    blobs = blob_store(store)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        for entry in files:
            target = tmp.joinpath(*entry.path.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                src = blobs.open(entry.sha256)
            except NotFound:
                raise NotFound(
                    f"snapshot {snapshot_id}: the file {entry.path} (blob {entry.sha256}) is "
                    "gone from the artifact root",
                    field="snapshot",
                ) from None
            with src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, CHUNK)
            os.chmod(target, 0o755 if entry.executable else 0o644)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest
