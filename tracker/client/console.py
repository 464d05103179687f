"""Console capture for runs started by hand: stdout/stderr teed into the store like a job's logs.

A script run by hand has no worker storing its output, so warnings (torch.compile's
recompiles, a NaN printed by the loop) and the final traceback would be lost. While a run is
active, ``sys.stdout`` and ``sys.stderr`` are replaced by tees:

* **Never swallowed, never reordered:** every ``write`` goes first, synchronously and
  unchanged, to the original stream (same object, same buffering, ``isatty()``/``fileno()``
  delegated), and only then is copied into an in-memory queue. What the terminal shows is
  exactly what it showed without the tracker.
* **Stored like a job's output:** a daemon thread sends the queue every second as chunks
  (``stdout``/``stderr``) to ``run_log_chunks`` (``tracker.store.logs.append_run``); the run
  page's Logs tab and ``GET /api/v1/runs/<id>/logs`` show them; ``finish()`` sends the rest.
* **Bounded:** a run keeps its newest ``console_max_chars`` characters (default 4 MiB of
  text, ``tracker.init(console_max_chars=...)``); older chunks are deleted and a ``meta`` line
  says how much was trimmed. While the store is unreachable at most that many characters wait
  in memory (the oldest are dropped first, with a note).
* Logging handlers created before ``init()`` (torch's own, ``logging.basicConfig``) write to
  the stream object they were given: a ``StreamHandler`` holding the original stdout/stderr
  is pointed at the tee while the capture runs, and back after.

Off when the run belongs to a job (the worker already stores its output), for a follower rank,
and with ``tracker.init(capture_console=False)``. Both sinks store it: the SQL sink directly,
the HTTP sink through ``POST /api/v1/runs/<id>/logs``. Not captured: bytes written straight
to file descriptors 1/2 (C/C++ code, child processes) or to ``sys.stdout.buffer``.

Failure modes: a store error other than ``StoreUnavailable`` stops storing (one note on the
original stderr, or the run's failure report: :mod:`tracker.client.failsafe`); the tee
itself keeps passing output through. Output still queued when
``finish()`` cannot reach the store is dropped with a note on stderr (metrics have the spill
file; console text does not).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tracker.errors import StoreUnavailable

DEFAULT_MAX_CHARS = 4 * 1024 * 1024
TAIL_CHARS = 64 * 1024  # kept in memory for the failure classifier at finish
FLUSH_INTERVAL = 1.0


class _Tee:
    """A text stream that writes to ``stream`` and copies what it wrote into ``capture``."""

    def __init__(self, stream: Any, name: str, capture: ConsoleCapture) -> None:
        self._stream = stream
        self._name = name
        self._capture = capture

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        if type(text) is str and text:
            self._capture.add(self._name, text)
        return written  # type: ignore[no-any-return]

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class ConsoleCapture:
    """Tees ``sys.stdout``/``sys.stderr`` into ``sink.append_logs`` for one run."""

    def __init__(
        self,
        sink: Any,
        run_id: int,
        *,
        max_chars: int = DEFAULT_MAX_CHARS,
        flush_interval: float = FLUSH_INTERVAL,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._sink = sink
        # Gets the error that stopped storing (tracker.client.failsafe); None: a line here
        self._on_failure = on_failure
        self._run_id = run_id
        self.max_chars = max_chars
        self._queue: deque[tuple[str, float, str]] = deque()
        self._queued = 0
        self._dropped = 0
        self._tail: deque[str] = deque()
        self._tail_chars = 0
        # Re-entrant: a signal handler (SIGTERM finishing the run) may interrupt a write
        # in this thread while it holds the lock.
        self._lock = threading.RLock()
        self._send_lock = threading.RLock()
        self._failed = False
        self._stop = threading.Event()
        self._originals = (sys.stdout, sys.stderr)
        # A missing stream (None, as under pythonw) stays missing: print() skips it.
        self._tees = tuple(
            None if stream is None else _Tee(stream, name, self)
            for stream, name in ((sys.stdout, "stdout"), (sys.stderr, "stderr"))
        )
        self._handlers: list[logging.StreamHandler[Any]] = []
        if self._tees[0] is not None:
            sys.stdout = self._tees[0]  # type: ignore[assignment]
        if self._tees[1] is not None:
            sys.stderr = self._tees[1]  # type: ignore[assignment]
        self._point_handlers()
        self._thread = threading.Thread(
            target=self._loop, args=(flush_interval,), name="tracker-console", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ capture

    def add(self, stream: str, text: str) -> None:
        with self._lock:
            self._queue.append((stream, time.time(), text))
            self._queued += len(text)
            while self._queued > self.max_chars and len(self._queue) > 1:
                dropped = self._queue.popleft()[2]
                self._queued -= len(dropped)
                self._dropped += len(dropped)
            self._tail.append(text)
            self._tail_chars += len(text)
            while self._tail_chars > TAIL_CHARS and len(self._tail) > 1:
                self._tail_chars -= len(self._tail.popleft())

    def tail(self) -> str:
        """The newest captured output (up to 64 KiB), for the failure classifier."""
        with self._lock:
            return "".join(self._tail)

    def _point_handlers(self) -> None:
        loggers: list[Any] = [logging.getLogger()]
        loggers.extend(logging.Logger.manager.loggerDict.values())
        for logger in loggers:
            for handler in getattr(logger, "handlers", ()):
                if isinstance(handler, logging.StreamHandler) and not isinstance(
                    handler, logging.FileHandler
                ):
                    for original, tee in zip(self._originals, self._tees, strict=True):
                        if tee is not None and handler.stream is original:
                            handler.stream = tee
                            self._handlers.append(handler)

    # ------------------------------------------------------------------ sending

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.send()

    def send(self) -> None:
        """Send what is queued; keep it on ``StoreUnavailable`` (retried next time)."""
        with self._send_lock:
            if self._failed:
                return
            with self._lock:
                batch = list(self._queue)
                self._queue.clear()
                self._queued = 0
                dropped, self._dropped = self._dropped, 0
            if dropped:
                note = (
                    f"[tracker: {dropped} characters of older console output were dropped "
                    f"before they were stored: a run keeps its newest {self.max_chars} "
                    "characters, and more came between two sends or while the store was "
                    "unreachable]\n"
                )
                batch.insert(0, ("meta", time.time(), note))
            if not batch:
                return
            try:
                self._sink.append_logs(self._run_id, batch, self.max_chars)
            except StoreUnavailable:
                with self._lock:
                    self._queue.extendleft(reversed([b for b in batch if b[0] != "meta"]))
                    self._queued += sum(len(b[2]) for b in batch if b[0] != "meta")
                    self._dropped += dropped
            except Exception as exc:  # stop storing, keep teeing; say it once
                self._failed = True
                if self._on_failure is not None:
                    self._on_failure(exc)
                    return
                _warn(
                    self._originals[1],
                    f"tracker: console capture of run {self._run_id} stopped: "
                    f"{type(exc).__name__}: {exc}\n",
                )

    def stop(self, *, send: bool = True) -> None:
        """Put the original streams back and send what is left (once; never raises).

        ``send=False`` (the store is known to be down) sends nothing, and neither does a
        capture whose thread is still blocked in the store after 5 s: the exit of the
        process must not wait on the store twice. What is left is reported as not stored.
        """
        if self._stop.is_set():
            return
        self._stop.set()
        if self._tees[0] is not None and sys.stdout is self._tees[0]:
            sys.stdout = self._originals[0]
        if self._tees[1] is not None and sys.stderr is self._tees[1]:
            sys.stderr = self._originals[1]
        for handler in self._handlers:
            for original, tee in zip(self._originals, self._tees, strict=True):
                if tee is not None and handler.stream is tee:
                    handler.stream = original
        self._thread.join(timeout=5)
        if send and not self._thread.is_alive():
            self.send()
        with self._lock:
            left = self._queued
        if left:
            _warn(
                self._originals[1],
                f"tracker: {left} characters of console output of run {self._run_id} were not "
                "stored: the store is unreachable\n",
            )


def _warn(stream: Any, message: str) -> None:
    """Say it on the original stderr, if the process has one."""
    if stream is not None:
        stream.write(message)


__all__ = ["DEFAULT_MAX_CHARS", "ConsoleCapture"]
