"""What the store holds of a run's series, read straight from its tables, for tests that
compare two layouts (rows, sealed or packed chunks) of the same points."""

from __future__ import annotations

import math
import struct
from typing import Any

import sqlalchemy as sa

from tracker.store import Store
from tracker.store import models as m
from tracker.store.engine import read_conn


def bits(x: float) -> bytes:
    """A float to the bit (-0.0 is not 0.0), every NaN the same."""
    return b"nan" if math.isnan(x) else struct.pack("<d", x)


def rollup_rows(store: Store, run: int) -> list[tuple[Any, ...]]:
    """The chart rollup rows of ``run``: min and max as numbers (PostgreSQL's min of -0.0
    and 0.0 is either), the last value to the bit."""
    r = m.MetricRollupRow
    with read_conn(store.engine) as conn:
        rows = conn.execute(
            sa.select(
                r.key_id, r.width, r.bucket, r.first_step, r.last_step, r.last_wall_ms,
                r.min_value, r.max_value, r.last_value, r.count, r.nan_count,
                r.posinf_count, r.neginf_count,
            ).where(r.run_id == run).order_by(r.key_id, r.width, r.bucket)
        ).all()  # fmt: skip
    return [(*row[:8], bits(row[8]), *row[9:]) for row in rows]


def head_rows(store: Store, run: int) -> int:
    """How many of ``run``'s points are rows (not sealed in chunks)."""
    p = m.MetricPointRow
    with read_conn(store.engine) as conn:
        return conn.execute(
            sa.select(sa.func.count()).select_from(p).where(p.run_id == run)
        ).scalar_one()
