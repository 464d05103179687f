"""Shared fixtures: a real SQLite file and a real PostgreSQL database for every store test.

PostgreSQL comes from ``TRACKER_TEST_PG_URL`` (``scripts/test.sh`` starts a throwaway
cluster and sets it). Without it the PostgreSQL half of the tests is skipped with a reason
-- except under CI (``CI`` set), where a missing server is a failure, not a skip.
Migrations run once per session, not once per test: each dialect has a migrated template
(a SQLite file, a PostgreSQL database) and every test gets a copy of it (a file copy;
``CREATE DATABASE ... TEMPLATE``), measured in bench/RESULTS.md ("Test suite: template
database"). Tests that need a database with no schema at all use ``empty_store_url``.
Every test that runs against PostgreSQL carries the ``postgres`` marker (added at collection,
see ``pytest_collection_modifyitems``), so ``-m postgres`` / ``-m "not postgres"`` select
exactly the PostgreSQL half.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import signal
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

# The project's own tests run strict: a failure inside the tracker raises instead of warning
# once (tracker.client.failsafe). Set at import, so the processes the tests start inherit it.
os.environ.setdefault("TRACKER_STRICT", "1")
# Dashboards record themselves in a per-user registry (tracker.servers) that store discovery
# reads; a test's own registry keeps a dashboard another test (or the user) runs out of tests
# that expect no store in a fresh folder.
os.environ.setdefault("TRACKER_SERVER_REGISTRY", tempfile.mkdtemp(prefix="tracker-servers-"))

# A suite started in the background by a non-interactive shell (`cmd &`, as a CI step may
# be) inherits SIGINT ignored (POSIX), Python keeps it so, and every process the tests start
# would too: `tracker worker` keeps an ignored SIGINT ignored on purpose (`tracker up`
# relies on it), so the tests of Ctrl-C and of a second signal failed in such a run and
# tested only how it was started. Start the processes as a terminal would.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# every parallel run ends with a table of when each xdist worker finished, and on what
pytest_plugins = ["tests.support.worker_timeline"]

PG_ENV = "TRACKER_TEST_PG_URL"
# Fixtures that are the PostgreSQL server itself: a test that asks for one by name runs
# against it (every fixture on top of store_url has it in its closure, SQLite half included,
# so only the test's own arguments count).
PG_FIXTURES = frozenset({"pg_session_url"})


def selects_postgres(item: pytest.Item) -> bool:
    """Whether ``item`` runs against PostgreSQL: one of its fixture parameters is
    ``"postgresql"`` (``store_url``, ``empty_store_url`` and every fixture built on them), or
    the test function asks for a PostgreSQL fixture itself."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    if any(isinstance(value, str) and value == "postgresql" for value in params):
        return True
    function = getattr(item, "function", None)
    arguments = inspect.signature(function).parameters if function is not None else {}
    return not PG_FIXTURES.isdisjoint(arguments)


# Session fixtures that stand for one thing on this machine (one munge daemon and one Slurm
# cluster; one wheel and its venvs): under pytest-xdist every test that uses one runs in the
# same worker, so the thing is set up once and never twice at the same time.
MACHINE_FIXTURES = {"slurm": "slurm", "venvs": "install", "wheel": "install"}


def xdist_group(item: pytest.Item) -> str:
    """The pytest-xdist group of ``item`` (``--dist loadgroup``): the machine-wide thing it
    uses, else its file, so a module's fixtures are set up in one worker only."""
    names = getattr(item, "fixturenames", ())
    for fixture, group in MACHINE_FIXTURES.items():
        if fixture in names:
            return group
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker, and before xdist groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if selects_postgres(item):
            item.add_marker(pytest.mark.postgres)
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(xdist_group(item)))


def _pg_server_url() -> str | None:
    url = os.environ.get(PG_ENV)
    if not url and os.environ.get("CI"):
        pytest.fail(f"CI needs PostgreSQL: {PG_ENV} is not set (run ./scripts/test.sh)")
    return url


def _admin(url: str) -> sa.Engine:
    return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)


def create_pg_database(server_url: str, template: str | None = None) -> str:
    """A new database on ``server_url``: empty, or a copy of the database ``template`` (which
    nobody may be connected to while it is copied)."""
    name = "t_" + uuid.uuid4().hex[:12]
    copy = f' TEMPLATE "{template}"' if template else ""
    with _admin(server_url).connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"{copy}'))
    return sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_pg_database(server_url: str, db_url: str) -> None:
    name = sa.make_url(db_url).database
    with _admin(server_url).connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to the head once per session; tests get copies of it. The WAL
    is checkpointed into the file first, so the file alone is the whole database."""
    from tracker.store import Store

    path = tmp_path_factory.mktemp("template") / "tracker.db"
    Store(f"sqlite:///{path}").close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


@pytest.fixture(scope="session")
def pg_template_url() -> Iterator[str | None]:
    """A PostgreSQL database migrated once per session, only ever copied (no test connects to
    it: ``CREATE DATABASE ... TEMPLATE`` needs it idle). None without a server."""
    server = _pg_server_url()
    if not server:
        yield None
        return
    url = create_pg_database(server)
    from tracker.store import Store

    Store(url).close()
    yield url
    drop_pg_database(server, url)


@pytest.fixture(scope="session")
def pg_session_url(pg_template_url: str | None) -> Iterator[str | None]:
    """One migrated PostgreSQL database for the whole session (a copy of the template), for
    module-wide fixtures that keep a store open; None without a server."""
    if pg_template_url is None:
        yield None
        return
    server = _pg_server_url()
    assert server is not None
    url = create_pg_database(server, template=sa.make_url(pg_template_url).database)
    yield url
    drop_pg_database(server, url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    sqlite_template: Path,
    pg_template_url: str | None,
) -> Iterator[str]:
    """A store URL with the schema in place and no data, this test's own: a copy of the
    migrated SQLite template, then a copy of the migrated PostgreSQL template."""
    if request.param == "sqlite":
        path = tmp_path / "tracker.db"
        shutil.copyfile(sqlite_template, path)
        yield f"sqlite:///{path}"
        return
    if pg_template_url is None:
        pytest.skip(f"PostgreSQL tests need {PG_ENV} (./scripts/test.sh starts a server)")
    server = _pg_server_url()
    assert server is not None
    url = create_pg_database(server, template=sa.make_url(pg_template_url).database)
    yield url
    drop_pg_database(server, url)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no schema at all (for migration and first-use tests)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    server = _pg_server_url()
    if not server:
        pytest.skip(f"PostgreSQL tests need {PG_ENV} (./scripts/test.sh starts a server)")
    url = create_pg_database(server)
    yield url
    drop_pg_database(server, url)


@pytest.fixture
def own_pg_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """(directory, URL) of a throwaway PostgreSQL cluster of this test's own, which it may stop
    and start (``pg_cluster.pause_server`` / ``resume_server``); stopped afterwards. Skipped
    without the PostgreSQL server binaries."""
    from tests.support import pg_cluster

    try:
        pg_cluster._bindir()
    except pg_cluster.ClusterError as exc:
        pytest.skip(str(exc))
    # A short path: the server's unix socket lives in it (108-byte limit).
    directory = Path(tempfile.gettempdir()) / f"pgown-{tmp_path_factory.getbasetemp().name}"
    url = pg_cluster.start_cluster(directory)
    try:
        yield directory, url
    finally:
        pg_cluster.stop_cluster(directory)


@pytest.fixture
def store(store_url: str) -> Iterator[object]:
    from tracker.store import Store

    s = Store(store_url)
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs in its own directory, so ./.tracker/ never leaks between tests."""
    monkeypatch.chdir(tmp_path)
    for var in ("TRACKER_URI", "TRACKER_RUN_ID", "TRACKER_JOB_ID", "TRACKER_CONFIG", "RANK"):
        monkeypatch.delenv(var, raising=False)


# A real S3-protocol server (moto, a subprocess) for the s3:// artifact root tests.
from tests.support.s3 import s3_env, s3_server  # noqa: E402, F401


@pytest.fixture
def artifact_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$TRACKER_ARTIFACT_ROOT`` set to a fresh folder (PostgreSQL stores need a root;
    SQLite would default next to the file)."""
    path = tmp_path / "artifact-root"
    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", str(path))
    return path
