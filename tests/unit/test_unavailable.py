"""Which driver errors mean 'try again later': the one classification, table-driven."""

from __future__ import annotations

import sqlite3

import psycopg
import psycopg.errors as pg
import pytest
import sqlalchemy as sa

from tracker.errors import StoreUnavailable
from tracker.store.engine import is_unavailable, sqlstate_is_unavailable

CASES: list[tuple[str, BaseException, bool]] = [
    ("admin shutdown 57P01 (pg_ctl stop -m fast)", pg.AdminShutdown("terminating"), True),
    ("crash shutdown 57P02", pg.CrashShutdown("crash"), True),
    ("cannot connect now 57P03 (starting up)", pg.CannotConnectNow("starting up"), True),
    ("connection failure 08006", pg.ConnectionFailure("x"), True),
    ("connection exception 08000", pg.ConnectionException("x"), True),
    ("too many connections 53300", pg.TooManyConnections("x"), True),
    ("disk full 53100", pg.DiskFull("x"), True),
    ("serialization failure 40001", pg.SerializationFailure("x"), True),
    ("deadlock 40P01", pg.DeadlockDetected("x"), True),
    ("psycopg OperationalError without SQLSTATE (lost)", psycopg.OperationalError("x"), True),
    ("psycopg InterfaceError (connection closed)", psycopg.InterfaceError("closed"), True),
    ("numeric out of range 22003", pg.NumericValueOutOfRange("bigint out of range"), False),
    ("unique violation 23505", pg.UniqueViolation("x"), False),
    ("undefined table 42P01", pg.UndefinedTable("x"), False),
    ("statement too complex 54001 (an OperationalError)", pg.StatementTooComplex("x"), False),
    ("bad password 28P01 (an OperationalError)", pg.InvalidPassword("x"), False),
    ("sqlite locked", sqlite3.OperationalError("database is locked"), True),
    ("sqlite busy", sqlite3.OperationalError("database is busy"), True),
    ("sqlite no such table", sqlite3.OperationalError("no such table: x"), False),
    ("sqlite integer overflow", OverflowError("Python int too large"), False),
    ("sqlite integrity", sqlite3.IntegrityError("UNIQUE constraint failed"), False),
    ("StoreUnavailable", StoreUnavailable("away"), True),
    ("ConnectionRefusedError", ConnectionRefusedError(), True),
    ("ValueError", ValueError("x"), False),
]


@pytest.mark.parametrize(("exc", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_raw_driver_errors(exc: BaseException, expected: bool) -> None:
    assert is_unavailable(exc) is expected


@pytest.mark.parametrize(("exc", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_sqlalchemy_wrapped_errors_are_judged_by_orig(exc: BaseException, expected: bool) -> None:
    if not isinstance(exc, psycopg.Error | sqlite3.Error):
        pytest.skip("SQLAlchemy wraps DB-API errors only")
    base = psycopg.Error if isinstance(exc, psycopg.Error) else sqlite3.Error
    wrapped = sa.exc.DBAPIError.instance("COPY ...", None, exc, base)
    assert isinstance(wrapped, sa.exc.DBAPIError)
    assert is_unavailable(wrapped) is expected


@pytest.mark.parametrize(
    ("sqlstate", "expected"),
    [
        ("08001", True), ("08006", True), ("08P01", True), ("57P01", True), ("57P02", True),
        ("57P03", True), ("53000", True), ("53300", True), ("40001", True), ("40P01", True),
        ("57014", False), ("22003", False), ("23505", False), ("42P01", False), ("54000", False),
    ],
)  # fmt: skip
def test_sqlstates(sqlstate: str, expected: bool) -> None:
    assert sqlstate_is_unavailable(sqlstate) is expected
    assert is_unavailable(pg.lookup(sqlstate)("x")) is expected


def test_a_full_sqlite_disk_is_an_outage_not_a_fatal_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SQLITE_FULL, made for real (max_page_count reached), is retried until space returns
    (a full disk used to stop logging for the rest of the run)."""
    conn = sqlite3.connect(tmp_path / "full.db")
    conn.execute("CREATE TABLE t (x BLOB)")
    conn.commit()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(sqlite3.OperationalError) as full:
        for _ in range(100):
            conn.execute("INSERT INTO t VALUES (?)", (b"x" * 4096,))
    assert "database or disk is full" in str(full.value)
    assert is_unavailable(full.value) is True
    conn.rollback()
    conn.execute("PRAGMA max_page_count = 1000000")  # space came back: writes go on
    conn.execute("INSERT INTO t VALUES (?)", (b"x" * 4096,))
    conn.commit()
    conn.close()
