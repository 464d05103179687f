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

The thread is a daemon: at exit it is dropped wherever it is, which is harmless in Python
or C code (numpy, zlib, Pillow) but aborts the process inside torch code that released the
GIL ("terminate called without an active exception": the thread is ended from a C++
destructor that takes the GIL back). Torch releases it in its ops and also whenever a
tensor is freed, so a daemon thread that drops the last reference to a tensor as the
interpreter exits aborts the process just the same. So builds wrap their torch ops, and
free the tensors those make, in :func:`torch_op`; the thread lets go of each entry (which
may hold the only reference to a logged tensor) in it too; and closing the uploads waits
for one under way and bars new ones (:class:`TorchGate`). Once barred, the thread keeps
what it holds in ``_ABANDONED`` (freed by the main thread: at the interpreter's exit, or
when the next encoder starts). CPU tensors are read by numpy over their memory
(:func:`tracker.client.media._numpy_view`), which makes no torch object: ``tensor.numpy()``
makes one, the array's base, whose free released the GIL outside the gate when the array
was dropped (the README example aborted at exit about once in 700 runs). A torch op is
left only for tensors on a device or of a type numpy lacks (bfloat16).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from tracker.errors import InvalidInput

if TYPE_CHECKING:
    from tracker.client.uploads import Uploads

ENCODER_NICE = 19  # the fallback where the idle class is refused
AHEAD = 4  # entries built and not yet stored, at most
TORCH_NOTICE_S = 5.0  # stop(): a line on stderr once a torch op holds the exit this long
TORCH_WAIT_S = 120.0  # stop(): how long the exit waits for a torch op under way, at most

__all__ = [
    "AHEAD", "ENCODER_NICE", "Encoder", "EncoderStopped", "TorchGate", "encoder_nice",
    "torch_op",
]  # fmt: skip

_thread_gate = threading.local()  # .gate: the TorchGate of the encoder running this thread
# Entries a stopped encoder thread held: never freed by that thread (see the docstring)
_ABANDONED: list[object] = []


class EncoderStopped(BaseException):
    """Raised by :func:`torch_op` in an encoder thread whose uploads closed: the entry is
    left to the writer or the spill file, and the thread ends. A ``BaseException``, so
    the build's own ``except Exception`` does not take it for the entry's failure."""


class TorchGate:
    """Whether the encoder thread is inside a torch op; once barred, no new one starts."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._inside = False
        self._barred = False

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        with self._cond:
            if self._barred:
                raise EncoderStopped
            self._inside = True
        try:
            yield
        finally:
            with self._cond:
                self._inside = False
                self._cond.notify_all()

    def bar(self, timeout: float) -> bool:
        """No torch op starts from now on; True once none is under way, False if one
        still is after ``timeout`` seconds."""
        with self._cond:
            self._barred = True
            return self._cond.wait_for(lambda: not self._inside, timeout)


@contextlib.contextmanager
def torch_op() -> Iterator[None]:
    """Around a torch call that releases the GIL in code an encoder thread may run (a
    build); elsewhere (the writer, the caller) it does nothing."""
    gate = getattr(_thread_gate, "gate", None)
    if gate is None:
        yield
        return
    with gate.inside():
        yield


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
        self.gate = TorchGate()
        _ABANDONED.clear()  # a stopped encoder's entries, freed here, in the caller's thread
        self.thread = threading.Thread(target=self._loop, name="tracker-encoder", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """The uploads closed: wait for a torch op under way in the thread to end (up to
        ``TORCH_WAIT_S``, with a line on stderr after ``TORCH_NOTICE_S``) and bar new
        ones, so that the process may exit (see the module's docstring). Not a join: the
        thread may go on in numpy or zlib with an entry the writer built too."""
        if self.gate.bar(TORCH_NOTICE_S):
            return
        sys.stderr.write(
            "tracker: waiting for the media encoder thread to finish a torch operation "
            f"(up to {TORCH_WAIT_S:g} s): a process that exits during one aborts\n"
        )
        if not self.gate.bar(TORCH_WAIT_S - TORCH_NOTICE_S):
            sys.stderr.write(
                f"tracker: the media encoder thread is still inside a torch operation after "
                f"{TORCH_WAIT_S:g} s; not waiting longer\n"
            )

    def _loop(self) -> None:
        _thread_gate.gate = self.gate
        _lower_priority(self._nice)
        uploads = self._uploads
        while True:
            entry = uploads.next_to_build(AHEAD)
            if entry is None:  # the uploads are closed
                return
            try:
                entry.built = entry.build()
            except EncoderStopped:  # closed: the writer or the spill builds it
                _ABANDONED.append(entry)
                return
            except Exception as exc:  # stored as the entry's failure by the writer
                entry.failed = exc
            try:
                with self.gate.inside():  # the writer may have stored it: the last reference
                    del entry
            except EncoderStopped:  # closed: not freed in this thread
                _ABANDONED.append(entry)
                return
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
