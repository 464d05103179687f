"""Signals every run records without user code: step time and memory per step.

Keys (the contract the health detectors and the dashboard read):

* ``sys/step_time_s`` -- wall seconds per step, measured between consecutive ``log()`` calls
  that advance the step (a call whose step is higher than every step logged before). It is
  stored on the advancing call's step: ``(now - time of the previous advance) / (step -
  previous step)``, so a script that logs every 10 steps still gets seconds *per step*.
  Throughput is ``1 / sys/step_time_s`` (steps per second; the doctor derives it). No device
  sync: it is the host's view of the loop, which is what a stall shows up in. A step that goes
  backwards (a resumed loop) starts a new baseline and records nothing.
* ``sys/rss_bytes`` -- the process's resident set size, read from the ``log()`` path at most
  once per ``rss_interval`` seconds (default 1 s, so >= 1 Hz while the loop logs) and
  attached to that call's step; plus one sample at ``init()`` (step 0) and one at
  ``finish()`` (the last step), so even a short run has a memory series. The system sampler
  thread (``tracker.system``) keeps writing it too, every ``system_interval``.
* ``sys/step_wait_s`` -- seconds per step the training thread was ready to run but waited
  for a CPU that other processes held (Linux: the run-queue delay of ``/proc/thread-self/
  schedstat``, read with the RSS sample and averaged over the steps since the previous
  one). It tells contention from a stall: a loop slowed by other processes waits in the run
  queue, a loop that sleeps or blocks on I/O does not. Absent where the kernel does not say.
* ``sys/step_cpu_s`` -- CPU seconds per step the training thread ran, from the same read and
  over the same steps. With the wait it gives the share of the thread's demand for a CPU
  that went to waiting, which the doctor applies to the whole step: a loop on a shared CPU
  also blocks on work of its own other threads (the GIL handed to a background thread that
  then waits for a CPU, an intra-op worker) that waited as long, and that time shows in
  neither counter of the training thread.
* ``sys/gpu{i}/...`` -- the CUDA allocator counters of ``tracker.system.allocator_stats``
  (allocated, reserved, peak, retries, OOMs), read with the RSS sample when torch has
  initialised CUDA; ``sys/step/gpu_allocated_bytes`` and ``..._peak_...`` stay on every call.

On by default; ``tracker.init(auto_signals=False)`` turns them off, and so does turning the
system metrics off (``system_interval=None``) unless ``auto_signals=True`` is passed: a run
that asked for no system metrics holds exactly the points it logged.

Cost: one ``time.time()`` comparison and a float subtraction per ``log()`` call; the RSS read
(``/proc/self/statm`` through a kept file descriptor, about 2 µs; psutil elsewhere) happens
once a second, and so does the run-queue read (one ``pread``). ``bench/bench_log.py
--signals both`` measures it against signals off.

Failure modes: an unreadable ``/proc`` falls back to psutil; if that fails too, RSS is simply
not recorded (the step time still is). Nothing here raises into ``log()``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

STEP_TIME_KEY = "sys/step_time_s"
RSS_KEY = "sys/rss_bytes"
WAIT_KEY = "sys/step_wait_s"
CPU_KEY = "sys/step_cpu_s"


def run_queue_reader() -> Callable[[], tuple[float, float]] | None:
    """A reader of the calling thread's total ``(cpu, run-queue wait)`` in seconds (Linux),
    or None.

    The file is opened for the thread that calls this (the training loop's, at init)."""
    try:
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    except OSError:
        return None
    pread = os.pread

    def read_wait() -> tuple[float, float]:
        fields = pread(fd, 128, 0).split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9

    try:
        read_wait()
    except (OSError, ValueError, IndexError):
        os.close(fd)
        return None
    return read_wait


def rss_reader() -> Callable[[], float] | None:
    """A cheap reader of this process's RSS in bytes, or None if none works here."""
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
    except OSError:
        fd = -1
    if fd >= 0:
        page = os.sysconf("SC_PAGE_SIZE")
        pread = os.pread

        def read_statm() -> float:
            return float(int(pread(fd, 128, 0).split()[1]) * page)

        try:
            read_statm()
            return read_statm
        except (OSError, ValueError, IndexError):
            os.close(fd)
    try:
        import psutil

        process = psutil.Process()
        process.memory_info()
    except Exception:  # no psutil support on this platform: RSS is simply absent
        return None
    return lambda: float(process.memory_info().rss)


class StepSignals:
    """Adds ``sys/step_time_s`` and the sampled memory keys to the items of a ``log()`` call.

    ``observe`` is called by ``Run.log`` for every stored call, with the call's wall time.
    """

    __slots__ = (
        "_allocator",
        "_interval",
        "_last_step",
        "_last_time",
        "_next_sample",
        "_rss",
        "_wait",
        "_wait_at",
    )

    def __init__(
        self,
        now: float,
        rss_interval: float = 1.0,
        allocator: Callable[[], dict[str, float]] | None = None,
    ) -> None:
        self._interval = rss_interval
        self._rss = rss_reader()
        self._allocator = allocator
        self._last_step = -1
        self._last_time = 0.0
        self._next_sample = now + rss_interval
        self._wait = run_queue_reader()
        # (step, total cpu, total wait) at the last sample
        self._wait_at: tuple[int, float, float] | None = None

    def observe(self, step: int, now: float, items: dict[str, Any]) -> None:
        last = self._last_step
        if step > last:
            if last >= 0:
                items[STEP_TIME_KEY] = (now - self._last_time) / (step - last)
            self._last_step = step
            self._last_time = now
        elif step < last:  # the loop went back (a resume): a new baseline
            self._last_step = step
            self._last_time = now
        if now >= self._next_sample:
            self._next_sample = now + self._interval
            items.update(self.memory())
            self._sample_wait(step, items)

    def _sample_wait(self, step: int, items: dict[str, Any]) -> None:
        if self._wait is None:
            return
        try:
            cpu, wait = self._wait()
        except (OSError, ValueError, IndexError):
            self._wait = None
            return
        before, self._wait_at = self._wait_at, (step, cpu, wait)
        if before is not None and step > before[0]:
            steps = step - before[0]
            items[WAIT_KEY] = max(0.0, wait - before[2]) / steps
            items[CPU_KEY] = max(0.0, cpu - before[1]) / steps

    def memory(self) -> dict[str, float]:
        """RSS and the allocator counters now (empty when neither can be read)."""
        out: dict[str, float] = {}
        if self._rss is not None:
            try:
                out[RSS_KEY] = self._rss()
            except (OSError, ValueError, IndexError):
                self._rss = None
        if self._allocator is not None:
            try:
                out.update(self._allocator())
            except Exception:  # a broken driver must not break log()
                self._allocator = None
        return out


__all__ = [
    "CPU_KEY",
    "RSS_KEY",
    "STEP_TIME_KEY",
    "WAIT_KEY",
    "StepSignals",
    "rss_reader",
    "run_queue_reader",
]
