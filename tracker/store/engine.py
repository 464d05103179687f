"""Engine set-up for SQLite and PostgreSQL, the one translation of driver errors, and the
automatic schema upgrade on first use.

Driver errors: every store entry point does its database work inside
:func:`unavailable_as_error` (directly, or through :func:`read_conn` and :func:`write_begin`),
so an unreachable, restarting or locked database is :class:`~tracker.errors.StoreUnavailable`
(HTTP 503; the client keeps its points and retries) and nothing above the store sees a
driver exception for it.

SQLite: WAL mode, a busy timeout, ``synchronous=NORMAL``, foreign keys on, and Python's
implicit transactions turned off so that write transactions can begin with
``BEGIN IMMEDIATE`` (a deferred transaction that later writes can fail at once with
"database is locked" instead of waiting; see :func:`write_begin`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from tracker import discovery
from tracker.errors import InvalidInput, NotFound, SchemaError, StoreUnavailable
from tracker.rules import store_uri
from tracker.rules.backoff import backoff_delay
from tracker.store import permissions

log = logging.getLogger(__name__)

DEFAULT_DIR = ".tracker"
SQLITE_BUSY_TIMEOUT_MS = 30_000
BEGIN_OPTION = "tracker_begin"


def resolve_uri(uri: str | None = None) -> str:
    """Return the store URL: the argument, else ``TRACKER_URI``, else the nearest
    ``.tracker/tracker.db`` here or above, else the one live dashboard's store, else
    ``./.tracker/tracker.db`` (:func:`tracker.discovery.locate`).

    Raises:
        InvalidInput: an unsupported or malformed URL (see :mod:`tracker.rules.store_uri`).
    """
    return discovery.locate(uri).uri


def require_existing(uri: str) -> None:
    """Raise NotFound when ``uri`` names a SQLite file that does not exist (nothing is
    created: no directory, no database, no lock file). Other URLs pass: a PostgreSQL
    database that does not exist fails when connecting (StoreUnavailable).
    """
    path = store_uri.sqlite_path(uri)
    if path is None or os.path.isfile(path):
        return
    where = os.path.abspath(path)
    relative = "" if os.path.isabs(path) else f" (relative to the current directory {os.getcwd()})"
    raise NotFound(
        f"no store at {where}{relative}: {uri} does not exist, and reading does not create one. "
        f"Check the path: {store_uri.SQLITE_FORMS}; a new store is created by `tracker db "
        "upgrade`, `tracker submit` or `tracker ui`",
        field="TRACKER_URI",
    )


def create_engine(uri: str) -> sa.Engine:
    """Create an engine for a SQL store URL, configured for concurrent use.

    Raises:
        InvalidInput: SQLAlchemy cannot parse the URL (never its own traceback).
    """
    try:
        url = sa.make_url(uri)
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise InvalidInput(
            f"TRACKER_URI {uri!r} is not a valid database URL ({exc}): use "
            f"{store_uri.SQLITE_FORMS}, or postgresql+psycopg://USER@HOST/DB",
            field="TRACKER_URI",
        ) from exc
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    return sa.create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


def _sqlite_engine(url: sa.URL) -> sa.Engine:
    database = url.database if url.database and url.database != ":memory:" else None
    if database:
        permissions.private_dir(Path(database).parent)
    engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "do_connect")
    def _private_file(*_: Any) -> None:
        if database:
            permissions.private_sqlite_file(Path(database))

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        _journal_mode_wal(cur)
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql(conn.get_execution_options().get(BEGIN_OPTION, "BEGIN"))

    return engine


def _journal_mode_wal(cur: Any) -> None:
    """``PRAGMA journal_mode=WAL``, waiting up to the busy timeout for other writers.

    On a new (not yet WAL) database file that another connection is writing, SQLite answers
    "database is locked" at once instead of calling its busy handler (it would deadlock), so
    processes starting together on a new store retry here with a growing pause.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    attempt = 0
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            attempt += 1
            pause = backoff_delay(attempt, base_s=0.005, cap_s=0.25)
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)


@contextlib.contextmanager
def unavailable_as_error(what: str = "the store", *, opening: bool = False) -> Iterator[None]:
    """The one translation of driver errors: inside this block, an error that means 'try
    again later' (:func:`is_unavailable`: connection refused or lost, server shutting down,
    database locked past the busy timeout) is raised as
    :class:`~tracker.errors.StoreUnavailable` naming ``what`` (``raise ... from exc``).
    With ``opening`` (the first contact with a database), every ``OperationalError`` counts:
    a file that cannot be opened or a refused login is unavailable too. Every other error
    passes through unchanged.

    Every store entry point runs its database work inside it, directly or through
    :func:`read_conn` and :func:`write_begin`.
    """
    try:
        yield
    except StoreUnavailable:
        raise
    except Exception as exc:
        if not (is_unavailable(exc) or (opening and isinstance(exc, sa.exc.OperationalError))):
            raise
        detail = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
        raise StoreUnavailable(f"{what} failed, the store is unavailable: {detail}") from exc


@contextlib.contextmanager
def read_conn(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection for reads.

    Raises:
        StoreUnavailable: the database cannot be reached (see :func:`unavailable_as_error`).
    """
    with unavailable_as_error("reading"), engine.connect() as conn:
        yield conn


@contextlib.contextmanager
def write_begin(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A write transaction: ``BEGIN IMMEDIATE`` on SQLite, a plain one elsewhere.

    Raises:
        StoreUnavailable: the database cannot be reached (see :func:`unavailable_as_error`).
    """
    with unavailable_as_error("writing"), engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn = conn.execution_options(**{BEGIN_OPTION: "BEGIN IMMEDIATE"})
        with conn.begin():
            yield conn


# SQLSTATEs that mean "try again later": a connection exception (class 08), the server
# shutting down, crashing or starting up (57P01 admin shutdown, 57P02 crash shutdown,
# 57P03 cannot connect now), out of resources (class 53: too many connections, disk full,
# out of memory), and a transaction the server rolled back to be retried (40001
# serialization failure, 40P01 deadlock).
_RETRY_CLASSES = ("08", "53")
_RETRY_STATES = frozenset({"57P01", "57P02", "57P03", "40001", "40P01"})
# sqlite3 has no SQLSTATE: another connection holding the write lock past the busy timeout,
# and a full disk (SQLITE_FULL): an outage like PostgreSQL's class 53, retried until space
# returns, never a fatal writer error that stops logging for the rest of the run.
_SQLITE_BUSY_TEXT = (
    "database is locked",
    "database is busy",
    "database table is locked",
    "database or disk is full",
)


def is_unavailable(exc: BaseException) -> bool:
    """True for errors that mean 'try again later' (connection refused, server gone, locked).

    Covers SQLAlchemy-wrapped driver errors (judged by their ``orig``) and raw driver errors
    (``raw_connection()`` raises psycopg's and sqlite3's own exceptions unwrapped). A
    PostgreSQL error is judged by its SQLSTATE (:func:`sqlstate_is_unavailable`); one
    without a SQLSTATE (raised by psycopg itself: connection refused, lost mid-query,
    closed) is unavailable when it is a psycopg ``OperationalError`` or ``InterfaceError``.
    A sqlite3 error is unavailable when the database is locked or busy, or the disk is full.
    """
    if isinstance(exc, StoreUnavailable | ConnectionError):
        return True
    if isinstance(exc, sa.exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        return exc.orig is not None and _driver_unavailable(exc.orig)
    return _driver_unavailable(exc)


def sqlstate_is_unavailable(sqlstate: str) -> bool:
    """True for a PostgreSQL SQLSTATE that means 'try again later' (see ``_RETRY_STATES``)."""
    return sqlstate[:2] in _RETRY_CLASSES or sqlstate in _RETRY_STATES


def _driver_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError):
        return True
    if isinstance(exc, sqlite3.Error):
        text = str(exc).lower()
        return isinstance(exc, sqlite3.OperationalError) and any(
            s in text for s in _SQLITE_BUSY_TEXT
        )
    psycopg_bases = {
        c.__name__ for c in type(exc).__mro__ if c.__module__.split(".")[0] == "psycopg"
    }
    if not psycopg_bases:
        return False
    diag = getattr(exc, "diag", None)
    sqlstate = getattr(exc, "sqlstate", None) or getattr(diag, "sqlstate", None)
    if sqlstate:
        return sqlstate_is_unavailable(str(sqlstate))
    return bool(psycopg_bases & {"OperationalError", "InterfaceError"})


# ---------------------------------------------------------------- schema upgrade


def _migrations_dir() -> Path:
    """Where Alembic finds ``tracker.migrations``, located without importing it: the
    migrations import the store's models (their target metadata), never the other way."""
    spec = importlib.util.find_spec("tracker.migrations")
    if spec is None or not spec.submodule_search_locations:
        raise SchemaError("the tracker.migrations package is missing from this installation")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def schema_revisions() -> tuple[str, ...]:
    """Every Alembic revision this code knows, oldest first, read from the migrations' script
    directory (never from a constant, and never ordered by name: revision ids are not in
    chain order, ``0013_logged_models`` comes before ``0012_metric_seq``).

    Raises:
        SchemaError: the migrations are missing or do not form one chain.
    """
    from alembic.script import ScriptDirectory

    try:
        script = ScriptDirectory(str(_migrations_dir()))
        heads = script.get_heads()
        walked = [rev.revision for rev in script.walk_revisions()]
    except SchemaError:
        raise
    except Exception as exc:
        raise SchemaError(f"the tracker's migrations cannot be read: {exc}") from exc
    if len(heads) != 1:
        raise SchemaError(f"the tracker's migrations have {len(heads)} heads, not one: {heads}")
    return tuple(reversed(walked))


def schema_head() -> str:
    """The newest Alembic revision this code knows (the migrations' one head)."""
    return schema_revisions()[-1]


def current_revision(engine: sa.Engine) -> str | None:
    """The database's Alembic revision, or None for a database with no schema.

    Raises:
        StoreUnavailable: the database cannot be reached.
    """
    with read_conn(engine) as conn:
        return _current_revision(conn)


def _current_revision(conn: sa.Connection) -> str | None:
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine: sa.Engine, revision: str = "head") -> tuple[str | None, str]:
    """Apply migrations up to ``revision`` under a cross-process lock.

    Returns (revision before, revision after). Safe when many processes call it at once:
    SQLite uses a lock file beside the database, PostgreSQL an advisory lock.

    Raises:
        SchemaError: a migration failed, or the database is newer than this code.
    """
    from alembic import command
    from alembic.config import Config

    with _migration_lock(engine) as conn:
        before = _current_revision(conn)
        cfg = Config()
        cfg.set_main_option("script_location", str(_migrations_dir()))
        cfg.attributes["connection"] = conn
        try:
            command.upgrade(cfg, revision)
        except Exception as exc:
            raise SchemaError(f"database migration to {revision} failed: {exc}") from exc
        conn.commit()
        return before, _current_revision(conn) or ""


def ensure_schema(engine: sa.Engine) -> None:
    """Upgrade an empty or older database to this code's schema; cheap when already current.

    Raises:
        SchemaError: the database has a revision this code does not know (newer tracker).
        StoreUnavailable: the database cannot be reached.
    """
    with unavailable_as_error(f"opening {engine.url!r}", opening=True), engine.connect() as conn:
        current = _current_revision(conn)
    known = schema_revisions()
    if current == known[-1]:
        return
    if current is not None and current not in known:
        raise SchemaError(
            f"the database schema is at revision {current}, which this tracker does not know "
            f"(its newest is {known[-1]}): a newer tracker wrote it; upgrade the tracker package"
        )
    upgrade(engine)


@contextlib.contextmanager
def _migration_lock(engine: sa.Engine) -> Iterator[sa.Connection]:
    if engine.dialect.name == "sqlite":
        db = engine.url.database
        lock_file = None
        if db and db != ":memory:":
            import fcntl

            lock_file = open(db + ".migrate.lock", "a")  # noqa: SIM115 - held for the block
            fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            with engine.connect() as conn:
                yield conn
        finally:
            if lock_file is not None:
                lock_file.close()  # closing releases the flock
        return
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(7242001)"))
        conn.commit()
        try:
            yield conn
        finally:
            conn.rollback()
            conn.execute(sa.text("SELECT pg_advisory_unlock(7242001)"))
            conn.commit()
