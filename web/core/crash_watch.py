"""The dashboard's crash watch: a daemon thread that marks silent runs ``crashed``.

So a dead training process is noticed with only a dashboard running (no ``tracker worker``
or ``tracker scheduler``): every ``interval_s`` seconds one indexed read looks for
``running`` runs whose last heartbeat is older than ``stale_s``
(:meth:`tracker.store.Store.mark_stale_runs_crashed`; defaults and the resulting detection
time in :mod:`tracker.rules.liveness`). It takes a write lock only when it finds one.

Safe with several gunicorn workers (each runs a watch; the update is fenced in SQL, so a
run is changed once) and across ``fork`` (``ensure_running``, called on each request,
starts the thread again in a child that inherited a watch but not its thread, e.g. with
gunicorn's ``--preload``). A pass that fails (store unavailable, any error) is logged and
the next pass runs as usual: the watch never dies of an error.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from tracker.errors import StoreUnavailable
from tracker.store import Store
from tracker.web.core.mlflow_idle import IdleRuns

log = logging.getLogger(__name__)


class CrashWatch:
    """``stale_s``: runs without heartbeats this long are crashed (None: not swept);
    ``idle``: also mark silent MLflow runs stale (:mod:`tracker.web.core.mlflow_idle`)."""

    def __init__(
        self,
        store: Store,
        *,
        stale_s: float | None,
        interval_s: float,
        idle: IdleRuns | None = None,
    ) -> None:
        if (stale_s is not None and not stale_s > 0) or not interval_s > 0:
            raise ValueError(
                f"crash watch: RUN_STALE_S ({stale_s!r}) and CRASH_SWEEP_S ({interval_s!r}) "
                "must be seconds > 0"
            )
        self.store = store
        self.stale_s = stale_s
        self.idle = idle
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def sweep_once(self, now: float | None = None) -> list[int]:
        """One pass: the ids of the runs it marked crashed (silent MLflow runs included)."""
        now = time.time() if now is None else now
        crashed: list[int] = []
        if self.stale_s is not None:
            crashed = self.store.mark_stale_runs_crashed(older_than=now - self.stale_s, now=now)
            for run_id in crashed:
                log.warning("run %s: no heartbeat for %.0f s, marked crashed", run_id, self.stale_s)
        if self.idle is not None:
            idle = self.idle.sweep_once(now)
            for run_id in idle:
                log.warning("MLflow run %s: no writes for %.0f s, marked stale (crashed, "
                            "failure class idle)", run_id, self.idle.idle_s)  # fmt: skip
            crashed = sorted(crashed + idle)
        return crashed

    def ensure_running(self) -> None:
        """Start the thread unless it runs in this process (cheap: one pid compare)."""
        if self._pid == os.getpid() or self._stop.is_set():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._thread = threading.Thread(target=self._loop, name="tracker-crash-watch",
                                            daemon=True)  # fmt: skip
            self._thread.start()
            self._pid = os.getpid()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and self._pid == os.getpid():
            thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sweep_once()
            except StoreUnavailable as exc:
                log.warning("crash watch: the store is unavailable, will retry: %s", exc.message)
            except Exception:
                log.exception("crash watch pass failed; it runs again in %.0f s", self.interval_s)
