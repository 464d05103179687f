"""The store's clock: the time every lease, heartbeat and staleness check is stamped with.

Leases and heartbeats are written by one machine and judged by another (a worker renews its
lease, any worker's reaper decides it expired; a training process heartbeats its run, the
dashboard's crash watch decides it went silent). Stamped with each machine's own clock, a
worker whose clock runs 10 minutes behind writes leases that expired before they were
written, and the reaper takes over every job it runs; one 10 minutes ahead is never reaped.
So these times come from one clock, the database server's.

:class:`StoreClock` keeps the offset between this process's clock and the server's
(PostgreSQL ``clock_timestamp()``, read at the midpoint of the round trip) and adds it to
``time.time()``: reading the clock costs no query; the offset is measured again every
``REFRESH_S``. SQLite is a file on this machine: its clock is this machine's (offset 0).

A host clock more than ``WARN_SKEW_S`` off the server's is logged once as a warning.

Failure modes: when the server cannot be asked (an outage) the last offset is kept (0 before
the first answer) and the next reading asks again; the clock never raises.
"""

from __future__ import annotations

import logging
import threading
import time

import sqlalchemy as sa

log = logging.getLogger(__name__)

REFRESH_S = 60.0  # the offset is measured again this often
WARN_SKEW_S = 5.0  # a host clock this far from the store's is said once (fix its NTP)
MAX_ROUND_TRIP_S = 1.0  # a slower answer says little about the offset: kept for later
_SERVER_NOW = sa.text("SELECT extract(epoch FROM clock_timestamp())")


class StoreClock:
    """``now()``: seconds since the epoch by the database server's clock."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._remote = engine.dialect.name == "postgresql"
        self._offset = 0.0
        self._measured_at = -REFRESH_S  # monotonic time of the last measurement
        self._lock = threading.Lock()
        self._warned = False

    @property
    def offset(self) -> float:
        """Seconds to add to this machine's clock to read the server's."""
        return self._offset

    def now(self) -> float:
        if self._remote and time.monotonic() - self._measured_at >= REFRESH_S:
            self._measure()
        return time.time() + self._offset

    def _measure(self) -> None:
        if not self._lock.acquire(blocking=False):
            return  # another thread is measuring; the last offset is good meanwhile
        try:
            before = time.time()
            with self._engine.connect() as conn:
                server = float(conn.execute(_SERVER_NOW).scalar_one())
            after = time.time()
            self._measured_at = time.monotonic()
            if after - before <= MAX_ROUND_TRIP_S:
                self._offset = server - (before + after) / 2
                if abs(self._offset) > WARN_SKEW_S and not self._warned:
                    self._warned = True
                    log.warning(
                        "this host's clock is %+.0f s off the store's (PostgreSQL's); leases and "
                        "heartbeats use the store's clock, but fix this host's time sync (NTP)",
                        -self._offset,
                    )
        except Exception as exc:  # an outage: keep the last offset, ask again next time
            self._measured_at = time.monotonic() - REFRESH_S + 5.0
            log.debug("store clock: could not read the server's time: %s", exc)
        finally:
            self._lock.release()
