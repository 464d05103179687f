"""Artifacts: the files of a run (functions over a :class:`~tracker.store.Store`).

A row of ``artifacts`` per (run, path) says size, sha256, media type, step and ``meta``; the
bytes are the blob ``sha256`` of the artifact root (:mod:`tracker.store.blobs`), shared by
every row with that hash. Writing the same path again replaces the row (the old blob stays
until ``tracker gc``); deleting a run deletes its rows (``ON DELETE CASCADE``).

The artifact root (:func:`artifact_root`): ``Store(..., artifact_root=)`` (the CLI's
``--artifact-root``), else ``TRACKER_ARTIFACT_ROOT``, else ``artifacts/`` beside the SQLite
file (``./.tracker/artifacts`` for the default store). A PostgreSQL store has no such place:
an artifact operation without a root set raises :class:`InvalidInput` saying to set it. A
local root that holds the database file is refused, so downloading artifacts can never
reach the database.

Order of a write: blob first, then the row. A reader therefore never sees a row without
its bytes. ``gc_blobs`` lists blobs *before* reading which hashes rows refer to and keeps
blobs younger than a grace period (an upload between the two is not collected); a local
blob written again is touched so the period restarts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import mimetypes
import os
import re
import tempfile
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO

import sqlalchemy as sa

from tracker.entities import ArtifactInfo, BlobGcReport
from tracker.errors import InvalidInput, NotFound, TooLarge
from tracker.rules.artifact_paths import (
    MLFLOW_IMAGES,
    check_artifact_path,
    check_prefix,
    parse_media_path,
    parse_mlflow_image_path,
)
from tracker.store import models as m
from tracker.store.blobs import (
    CHUNK,
    BlobHashMismatch,
    BlobStore,
    LocalBlobStore,
    check_sha256,
    hash_file,
    open_blob_store,
)
from tracker.store.engine import read_conn, write_begin
from tracker.store.rows import dialect_insert
from tracker.store.runs import get_run
from tracker.store.store import Store

__all__ = [
    "ARTIFACT_ROOT_ENV",
    "GC_GRACE_SECONDS",
    "MAX_META_BYTES",
    "artifact_root",
    "blob_store",
    "check_announced",
    "delete_artifact",
    "gc_blobs",
    "get_artifact",
    "guess_media_type",
    "list_artifacts",
    "media_files",
    "media_keys",
    "open_artifact",
    "put_artifact",
    "spool",
    "token_bytes",
]

ARTIFACT_ROOT_ENV = "TRACKER_ARTIFACT_ROOT"
GC_GRACE_SECONDS = 3600.0
MAX_META_BYTES = 64 * 1024
_MEDIA_TYPE = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
)
_EXTRA_TYPES = {
    ".plotly.json": "application/json",
    ".json": "application/json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".md": "text/markdown",
    ".csv": "text/csv",
    ".txt": "text/plain",
    ".log": "text/plain",
    ".npy": "application/octet-stream",
    ".pt": "application/octet-stream",
}
_OPEN: weakref.WeakKeyDictionary[Store, tuple[str, BlobStore]] = weakref.WeakKeyDictionary()


def artifact_root(store: Store) -> str:
    """The artifact root of ``store``: a directory or ``s3://bucket/prefix``.

    Raises:
        InvalidInput: a PostgreSQL (or in-memory) store and no root set; a local root that
            contains the database file.
    """
    root = store.artifact_root or os.environ.get(ARTIFACT_ROOT_ENV) or None
    database = store.database_file()
    if root is None:
        if database is None:
            raise InvalidInput(
                f"artifacts of a {store.dialect} store need an artifact root: set "
                f"{ARTIFACT_ROOT_ENV} (or --artifact-root) to a directory every machine "
                "sees, or to s3://bucket/prefix",
                field="artifact_root",
            )
        return str(database.parent / "artifacts")
    if database is not None and not root.startswith(("s3://",)):
        local = Path(root[len("file://") :] if root.startswith("file://") else root)
        if database.parent.is_relative_to(local.expanduser().resolve()):
            raise InvalidInput(
                f"refusing artifact root {root}: it contains the database ({database}), which "
                "anyone allowed to read artifacts could then reach. Use a directory beside "
                f"it, e.g. {database.parent / 'artifacts'}",
                field="artifact_root",
            )
    return root


def blob_store(store: Store) -> BlobStore:
    """The blob store of ``store``'s artifact root (opened once per store and root).

    Raises:
        InvalidInput: as :func:`artifact_root`, or a root URL of an unknown scheme.
        MissingExtra (an InvalidInput): an ``s3://`` root without boto3 (the ``s3`` extra).
    """
    root = artifact_root(store)
    cached = _OPEN.get(store)
    if cached is not None and cached[0] == root:
        return cached[1]
    blobs = open_blob_store(root)
    _OPEN[store] = (root, blobs)
    return blobs


def guess_media_type(path: str) -> str:
    """The media type for a file name (``application/octet-stream`` if unknown)."""
    lower = path.lower()
    for suffix, media_type in _EXTRA_TYPES.items():
        if lower.endswith(suffix):
            return media_type
    guessed, _ = mimetypes.guess_type(lower, strict=False)
    return guessed or "application/octet-stream"


def _check_media_type(media_type: object) -> str:
    if not isinstance(media_type, str) or not _MEDIA_TYPE.fullmatch(media_type):
        raise InvalidInput(
            f"media type {str(media_type)[:80]!r} is not 'type/subtype' (letters, digits, "
            "'!#$&^_.+-', at most 255 characters)",
            field="media_type",
        )
    return media_type.lower()


def _check_step(step: object) -> int | None:
    if step is None:
        return None
    if isinstance(step, bool) or not isinstance(step, int) or not -(2**63) <= step < 2**63:
        raise InvalidInput(f"step {step!r} is not a 64-bit integer", field="step")
    return step


def _check_meta(meta: object) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) for k in meta):
        raise InvalidInput("artifact meta must be a JSON object with string keys", field="meta")
    try:
        text = json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"artifact meta is not plain JSON: {exc}", field="meta") from None
    if len(text) > MAX_META_BYTES:
        raise InvalidInput(
            f"artifact meta has {len(text)} bytes as JSON; the limit is {MAX_META_BYTES}",
            field="meta",
        )
    return dict(meta)


@contextmanager
def spool(
    stream: IO[bytes], *, max_bytes: int | None = None, store: Store | None = None
) -> Iterator[tuple[Path, str, int]]:
    """Copy ``stream`` into a temporary file while hashing it: ``(path, sha256, size)``; the
    file is removed on exit. For uploads that must not sit in memory (HTTP bodies). With
    ``store`` and a directory as its artifact root, the file is made in the root's ``tmp/``
    (the system's temporary directory may be a small RAM disk; the root has room for blobs).

    Raises:
        TooLarge: more than ``max_bytes`` bytes; copying stops there.
        InvalidInput: as :func:`artifact_root` (before any byte is read).
    """
    directory = None
    if store is not None:
        blobs = blob_store(store)
        if isinstance(blobs, LocalBlobStore):
            directory = blobs.root / "tmp"
            directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="upload-", dir=directory)
    try:
        digest = hashlib.sha256()
        size = 0
        with os.fdopen(fd, "wb") as out:
            while chunk := stream.read(CHUNK):
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise TooLarge(
                        f"the artifact is larger than the limit of {max_bytes} bytes",
                        field="body",
                    )
                digest.update(chunk)
                out.write(chunk)
        yield Path(name), digest.hexdigest(), size
    finally:
        os.unlink(name)


def put_artifact(
    store: Store,
    run_id: int,
    path: str,
    data: bytes | Path,
    *,
    media_type: str | None = None,
    step: int | None = None,
    meta: dict[str, Any] | None = None,
    sha256: str | None = None,
    now: float | None = None,
    token_id: int | None = None,
) -> ArtifactInfo:
    """Store ``data`` (bytes, or a file's contents) as ``path`` of run ``run_id``, replacing
    what that path held. ``media_type`` defaults to a guess from the path; ``sha256``, if
    given, is checked against the bytes (nothing stored on a mismatch). ``token_id``: the
    stored token the upload came with (counted by :func:`token_bytes`), None for none.

    Raises:
        InvalidInput: the path breaks :data:`~tracker.rules.artifact_paths.PATH_RULE`; a bad
            media type, step or meta; no artifact root (PostgreSQL); a sha256 mismatch
            (code ``sha256_mismatch``).
        NotFound: no run ``run_id``.
        StoreUnavailable: the database or the object store cannot be reached.
    """
    check_artifact_path(path)
    media = _check_media_type(media_type) if media_type is not None else guess_media_type(path)
    step = _check_step(step)
    meta = _check_meta(meta)
    _require_run(store, run_id)  # NotFound before any byte is stored
    blobs = blob_store(store)
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        actual = hashlib.sha256(data).hexdigest()
        check_announced(sha256, actual)
        blobs.put_bytes(data)
        size = len(data)
    elif isinstance(data, Path) and sha256 is not None and not blobs.exists(sha256.lower()):
        # a new blob: the copy checks the hash as it goes (one read of the file, not two)
        actual = check_sha256(sha256.lower())
        size = data.stat().st_size
        blobs.put_file(data, actual)
    elif isinstance(data, Path):
        actual, size = hash_file(data)
        check_announced(sha256, actual)
        blobs.put_file(data, actual)
    else:
        raise InvalidInput(
            f"artifact data is a {type(data).__name__}: give bytes or a Path", field="data"
        )
    now = time.time() if now is None else now
    values = dict(
        run_id=run_id,
        path=path,
        size=size,
        sha256=actual,
        media_type=media,
        step=step,
        created_at=now,
        meta=meta,
        token_id=token_id,
    )
    with write_begin(store.engine) as conn:
        insert = dialect_insert(conn)(m.ArtifactRow).values(**values)
        conn.execute(
            insert.on_conflict_do_update(
                index_elements=["run_id", "path"],
                set_={k: insert.excluded[k] for k in values if k not in ("run_id", "path")},
            )
        )
    if not blobs.exists(actual):  # a gc collected it between our write and our row: again
        if isinstance(data, bytes):
            blobs.put_bytes(data)
        else:
            blobs.put_file(data, actual)
    return ArtifactInfo(run_id, path, size, actual, media, step, now, meta)


def _require_run(store: Store, run_id: int) -> None:
    """NotFound unless run ``run_id`` exists: one indexed lookup (``get_run`` would also read
    its latest metrics, which the writer thread would pay on every image)."""
    with read_conn(store.engine) as conn:
        found = conn.execute(sa.select(m.RunRow.id).where(m.RunRow.id == run_id)).first()
    if found is None:
        raise NotFound(f"run {run_id} does not exist", field="run")


def check_announced(announced: str | None, actual: str) -> None:
    """Raise BlobHashMismatch (an InvalidInput, field ``sha256``) if ``announced`` is given
    and is not ``actual``."""
    if announced is not None and announced.lower() != actual:
        raise BlobHashMismatch(
            f"the artifact's bytes hash to sha256 {actual}, not the announced "
            f"{announced[:80]}; nothing stored",
            field="sha256",
        )


def _info(row: Any) -> ArtifactInfo:
    return ArtifactInfo(
        row.run_id,
        row.path,
        row.size,
        row.sha256,
        row.media_type,
        row.step,
        row.created_at,
        dict(row.meta or {}),
    )


_COLUMNS = (
    m.ArtifactRow.run_id,
    m.ArtifactRow.path,
    m.ArtifactRow.size,
    m.ArtifactRow.sha256,
    m.ArtifactRow.media_type,
    m.ArtifactRow.step,
    m.ArtifactRow.created_at,
    m.ArtifactRow.meta,
)


def run_bytes(store: Store, run_id: int, *, besides: str | None = None) -> int:
    """The bytes of the run's stored artifacts (``besides``: leaving out that path, which an
    upload is about to replace)."""
    a = m.ArtifactRow
    skip = None if besides is None else (a.run_id == run_id) & (a.path == besides)
    return _bytes_where(store, a.run_id == run_id, skip)


def token_bytes(store: Store, token_id: int, *, besides: tuple[int, str] | None = None) -> int:
    """The bytes of the artifacts uploaded with stored token ``token_id``, over every run
    (``besides``: leaving out that (run, path), which an upload is about to replace)."""
    a = m.ArtifactRow
    skip = None if besides is None else (a.run_id == besides[0]) & (a.path == besides[1])
    return _bytes_where(store, a.token_id == token_id, skip)


def _bytes_where(store: Store, rows: Any, skip: Any | None) -> int:
    query = sa.select(sa.func.coalesce(sa.func.sum(m.ArtifactRow.size), 0)).where(rows)
    if skip is not None:
        query = query.where(sa.not_(skip))
    with read_conn(store.engine) as conn:
        return int(conn.execute(query).scalar_one())


def list_artifacts(store: Store, run_id: int, prefix: str = "") -> list[ArtifactInfo]:
    """The run's artifacts whose path starts with ``prefix`` (``"dir/"`` for a directory),
    sorted by path.

    Raises:
        NotFound: no run ``run_id``.
        InvalidInput: a prefix that breaks the path rule.
    """
    check_prefix(prefix)
    get_run(store, run_id)
    query = sa.select(*_COLUMNS).where(m.ArtifactRow.run_id == run_id)
    if prefix:
        # substr, not LIKE: no escaping of '%' and '_' in user paths
        query = query.where(sa.func.substr(m.ArtifactRow.path, 1, len(prefix)) == prefix)
    with read_conn(store.engine) as conn:
        return [_info(r) for r in conn.execute(query.order_by(m.ArtifactRow.path))]


def get_artifact(store: Store, run_id: int, path: str) -> ArtifactInfo:
    """Raises NotFound (no such run, or no such path in it); InvalidInput for a bad path."""
    check_artifact_path(path)
    query = sa.select(*_COLUMNS).where(m.ArtifactRow.run_id == run_id, m.ArtifactRow.path == path)
    with read_conn(store.engine) as conn:
        row = conn.execute(query).first()
    if row is None:
        get_run(store, run_id)  # says which is missing: the run or the file
        raise NotFound(f"run {run_id} has no artifact {path!r}", field="path")
    return _info(row)


def open_artifact(store: Store, run_id: int, path: str) -> BinaryIO:
    """A binary file object with the artifact's bytes (close it).

    Raises:
        NotFound: no such run or path, or its blob is missing from the root (the message
            says so: the root was changed or pruned by hand).
    """
    info = get_artifact(store, run_id, path)
    try:
        return blob_store(store).open(info.sha256)
    except NotFound:
        raise NotFound(
            f"artifact {path!r} of run {run_id} is recorded, but its blob {info.sha256} is not "
            f"in the artifact root {artifact_root(store)} (another root, or removed by hand?)",
            field="path",
        ) from None


def delete_artifact(store: Store, run_id: int, path: str) -> None:
    """Remove the row; the blob stays until ``tracker gc`` (other runs may share it).

    Raises NotFound (no such run or path), InvalidInput (a bad path).
    """
    check_artifact_path(path)
    with write_begin(store.engine) as conn:
        deleted = conn.execute(
            sa.delete(m.ArtifactRow).where(
                m.ArtifactRow.run_id == run_id, m.ArtifactRow.path == path
            )
        ).rowcount
    if not deleted:
        get_run(store, run_id)
        raise NotFound(f"run {run_id} has no artifact {path!r}", field="path")


def _media_item(path: str) -> tuple[str, str, int] | None:
    """``(kind, key, step)`` of a media file: the tracker's own layout, or an image MLflow's
    ``log_image(key=...)`` stored (``tracker.rules.artifact_paths``)."""
    parsed = parse_media_path(path)
    if parsed is not None:
        return parsed
    mlflow = parse_mlflow_image_path(path)
    return None if mlflow is None else ("images", mlflow[0], mlflow[1])


def _media_query(run_id: int) -> sa.Select[Any]:
    a = m.ArtifactRow
    head = sa.func.substr(a.path, 1, 7)
    return sa.select(*_COLUMNS).where(
        a.run_id == run_id,
        sa.or_(sa.func.substr(a.path, 1, 6) == "media/", head == MLFLOW_IMAGES),
    )


def media_keys(store: Store, run_id: int) -> dict[str, dict[str, list[int]]]:
    """The run's media: ``{kind: {key: [steps, ascending]}}`` for kinds ``images``,
    ``figures``, ``histograms`` (see :func:`tracker.rules.artifact_paths.media_path`), with
    the images MLflow's ``log_image(key=...)`` stored under ``images/`` among the images.

    Raises NotFound: no run ``run_id``.
    """
    get_run(store, run_id)
    found: dict[str, dict[str, set[int]]] = {}
    with read_conn(store.engine) as conn:
        for row in conn.execute(_media_query(run_id)):
            parsed = _media_item(row.path)
            if parsed is not None:
                kind, key, step = parsed
                found.setdefault(kind, {}).setdefault(key, set()).add(step)
    return {
        kind: {key: sorted(steps) for key, steps in sorted(keys.items())}
        for kind, keys in sorted(found.items())
    }


def media_files(store: Store, run_id: int, kind: str, key: str) -> list[ArtifactInfo]:
    """The files of one media key, by step then path, each with its ``step`` (from its
    path where it was stored without one): the key's own files (not a sub-key's) in both
    layouts :func:`media_keys` reads. Several files of one step are all listed (MLflow
    keeps each ``log_image`` call of a step).

    Raises NotFound: no run ``run_id``.
    """
    get_run(store, run_id)
    out = []
    with read_conn(store.engine) as conn:
        for row in conn.execute(_media_query(run_id)):
            parsed = _media_item(row.path)
            if parsed is not None and parsed[:2] == (kind, key):
                info = _info(row)
                if info.step is None:
                    info = dataclasses.replace(info, step=parsed[2])
                out.append(info)
    return sorted(out, key=lambda a: (a.step or 0, a.path))


def gc_blobs(
    store: Store,
    dry_run: bool = True,
    *,
    grace_seconds: float = GC_GRACE_SECONDS,
    now: float | None = None,
) -> BlobGcReport:
    """Find (and unless ``dry_run`` delete) the blobs no artifact row or snapshot file
    refers to. Blobs
    written less than ``grace_seconds`` ago are kept: their row may be on its way.

    Raises:
        InvalidInput: no artifact root (see :func:`artifact_root`).
        StoreUnavailable: the database or the object store cannot be reached.
    """
    blobs = blob_store(store)
    listed = list(blobs.iter_hashes())  # before reading the rows: see the module docstring
    with read_conn(store.engine) as conn:
        referenced = set(conn.execute(sa.select(m.ArtifactRow.sha256).distinct()).scalars())
        # the files of code snapshots (tracker.store.snapshots) are blobs too
        referenced |= set(conn.execute(sa.select(m.SnapshotFileRow.sha256).distinct()).scalars())
    now = time.time() if now is None else now
    cutoff = now - grace_seconds if math.isfinite(grace_seconds) else -math.inf
    candidates = [(sha, size, at) for sha, size, at in listed if sha not in referenced]
    old = [(sha, size) for sha, size, at in candidates if at <= cutoff]
    deleted = 0
    if not dry_run:
        for sha, _ in old:
            blobs.delete(sha)
            deleted += 1
    leftovers = _stale_temporary(blobs, cutoff)
    if not dry_run:
        for leftover in leftovers:
            leftover.unlink(missing_ok=True)
    return BlobGcReport(
        blobs=len(listed),
        referenced=len(listed) - len(candidates),
        unreferenced=len(old),
        unreferenced_bytes=sum(size for _, size in old),
        young=len(candidates) - len(old),
        deleted=deleted,
        dry_run=dry_run,
        temporary=len(leftovers),
    )


def _stale_temporary(blobs: BlobStore, cutoff: float) -> list[Path]:
    """Temporary files of a directory root (uploads cut off by a crash) older than ``cutoff``."""
    if not isinstance(blobs, LocalBlobStore) or not (blobs.root / "tmp").is_dir():
        return []
    found = []
    for entry in (blobs.root / "tmp").iterdir():
        try:
            if entry.is_file() and entry.stat().st_mtime <= cutoff:
                found.append(entry)
        except FileNotFoundError:
            continue  # finished meanwhile
    return found
