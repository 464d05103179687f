"""Run one function in several threads at once and keep what they raised."""

from __future__ import annotations

import threading
from collections.abc import Callable


def raised_at_once(work: Callable[[], None], threads: int) -> list[BaseException]:
    """Start ``threads`` threads of ``work`` together (a barrier), wait for all of them,
    and return what they raised (empty when none did)."""
    errors: list[BaseException] = []
    go = threading.Barrier(threads)

    def run() -> None:
        try:
            go.wait()
            work()
        except BaseException as exc:  # every failure is the caller's to assert on
            errors.append(exc)

    started = [threading.Thread(target=run) for _ in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    return errors
