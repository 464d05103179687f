"""A wake-up call that a signal handler may give: :class:`Wakeup`.

``threading.Event.set()`` takes the lock of the Event's Condition. Python runs a signal
handler in the main thread, between two bytecodes of whatever that thread was doing; when
it was inside the same Event's ``wait()`` or ``clear()`` (holding that lock: on a loaded
machine the thread can be descheduled there), the handler's ``set()`` waits for a lock its
own thread holds, for ever, and every later signal nests inside that wait until a
RecursionError (reproduced by a signal storm on a loaded machine: tests/unit/test_wakeup.py).
The worker's loop waited on such an Event and set it from its handler.

:class:`Wakeup` has the Event's interface for this use (``set``, ``is_set``, ``wait``,
``clear``) and takes no lock: ``set`` stores a flag and writes a byte to a pipe, ``wait``
selects on the pipe. Safe from signal handlers and from any thread.
"""

from __future__ import annotations

import contextlib
import os
import select
import weakref

__all__ = ["Wakeup"]


class Wakeup:
    """A flag with a wake-up pipe; see the module docstring. ``set`` is sticky until
    ``clear``, as an Event's is."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._flag = False
        # Closed only once nothing can call set() any more: a descriptor closed while a
        # thread may still write to it could be reused by another file in between.
        weakref.finalize(self, _close, self._read, self._write)

    def set(self) -> None:
        self._flag = True  # before the byte: a waiter woken by it sees the flag
        with contextlib.suppress(BlockingIOError, OSError):  # full pipe: already woken
            os.write(self._write, b"\0")

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        """Until ``set`` (at once if it is set) or ``timeout`` seconds; whether it is set."""
        if self._flag:
            return True
        with contextlib.suppress(OSError, ValueError):  # closed under us: as a timeout
            select.select([self._read], [], [], timeout)
        return self._flag

    def clear(self) -> None:
        self._flag = False  # first: a set() from now on is kept (flag, or a byte not drained)
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._read, 4096):
                pass


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
