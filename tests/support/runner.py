"""Helpers for the runner tests (tests/runner): real `tracker worker`, `tracker scheduler`.

``procs`` starts commands in their own process groups, keeps their output in files, and
kills whatever is left at the end of the test (job processes die with their worker through
its per-job supervisor). ``wait_for`` is the one way to wait: a bounded poll that fails with a
message saying what did not happen.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.polling import wait_for

SCRIPTS = Path(__file__).resolve().parents[1] / "runner" / "scripts"
_SCRIPT = Path(sys.executable).with_name("tracker")
TRACKER = (
    [str(_SCRIPT)]
    if _SCRIPT.exists()
    else [
        sys.executable,
        "-c",
        "import sys; sys.argv[0] = 'tracker'; from tracker.cli import main; main()",
    ]
)
# Fast settings for tests: short reaper passes and polls, no retry backoff.
REAP = ["--reap-interval", "0.5", "--retry-delay", "0"]
FAST = ["--poll-interval", "0.05", *REAP]


def alive(pid: int) -> bool:
    """True while ``pid`` is a live (not zombie) process."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group_gone(pgid: int) -> bool:
    """True when no process (not even a zombie waiting to be reaped) is left in the group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def read_json(path: Path) -> Any:
    """The JSON object in ``path``; None while the file is missing or half written."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


class Proc:
    def __init__(self, argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> None:
        self.log = log
        self._fh = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            argv, stdout=self._fh, stderr=subprocess.STDOUT, env=env, cwd=cwd,
            start_new_session=True,
        )  # fmt: skip
        self.pid = self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait(self, timeout: float, what: str = "the process to exit") -> int:
        wait_for(lambda: self.popen.poll() is not None, timeout, what)
        return self.popen.returncode

    def stop(self) -> None:
        # its whole session (a wrapper such as faketime forks the real command): nothing of
        # it may outlive the test and load the machine for the tests after it
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)
                os.kill(self.pid, signal.SIGKILL)
            self.popen.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # start_new_session: the group is its pid
        self._fh.close()


class Procs:
    """Starts ``tracker`` commands against one store; everything is killed at teardown."""

    def __init__(self, uri: str, tmp: Path) -> None:
        self.uri = uri
        self.tmp = tmp
        self.started: list[Proc] = []

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
        env["TRACKER_URI"] = self.uri
        if "TRACKER_ARTIFACT_ROOT" in os.environ:  # the artifact_root fixture's: a site's
            env["TRACKER_ARTIFACT_ROOT"] = os.environ["TRACKER_ARTIFACT_ROOT"]  # workers' own
        # a worker's default code-snapshot directory (~/.cache/tracker/...): this test's own,
        # beside its directory (inside it, the next submission would snapshot the copies)
        env["XDG_CACHE_HOME"] = str(self.tmp.parent / f"{self.tmp.name}-cache")
        return env

    def tracker(self, *args: str, name: str = "cmd") -> Proc:
        log = self.tmp / f"{name}-{len(self.started)}.log"
        proc = Proc([*TRACKER, *args], log, self.env(), self.tmp)
        self.started.append(proc)
        return proc

    def worker(self, *args: str, name: str = "worker") -> Proc:
        return self.tracker("worker", *FAST, *args, name=name)

    def scheduler(self, *args: str) -> Proc:
        return self.tracker("scheduler", *REAP, *args, name="scheduler")

    def run(
        self, *args: str, timeout: float = 60, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a short ``tracker`` command to completion (in ``cwd``, default the test's
        directory)."""
        return subprocess.run(
            [*TRACKER, *args], capture_output=True, text=True, env=self.env(),
            cwd=cwd or self.tmp, timeout=timeout, check=False,
        )  # fmt: skip

    def close(self) -> None:
        for proc in self.started:
            proc.stop()


class SnapshotProcs(Procs):
    """Procs that keep the artifact root (where snapshots live) in every command's env."""

    def __init__(self, uri: str, tmp: Path, root: Path) -> None:
        super().__init__(uri, tmp)
        self.root = root

    def env(self) -> dict[str, str]:
        env = super().env()
        env["TRACKER_ARTIFACT_ROOT"] = str(self.root)
        return env


def script(name: str, *args: str) -> list[str]:
    return [sys.executable, str(SCRIPTS / name), *args]


def _writable(store: Any, job_id: int) -> bool:
    """Can another process lock the job's row right now (no stopped writer holds it)?"""
    import sqlalchemy as sa

    from tracker.store import models as m

    if store.dialect == "sqlite":
        import sqlite3

        conn = sqlite3.connect(store.engine.url.database, timeout=0.3, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            conn.close()
    with store.engine.connect() as conn:
        try:
            conn.execute(
                sa.select(m.JobRow.id).where(m.JobRow.id == job_id).with_for_update(nowait=True)
            )
            return True
        except sa.exc.DBAPIError:
            return False
        finally:
            conn.rollback()


def stop_between_transactions(proc: Proc, store: Any, job_id: int) -> None:
    """SIGSTOP a worker at a moment it holds no lock on the store.

    A process frozen inside a write transaction blocks SQLite writers (and holds the job's
    row lock on PostgreSQL) until it runs again; that is the database's behaviour, not what
    the SIGSTOP test is about, so such a moment is skipped.
    """
    for _ in range(50):
        proc.signal(signal.SIGSTOP)
        if _writable(store, job_id):
            return
        proc.signal(signal.SIGCONT)
    pytest.fail("could not stop the worker outside a write transaction in 50 tries")
