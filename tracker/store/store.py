"""The Store: an open SQL database (SQLite file or PostgreSQL) and nothing else.

``Store(url)`` opens it (creating or upgrading the schema), ``close()`` closes it,
``upgrade()`` migrates it; every query lives in the module of its concept and takes the
store first: :mod:`~tracker.store.runs`, :mod:`~tracker.store.projects`,
:mod:`~tracker.store.metrics` (points: :mod:`~tracker.store.points`, charts:
:mod:`~tracker.store.series`), :mod:`~tracker.store.checkpoints`,
:mod:`~tracker.store.events`, :mod:`~tracker.store.diagnoses`, :mod:`~tracker.store.queue`,
:mod:`~tracker.store.jobs`, :mod:`~tracker.store.tokens`, :mod:`~tracker.store.artifacts`
(ARCHITECTURE.md has the whole map).

ORM rows stop in those modules; callers get the frozen dataclasses of :mod:`tracker.entities`.
Driver errors are translated at this boundary: every read runs in
:func:`~tracker.store.engine.read_conn`, every write in
:func:`~tracker.store.engine.write_begin` (both raise
:class:`~tracker.errors.StoreUnavailable` for an unreachable database); a missing row is
:class:`~tracker.errors.NotFound`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tracker.errors import InvalidInput
from tracker.store import points, rollups
from tracker.store.clock import StoreClock
from tracker.store.engine import (
    create_engine,
    current_revision,
    ensure_schema,
    require_existing,
    resolve_uri,
    upgrade,
)


class Store:
    """A SQL store (SQLite file or PostgreSQL). Create one per process and share it.

    Raises (constructor):
        InvalidInput: the URL is not a SQL URL (an ``http://`` URL needs the HTTP sink), or
            is malformed (``sqlite:/x.db``).
        NotFound: ``create=False`` (what read commands pass) and the SQLite file does not
            exist; nothing is created.
        StoreUnavailable: the database cannot be opened.
        SchemaError: the schema is newer than this code, or the automatic upgrade failed.

    ``artifact_root`` (a directory or ``s3://bucket/prefix``) overrides where artifact bytes
    live; see :mod:`tracker.store.artifacts`.
    """

    def __init__(
        self,
        uri: str | None = None,
        *,
        upgrade: bool = True,
        create: bool = True,
        artifact_root: str | None = None,
    ) -> None:
        self.uri = resolve_uri(uri)
        # where artifact blobs live (``tracker.store.artifacts.artifact_root`` resolves the
        # default: TRACKER_ARTIFACT_ROOT, else next to the SQLite file)
        self.artifact_root = artifact_root
        self._on_close: list[Callable[[], object]] = []
        if self.uri.startswith(("http://", "https://")):
            raise InvalidInput(
                f"{self.uri} is a server address, not a database: the Store needs a SQL URL",
                field="TRACKER_URI",
            )
        if not create:
            require_existing(self.uri)
        self.engine = create_engine(self.uri)
        self.clock = StoreClock(self.engine)
        # how many points one rollup refresh transaction takes (learned per store; see
        # :func:`tracker.store.metrics.refresh_rollups`)
        self.rollup_sizer = rollups.ChunkSizer(points.REFRESH_CHUNK_POINTS)
        if upgrade:
            ensure_schema(self.engine)

    def now(self) -> float:
        """The store's clock (:mod:`tracker.store.clock`): what leases, heartbeats and run
        times are stamped with, the same on every machine."""
        return self.clock.now()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def absolute_uri(self) -> str:
        """The URL with its password, a relative SQLite path made absolute (for a child
        process that runs elsewhere, e.g. a job's ``TRACKER_URI``)."""
        url = self.engine.url
        if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
            url = url.set(database=os.path.abspath(url.database))
        return url.render_as_string(hide_password=False)

    def database_file(self) -> Path | None:
        """The SQLite database file, absolute (its ``-wal`` and ``-shm`` files lie next to
        it); None for PostgreSQL or an in-memory database."""
        url = self.engine.url
        if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
            return None
        return Path(os.path.abspath(url.database))

    def schema_revision(self) -> str | None:
        """The database's Alembic revision, or None for a database with no schema."""
        return current_revision(self.engine)

    def upgrade(self, revision: str = "head") -> tuple[str | None, str]:
        """Apply migrations up to ``revision`` (see :func:`tracker.store.engine.upgrade`)."""
        return upgrade(self.engine, revision)

    def close(self) -> None:
        """Dispose of the connections; what was registered with ``on_close`` runs first (a
        dashboard's periodic loop stops with its store)."""
        for callback in self._on_close:
            callback()
        self.engine.dispose()

    def on_close(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` when this store is closed."""
        self._on_close.append(callback)

    def __repr__(self) -> str:
        return f"Store({self.engine.url.render_as_string(hide_password=True)!r})"
