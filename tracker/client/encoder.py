"""The encoder thread: builds queued media entries (PNG encoding, histograms) ahead of the
writer, at the lowest CPU priority.

Encoding an image takes milliseconds of CPU. In the writer thread, at the training loop's
priority, that CPU was taken from the loop: on a 2-core machine a training step that logged
a 256x256 image took 2-3x as long, torch's intra-op threads waiting for the one the encoder
had displaced. Here the work runs in its own thread with the nice value ``ENCODER_NICE``
(Linux: a nice value is per thread), so the kernel gives the loop's threads the CPU first
and the encoder the idle time; the writer thread, which stores points and heartbeats, keeps
the normal priority. What is built waits for the writer in queue order
(:meth:`tracker.client.uploads.Uploads.send`); at most ``AHEAD`` entries are built before
the writer stores them, so built files do not pile up beside the raw data.

``$TRACKER_ENCODER_NICE`` sets the nice value (0: the loop's own priority).
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

ENCODER_NICE = 19
AHEAD = 4  # entries built and not yet stored, at most

__all__ = ["AHEAD", "ENCODER_NICE", "Encoder", "encoder_nice"]


def encoder_nice() -> int:
    """``$TRACKER_ENCODER_NICE`` (0..19), else ``ENCODER_NICE``."""
    raw = os.environ.get("TRACKER_ENCODER_NICE", "").strip()
    if not raw:
        return ENCODER_NICE
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= 19:
        raise InvalidInput(
            f"TRACKER_ENCODER_NICE={raw!r}: the media encoder thread's nice value is an "
            f"integer from 0 (the training loop's priority) to 19 (the lowest)",
            field="TRACKER_ENCODER_NICE",
        )
    return value


class Encoder:
    """Builds ``uploads``' entries in a daemon thread; ``on_built`` wakes the writer."""

    def __init__(self, uploads: Uploads, on_built: Callable[[], None], nice: int) -> None:
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


def _lower_priority(nice: int) -> None:
    """Raise this thread's nice value to ``nice`` (Linux only: elsewhere a thread id is no
    process id, and ``setpriority`` could reach another process)."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        if current < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError:  # a sandbox may refuse it: the encoder then runs at normal priority
        pass
