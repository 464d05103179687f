"""Awaiting a child process's output lines, with a deadline."""

from __future__ import annotations

import codecs
import os
import selectors
import time
from typing import IO


class Lines:
    """The lines of a child's output pipe, read as they come.

    Reads the pipe's bytes itself: lines that arrive together are all seen. A buffered
    ``readline()`` after ``select()`` is not enough: it keeps the later lines of one read in
    its buffer, where ``select()`` cannot see them, and the wait for the next line times out
    although the child printed it.
    """

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.seen: list[str] = []  # every whole line read so far, with its newline
        self._pending = ""  # read from the pipe, not yet a whole line
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def wait_for(self, prefix: str, timeout: float) -> str | None:
        """The next line starting with ``prefix`` (stripped), or None when ``timeout``
        seconds passed or the pipe closed first. Lines before it are kept in ``seen``."""
        fd = self._stream.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                while "\n" in self._pending:
                    line, self._pending = self._pending.split("\n", 1)
                    self.seen.append(line + "\n")
                    if line.startswith(prefix):
                        return line.strip()
                if time.monotonic() >= deadline:
                    return None
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self._pending += self._decoder.decode(chunk)

    def rest(self) -> str:
        """Every line seen, then what the pipe still holds (call once the child ended)."""
        tail = self._pending
        while chunk := os.read(self._stream.fileno(), 1 << 20):
            tail += self._decoder.decode(chunk)
        self._pending = ""
        self.seen.append(tail)
        return "".join(self.seen)
