"""The tracker never stops training: what a failure inside the tracker does instead of raising.

Contract:

* Only the caller's own mistakes raise in a training process: a metric of the wrong type
  (``InvalidMetricType``), a bad key or step (``InvalidMetricKey``, ``InvalidInput``), using a
  finished run or a parent's run (``NoActiveRun``, ``InheritedRunError``). A job attempt that
  another attempt took over (``AttemptSuperseded``, raised as ``WriterError``) is not a
  failure of the tracker either: that process must stop, and still does.
* Everything that fails inside the tracker -- an upload, the store past its retries, a full
  disk, the media encoder, the doctor, the HTTP sink, the writer thread -- goes to
  :meth:`Failsafe.report`: **one** line on stderr per kind of failure per run, naming what
  failed and where the data went (the spill file and its ``tracker db replay`` command, or
  "not stored"), and a run event of kind ``tracker_failure`` that the writer stores once the
  store takes it (else it goes to the spill file with the points, and the replay stores it).
  Training goes on: ``log()``, ``log_image()``, ``flush()``, ``finish()``,
  ``save_checkpoint()`` and the exit of the process do not raise for these.
* A store that cannot be reached when ``tracker.init()`` creates the run gives an *offline*
  run (id 0) that keeps everything in one spill file: :mod:`tracker.client.offline`.
* ``tracker.init(..., strict=True)`` or ``TRACKER_STRICT=1`` raises them instead, exactly as
  the calls always did (``UploadError``, ``WriterError``, ``StoreUnavailable``, ...); the
  project's own tests run strict.

Failure modes: ``strict_mode`` raises ``InvalidInput`` for a ``TRACKER_STRICT`` value that is
neither true nor false. ``report`` never raises (a closed stderr is skipped).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from tracker.errors import InvalidInput, TrackerError

ENV_STRICT = "TRACKER_STRICT"
EVENT_KIND = "tracker_failure"  # the run event each kind of failure records once
NOT_STORED = "not stored"
MAX_DETAIL_CHARS = 400  # of another library's error message in the line and the event
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")

__all__ = [
    "ENV_STRICT", "EVENT_KIND", "NOT_STORED", "Failsafe", "kept_in", "spill_events", "strict_mode",
]  # fmt: skip


def strict_mode(strict: bool | None = None) -> bool:
    """The argument, else ``$TRACKER_STRICT`` (1/true/yes/on; unset: False).

    Raises:
        InvalidInput: ``strict`` is not a bool, or ``TRACKER_STRICT`` is neither true nor false.
    """
    if strict is not None:
        if not isinstance(strict, bool):
            raise InvalidInput(f"strict={strict!r}: must be True or False", field="strict")
        return strict
    raw = os.environ.get(ENV_STRICT, "").strip().lower()
    if raw in _TRUE or raw in _FALSE:
        return raw in _TRUE
    raise InvalidInput(
        f"{ENV_STRICT}={raw!r}: must be 1 (raise the tracker's own failures) or 0 (warn once "
        f"and keep training, the default)",
        field=ENV_STRICT,
    )


def replay_command(*paths: Path | str) -> str:
    """The command that stores ``paths``, in backquotes, each path quoted for a shell (a
    spill directory may have spaces in its name): pasted as shown, it runs."""
    return "`tracker db replay " + " ".join(shlex.quote(str(p)) for p in paths) + "`"


def kept_in(path: Path | str) -> str:
    """Where the data went, in the words of the warning line."""
    return f"kept in {path}: store it with {replay_command(path)} once the cause is fixed"


class Failsafe:
    """Reports the tracker's own failures of one run (see the module docstring).

    ``strict`` tells callers to raise instead; the callers decide, this class only reports.
    """

    def __init__(self, run_id: int, *, strict: bool, name: str | None = None) -> None:
        self.run_id = run_id
        self.name = name or f"run {run_id}"  # as the warning line calls it
        self.strict = strict
        self.counts: dict[str, int] = {}  # kind -> failures reported
        self.events: deque[dict[str, Any]] = deque()  # waiting for the writer to store them
        self._lock = threading.Lock()

    def report(self, kind: str, what: str, error: BaseException | str, kept: str) -> None:
        """Record that ``what`` failed with ``error`` and where its data went (``kept``).

        The first failure of each ``kind`` writes one line on stderr and queues one run event;
        later ones are counted only. Never raises.
        """
        ours = isinstance(error, TrackerError)  # names where the data went: never cut
        if isinstance(error, BaseException):
            error = f"{_public_name(type(error))}: {error}"
        detail = " ".join(str(error).split())  # one line, whatever the message holds
        if len(detail) > MAX_DETAIL_CHARS and not ours:  # a driver's may quote SQL and data
            detail = detail[: MAX_DETAIL_CHARS - 1] + "…"
        message = f"{what} failed: {detail}; {kept}"
        with self._lock:
            first = kind not in self.counts
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if first:
                data = {"failure": kind, "kept": kept, "error": detail, "at": time.time()}
                self.events.append({"kind": EVENT_KIND, "message": message, "data": data})
        if first:
            _say(
                f"tracker: {self.name}: {message}. Training goes on (this is said once; "
                f"{ENV_STRICT}=1 raises instead)"
            )

    def queue_event(self, kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        """Queue a run event of the client's own evidence (``tracker.watch``'s recompile
        limit) for the writer thread: stored like the failure events, no store write on the
        calling thread. Never raises."""
        with self._lock:
            self.events.append({"kind": kind, "message": message, "data": data})

    def take_events(self) -> list[dict[str, Any]]:
        """The events not yet stored, taken off the queue."""
        with self._lock:
            events = list(self.events)
            self.events.clear()
        return events

    def give_back(self, events: list[dict[str, Any]]) -> None:
        """Put events that could not be stored back, first in line."""
        with self._lock:
            self.events.extendleft(reversed(events))


def spill_events(path: Path, run_id: int, events: list[dict[str, Any]]) -> None:
    """Append ``events`` to the spill file ``path`` (``tracker db replay`` stores them).

    Raises:
        OSError: the file cannot be written.
    """
    if not events:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        for event in events:
            fh.write(json.dumps({"run_id": run_id, "event": event}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _public_name(cls: type) -> str:
    """The name of the first public class of ``cls``'s line (a private subclass such as the
    HTTP sink's refused-connection error is shown as the public error it is)."""
    for klass in cls.__mro__:
        if not klass.__name__.startswith("_"):
            return klass.__name__
    return cls.__name__


def _say(line: str) -> None:
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    if stream is None:
        return
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):  # stderr closed or gone: the run event still says it
        pass
