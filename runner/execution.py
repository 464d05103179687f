"""One job's process: spawned as argv (never through a shell) in its own process group.

On Linux the job runs under its supervisor (:mod:`tracker.runner.supervisor`): the job's
leader still leads its own session and process group (``pgid``, reported by the supervisor),
while ``pid`` and ``returncode`` are the supervisor's, which exits with the job's status. The
supervisor is the job tree's subreaper and kills every process of the job when the worker
dies, SIGKILL included, or when the job's leader exits.

Output is read line by line by two threads into a bounded buffer the worker drains into the
store. Stopping is two-step: SIGTERM to the whole group, then SIGKILL after a grace period;
the group is killed again once the leader has exited, so DataLoader workers and other
children never outlive the job. Children that left the group (``setsid``) are remembered
from ``psutil`` snapshots and killed too.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import IO

import psutil

from tracker.store.logs import Line

READ_LIMIT = 64 * 1024  # a longer "line" (e.g. a progress bar without newlines) is split
TAIL_CHARS = 16 * 1024  # stderr kept for the failure classifier
MAX_PENDING_CHARS = 8 * 1024 * 1024
TREE_KILL_S = 2.0  # after a group SIGKILL, how long the supervisor has to exit before its own
REPORT_TIMEOUT_S = 10.0  # the supervisor reports the job's pid once it has exec'd


# The supervisor is imported by file from this directory, not run as a script, so its
# bytecode is cached (measured: 34 vs 40 ms of CPU per job start, most of it the interpreter).
_HERE = os.path.dirname(os.path.abspath(__file__))
_BOOT = f"import sys; sys.path.insert(0, {_HERE!r}); import supervisor as s; s.main(sys.argv[1:])"


def supervised() -> bool:
    """True where jobs run under :mod:`tracker.runner.supervisor` (Linux)."""
    return sys.platform.startswith("linux")


class SpawnError(Exception):
    """The process could not be started (missing program or directory, no permission)."""


def _check_program(program: str, cwd: str | None, env: Mapping[str, str]) -> None:
    """Raise SpawnError unless ``program`` resolves to an executable file (as execvp would)."""
    if os.sep in program:
        found = os.path.join(cwd or os.getcwd(), program)
        ok = os.path.isfile(found) and os.access(found, os.X_OK)
    else:
        ok = shutil.which(program, path=env.get("PATH", os.defpath)) is not None
    if not ok:
        where = cwd or os.getcwd()
        raise SpawnError(f"could not start {program!r} in {where}: no such executable file")


def spawn_plan(
    argv: Sequence[str], cwd: str | None, env: Mapping[str, str], report_fd: int = -1
) -> list[str]:
    """The argv to exec so that every process of the job dies with its worker.

    On Linux the job runs under the per-job supervisor (:mod:`tracker.runner.supervisor`):
    it is the job tree's subreaper and kills the whole tree when the worker's pipe closes.
    It writes the job leader's pid to ``report_fd``. Raises SpawnError when the program
    cannot be found (the supervisor would only say so on stderr).
    """
    if not supervised():
        return list(argv)
    _check_program(argv[0], cwd, env)
    return [sys.executable, "-I", "-S", "-c", _BOOT, "--report-fd", str(report_fd), "--", *argv]


class Execution:
    """A running job process and its output. Thread-safe where the worker needs it."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        env: Mapping[str, str],
        on_exit: Callable[[], None] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._pending: deque[Line] = deque()
        self._pending_chars = 0
        self._dropped = 0
        self._tail: deque[str] = deque()
        self._tail_chars = 0
        self._out_tail: deque[str] = deque()
        self._out_tail_chars = 0
        self._known: set[psutil.Process] = set()
        self.stop_reason: str | None = None
        self.kill_at: float | None = None
        self.supervised = supervised()
        self._report, report_w = os.pipe() if self.supervised else (-1, -1)
        self._pgid: int | None = None
        self._killed_at: float | None = None
        try:
            command = spawn_plan(argv, cwd, env, report_w)
            self.proc = subprocess.Popen(
                command,
                cwd=cwd,
                env=dict(env),
                # Supervised: the worker holds the pipe's only write end; when the worker
                # dies the supervisor reads EOF and kills the job's whole tree.
                stdin=subprocess.PIPE if self.supervised else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # own session and process group: pgid == pid
                close_fds=True,
                pass_fds=(report_w,) if self.supervised else (),
            )
        except OSError as exc:
            self._close_report()
            raise SpawnError(f"could not start {argv[0]!r} in {cwd or os.getcwd()}: {exc}") from exc
        except SpawnError:
            self._close_report()
            raise
        finally:
            if report_w >= 0:
                os.close(report_w)
        self.pid = self.proc.pid
        self.started = time.monotonic()
        self._on_exit = on_exit
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, "stderr"), daemon=True),
        ]
        for t in self._readers:
            t.start()
        self._waiter = threading.Thread(target=self._wait, daemon=True)
        self._waiter.start()

    # ------------------------------------------------------------------ output

    def _read(self, pipe: IO[bytes] | None, stream: str) -> None:
        if pipe is None:
            return
        with contextlib.suppress(ValueError, OSError):  # the pipe was closed under us
            for raw in iter(lambda: pipe.readline(READ_LIMIT), b""):
                self._add(stream, raw.decode("utf-8", errors="replace"))

    def _add(self, stream: str, text: str) -> None:
        with self._lock:
            self._pending.append((stream, time.time(), text))
            self._pending_chars += len(text)
            while self._pending_chars > MAX_PENDING_CHARS and len(self._pending) > 1:
                dropped = self._pending.popleft()
                self._pending_chars -= len(dropped[2])
                self._dropped += len(dropped[2])
            if stream == "stderr":
                self._tail.append(text)
                self._tail_chars += len(text)
                while self._tail_chars > TAIL_CHARS and len(self._tail) > 1:
                    self._tail_chars -= len(self._tail.popleft())
            elif stream == "stdout":  # some scripts print their traceback to stdout
                self._out_tail.append(text)
                self._out_tail_chars += len(text)
                while self._out_tail_chars > TAIL_CHARS and len(self._out_tail) > 1:
                    self._out_tail_chars -= len(self._out_tail.popleft())

    def take_output(self) -> list[Line]:
        """Lines read since the last call (with a note if some had to be dropped)."""
        with self._lock:
            lines = list(self._pending)
            self._pending.clear()
            self._pending_chars = 0
            if self._dropped:
                note = (
                    f"[tracker: {self._dropped} characters of output were dropped: "
                    "the job wrote faster than the store accepted]\n"
                )
                lines.insert(0, ("meta", time.time(), note))
                self._dropped = 0
        return lines

    def unread(self, lines: Sequence[Line]) -> None:
        """Put lines taken by ``take_output`` back in front (they could not be stored)."""
        with self._lock:
            self._pending.extendleft(reversed(lines))
            self._pending_chars += sum(len(text) for _, _, text in lines)

    def pending_chars(self) -> int:
        with self._lock:
            return self._pending_chars

    def stderr_tail(self) -> str:
        with self._lock:
            return "".join(self._tail)

    def stdout_tail(self) -> str:
        with self._lock:
            return "".join(self._out_tail)

    # -------------------------------------------------------------- lifecycle

    def _wait(self) -> None:
        self.proc.wait()
        if self._on_exit is not None:
            self._on_exit()

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def running(self) -> bool:
        return self.proc.poll() is None

    def _remember_children(self) -> None:
        # When the leader is already gone the group kill covers the rest.
        with contextlib.suppress(psutil.Error):
            self._known.update(psutil.Process(self.pid).children(recursive=True))

    @property
    def pgid(self) -> int:
        """The job's process group: its leader's pid (read once from the supervisor's report,
        waiting at most ``REPORT_TIMEOUT_S`` for it); the supervisor's when none came."""
        if self._pgid is None:
            self._pgid = self.pid
            if self._report >= 0:
                ready, _, _ = select.select([self._report], [], [], REPORT_TIMEOUT_S)
                text = os.read(self._report, 32) if ready else b""
                if text.strip().isdigit():
                    self._pgid = int(text)
                self._close_report()
        return self._pgid

    def _close_report(self) -> None:
        if self._report >= 0:
            os.close(self._report)
            self._report = -1

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def stop(self, reason: str, grace: float) -> None:
        """SIGTERM the group now and SIGKILL it after ``grace`` seconds (first reason wins)."""
        now = time.monotonic()
        if self.stop_reason is None:
            self.stop_reason = reason
        self._remember_children()
        if self.kill_at is None:
            self._signal_group(signal.SIGTERM)
            self.kill_at = now + grace
        else:
            self.kill_at = min(self.kill_at, now + grace)

    def kill(self, reason: str) -> None:
        """SIGKILL the group at once."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self._remember_children()
        self.kill_at = time.monotonic()
        self._kill_all()

    def _kill_all(self) -> None:
        # The job's leader dies with its group; its supervisor then kills the rest of the
        # tree (processes that left the group included) and exits.
        self._signal_group(signal.SIGKILL)
        for proc in list(self._known):
            with contextlib.suppress(psutil.Error):
                proc.kill()
        if self.supervised and self.running():
            now = time.monotonic()
            if self._killed_at is None:
                self._killed_at = now
            elif now - self._killed_at >= TREE_KILL_S:  # it should have exited by now
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(self.pid, signal.SIGKILL)

    def tick(self) -> None:
        """Escalate to SIGKILL when the grace period ran out."""
        if self.kill_at is not None and time.monotonic() >= self.kill_at and self.running():
            self._kill_all()

    def cleanup(self, timeout: float = 5.0) -> None:
        """After the leader exited: kill what is left of the group, then drain the output."""
        self._kill_all()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        self._close_report()
        deadline = time.monotonic() + timeout
        for t in self._readers:
            t.join(max(0.0, deadline - time.monotonic()))
        # A pipe still held open by an escaped process keeps its reader blocked; closing it
        # then would wait on the reader's lock, so such a pipe is left to the daemon thread.
        for t, pipe in zip(self._readers, (self.proc.stdout, self.proc.stderr), strict=True):
            if pipe is not None and not t.is_alive():
                with contextlib.suppress(OSError):
                    pipe.close()
