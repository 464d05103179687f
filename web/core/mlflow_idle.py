"""Runs created through the MLflow API send no heartbeats: a dead MLflow client would leave
its run ``running`` forever. Every write to such a run is recorded (``runs.written_at``,
at most once per ``touch_every_s`` per run and process, so a busy run costs one small
UPDATE every few seconds, not one per request); the dashboard's periodic loop
(:mod:`tracker.periodic`, task ``mlflow idle``) marks a run silent for ``idle_s`` seconds
``crashed`` with failure class ``idle`` (:func:`tracker.store.mlflow.mark_idle_runs_stale`). A later
write sets it running again. ``tracker ui --mlflow-idle-timeout`` sets ``idle_s``.

No Flask here; the MLflow views call :meth:`IdleRuns.touch`.
"""

from __future__ import annotations

import logging
import threading
import time

from tracker.store import Store
from tracker.store.mlflow import mark_idle_runs_stale, touch_run

__all__ = ["IdleRuns"]

log = logging.getLogger(__name__)

MAX_TOUCH_EVERY_S = 30.0
MAX_REMEMBERED = 100_000  # runs whose last touch is remembered; the oldest are forgotten


class IdleRuns:
    def __init__(self, store: Store, *, idle_s: float) -> None:
        if not idle_s > 0:
            raise ValueError(f"MLFLOW_IDLE_S ({idle_s!r}) must be seconds > 0")
        self.store = store
        self.idle_s = idle_s
        # the recorded last write lags the real one by at most this: well below idle_s
        self.touch_every_s = min(MAX_TOUCH_EVERY_S, idle_s / 10)
        self._touched: dict[int, float] = {}
        self._lock = threading.Lock()

    def touch(self, run_id: int, now: float | None = None) -> bool:
        """Record a write to ``run_id`` unless one was recorded recently; True if recorded."""
        now = time.time() if now is None else now
        with self._lock:
            last = self._touched.get(run_id)
            if last is not None and now - last < self.touch_every_s:
                return False
            if len(self._touched) >= MAX_REMEMBERED:
                self._touched.clear()
            self._touched[run_id] = now
        touch_run(self.store, run_id, now)
        return True

    def sweep_once(self, now: float | None = None) -> list[int]:
        """Mark the runs silent for ``idle_s`` stale; returns their ids."""
        now = time.time() if now is None else now
        with self._lock:  # a run marked stale must be touched again by its next write
            stale = mark_idle_runs_stale(
                self.store, older_than=now - self.idle_s, idle_s=self.idle_s
            )
            for run_id in stale:
                self._touched.pop(run_id, None)
        for run_id in stale:
            log.warning("MLflow run %s: no writes for %.0f s, marked stale (crashed, failure "
                        "class idle)", run_id, self.idle_s)  # fmt: skip
        return stale
