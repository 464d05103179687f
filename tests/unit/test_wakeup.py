"""tracker.wakeup.Wakeup: an Event's interface without a lock, so that a signal handler may
set it. A threading.Event set from a handler deadlocks when the signal lands while the main
thread is inside that Event's wait() or clear() (the handler waits for the Condition's lock
its own thread holds; every later signal nests inside that wait until RecursionError): the
worker's loop was such a waiter, and under load it ignored SIGINT/SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

from tracker.wakeup import Wakeup

SIGNALS = 3000

CHILD = textwrap.dedent(f"""
    import signal, sys, threading, time
    from tracker.wakeup import Wakeup

    wake = threading.Event() if sys.argv[1] == "event" else Wakeup()
    seen = 0

    def handler(*_):
        global seen
        seen += 1
        wake.set()

    signal.signal(signal.SIGUSR1, handler)
    print("ready", flush=True)
    deadline = time.monotonic() + 60
    while seen < {SIGNALS} and time.monotonic() < deadline:
        wake.wait(0.0005)  # the worker's loop: wait, clear, again
        wake.clear()
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # the rest of the storm: ignored
    print("done", seen, flush=True)
""")


def test_it_behaves_as_an_event() -> None:
    wake = Wakeup()
    assert not wake.is_set() and wake.wait(0.01) is False
    wake.set()
    wake.set()  # twice is once
    assert wake.is_set() and wake.wait(10) is True and wake.wait(0) is True  # sticky
    wake.clear()
    assert not wake.is_set() and wake.wait(0.01) is False
    threading.Timer(0.05, wake.set).start()  # from another thread, as a job's exit does
    start = time.monotonic()
    assert wake.wait(30) is True
    assert time.monotonic() - start < 10
    for _ in range(100_000):  # far more than a pipe holds: set() never blocks
        wake.set()
    wake.clear()
    assert wake.wait(0.01) is False


def test_a_storm_of_signals_setting_it_never_deadlocks_the_waiting_thread() -> None:
    """The same child with ``event`` instead of ``wakeup`` hung (then died of RecursionError)
    in about one run of three on a loaded 2-core machine."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "wakeup"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    deadline = time.monotonic() + 90
    while child.poll() is None and time.monotonic() < deadline:
        try:
            os.kill(child.pid, signal.SIGUSR1)
        except ProcessLookupError:
            break
        time.sleep(0.0002)
    try:
        out, err = child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == 0, err[-3000:]
    assert out.strip() == f"done {SIGNALS}", (out, err[-3000:])
    assert err == ""
