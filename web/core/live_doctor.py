"""The dashboard's live doctor: diagnose a run shortly after its points arrive over HTTP.

A run logged through the HTTP sink has no local SQL sink to run the doctor; the ingest view
calls :meth:`LiveDoctor.after_write` after each batch, which diagnoses the run (not final:
a NaN at the newest point may still recover) at most once per ``every_s`` seconds per run
(and no sooner than 10x the last pass's duration after it, so a huge run costs at most ~10%
of one thread), however fast the client sends.
The clock is injected for tests. A failure of the doctor is logged, never turned into a
failed ingest (the points are already stored); ``StoreUnavailable`` propagates (503).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tracker.errors import StoreUnavailable
from tracker.store import Store
from tracker.store.diagnoses import diagnose_run

log = logging.getLogger(__name__)


@dataclass
class LiveDoctor:
    store: Store
    every_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    _next: dict[int, float] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def after_write(self, run_id: int) -> bool:
        """Diagnose ``run_id`` if its last pass is ``every_s`` old; True when it ran."""
        now = self.clock()
        with self._lock:  # one pass per run per interval across the server's threads
            if now < self._next.get(run_id, -float("inf")):
                return False
            self._next[run_id] = now + self.every_s
        try:
            diagnose_run(self.store, run_id, final=False)
        except StoreUnavailable:
            raise
        except Exception:
            log.exception("run %s: the live doctor failed; it runs again later", run_id)
        took = self.clock() - now  # a big run's pass is rarer: at most ~10% of one thread
        with self._lock:
            self._next[run_id] = now + max(self.every_s, 10 * took)
        return True
