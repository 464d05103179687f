"""Bulk metric ingest: the hot path from the writer thread into the database.

Rows are ``(run_id, key_id, step, wall_ms, value)`` with NaN already turned into ``None``.
Ingest is idempotent: the same (run, key, step) written twice keeps the last value, so a
retried batch never duplicates or errors. SQLite goes through the raw DBAPI connection
(``executemany`` on an upsert); PostgreSQL through ``COPY`` into a temporary table and one
``INSERT ... SELECT DISTINCT ON ... ON CONFLICT``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from tracker.errors import StoreUnavailable
from tracker.store import rollups
from tracker.store.engine import is_unavailable

Row = tuple[int, int, int, int, "float | None"]

_UPSERT_POINTS = (
    "INSERT INTO metric_points (run_id, key_id, step, wall_ms, value) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, key_id, step) DO UPDATE "
    "SET wall_ms = excluded.wall_ms, value = excluded.value"
)
_UPSERT_SUMMARY = (
    "INSERT INTO metric_summaries (run_id, key_id, last_step, last_wall_ms, last_value) "
    "VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (run_id, key_id) DO UPDATE "
    "SET last_step = excluded.last_step, last_wall_ms = excluded.last_wall_ms, "
    "last_value = excluded.last_value WHERE excluded.last_step >= metric_summaries.last_step"
)
_PG_TMP = (
    "CREATE TEMP TABLE IF NOT EXISTS tmp_points (ord bigserial, run_id integer, "
    "key_id integer, step bigint, wall_ms bigint, value double precision) ON COMMIT DELETE ROWS"
)
_PG_MERGE = (
    "INSERT INTO metric_points (run_id, key_id, step, wall_ms, value) "
    "SELECT DISTINCT ON (run_id, key_id, step) run_id, key_id, step, wall_ms, value "
    "FROM tmp_points ORDER BY run_id, key_id, step, ord DESC "
    "ON CONFLICT (run_id, key_id, step) DO UPDATE "
    "SET wall_ms = excluded.wall_ms, value = excluded.value"
)


def last_per_key(rows: Sequence[Row]) -> list[Row]:
    """The row with the highest step per (run, key); later rows win ties."""
    last: dict[tuple[int, int], Row] = {}
    for row in rows:
        k = (row[0], row[1])
        prev = last.get(k)
        if prev is None or row[2] >= prev[2]:
            last[k] = row
    return list(last.values())


def write_rows(engine: sa.Engine, rows: Sequence[Row], last: Sequence[Row] | None = None) -> None:
    """Store metric rows and update the per-run last values, in one transaction.

    Raises:
        StoreUnavailable: the database cannot be reached or stays locked; nothing was stored
            and the caller may retry the same rows.
    """
    if not rows:
        return
    summary = last if last is not None else last_per_key(rows)
    try:
        raw = engine.raw_connection()
    except Exception as exc:
        if is_unavailable(exc):
            raise StoreUnavailable(f"writing {len(rows)} metric points failed: {exc}") from exc
        raise
    try:
        if engine.dialect.name == "sqlite":
            _write_sqlite(raw, rows, summary)
        else:
            _write_postgres(raw, rows, summary)
    except Exception as exc:
        if not is_unavailable(exc):
            _rollback_quietly(raw)
            raise
        raw.invalidate()  # a broken connection must not go back into the pool
        raise StoreUnavailable(f"writing {len(rows)} metric points failed: {exc}") from exc
    finally:
        raw.close()


def _write_sqlite(raw: Any, rows: Sequence[Row], summary: Sequence[Row]) -> None:
    cur = raw.cursor()
    cur.execute("BEGIN IMMEDIATE")
    cur.executemany(_UPSERT_POINTS, rows)
    cur.executemany(_UPSERT_SUMMARY.format(p="?"), summary)
    rollups.refresh(cur, "sqlite", rollups.step_bounds(rows))  # chart levels, same transaction
    cur.execute("COMMIT")
    cur.close()


def _write_postgres(raw: Any, rows: Sequence[Row], summary: Sequence[Row]) -> None:
    with raw.cursor() as cur:
        cur.execute(_PG_TMP)
        with cur.copy("COPY tmp_points (run_id, key_id, step, wall_ms, value) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cur.execute(_PG_MERGE)
        cur.executemany(_UPSERT_SUMMARY.format(p="%s"), summary)
        rollups.refresh(cur, "postgresql", rollups.postgres_bounds(cur))  # chart levels
    raw.commit()


def _rollback_quietly(raw: Any) -> None:
    # Called while another exception propagates: that one is what the caller needs, so a
    # second failure here (connection already gone) is deliberately not raised over it.
    with contextlib.suppress(Exception):
        raw.rollback()
