"""The encoder thread: builds queued media entries (PNG encoding, histograms) ahead of the
writer, at the lowest CPU priority.

Encoding an image takes milliseconds of CPU. In the writer thread, at the training loop's
priority, that CPU was taken from the loop: on a 2-core machine a training step that logged
a 256x256 image took 2-3x as long, torch's intra-op threads waiting for the one the encoder
had displaced. Here the work runs in its own thread in Linux's idle scheduling class
(``SCHED_IDLE``, set per thread): any other thread that wakes up takes its CPU at once, so
the encoder gets the time the loop's threads leave idle. At nice 19 (the lowest nice value,
what this thread had before) the kernel let the encoder finish its time slice first, and a
step that logged an image still cost ~1 ms more (bench/RESULTS.md). The writer thread, which
stores points and heartbeats, keeps the normal priority. What is built waits for the writer
in queue order (:meth:`tracker.client.uploads.Uploads.send`); at most ``AHEAD`` entries are
built before the writer stores them, so built files do not pile up beside the raw data.

``$TRACKER_ENCODER_NICE`` (0..19) replaces the idle class by that nice value (0: the loop's
own priority). Where the idle class is refused, the encoder runs at nice 19.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from tracker.errors import InvalidInput

if TYPE_CHECKING:
    from tracker.client.uploads import Uploads

ENCODER_NICE = 19  # the fallback where the idle class is refused
AHEAD = 4  # entries built and not yet stored, at most

__all__ = ["AHEAD", "ENCODER_NICE", "Encoder", "encoder_nice"]


def encoder_nice() -> int | None:
    """``$TRACKER_ENCODER_NICE`` (0..19), else None: the idle scheduling class."""
    raw = os.environ.get("TRACKER_ENCODER_NICE", "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= 19:
        raise InvalidInput(
            f"TRACKER_ENCODER_NICE={raw!r}: the media encoder thread's nice value is an "
            f"integer from 0 (the training loop's priority) to 19; unset, the encoder runs "
            f"in the idle scheduling class (below nice 19)",
            field="TRACKER_ENCODER_NICE",
        )
    return value


class Encoder:
    """Builds ``uploads``' entries in a daemon thread; ``on_built`` wakes the writer."""

    def __init__(self, uploads: Uploads, on_built: Callable[[], None], nice: int | None) -> None:
        self._uploads = uploads
        self._on_built = on_built
        self._nice = nice
        self.thread = threading.Thread(target=self._loop, name="tracker-encoder", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        _lower_priority(self._nice)
        uploads = self._uploads
        while True:
            entry = uploads.next_to_build(AHEAD)
            if entry is None:  # the uploads are closed
                return
            try:
                entry.built = entry.build()
            except Exception as exc:  # stored as the entry's failure by the writer
                entry.failed = exc
            self._on_built()


def _lower_priority(nice: int | None) -> None:
    """Put this thread in the idle scheduling class (``nice`` None; nice 19 where that is
    refused) or raise its nice value to ``nice``. Linux only: elsewhere a thread id is no
    process id, and ``setpriority`` could reach another process."""
    if not sys.platform.startswith("linux") or (nice is not None and nice <= 0):
        return
    tid = threading.get_native_id()
    if nice is None:
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            return
        except (OSError, AttributeError):  # a sandbox may refuse it
            nice = ENCODER_NICE
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        if current < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError:  # refused too: the encoder then runs at normal priority
        pass
