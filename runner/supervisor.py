"""The per-job supervisor: every process of a job dies when its worker dies, by any means.

``PR_SET_PDEATHSIG`` reaches one process only: when a worker was SIGKILLed, its job's
leader died but the leader's children (a shell's background jobs, DataLoader workers, a
``python -c`` child that ignores SIGTERM) were reparented to PID 1 and ran on beside the
job's retry. So the worker starts each job through this small program, run by path with
``python -I -S`` (standard library only: it starts in ~15 ms and imports nothing of the
tracker)::

    worker --(stdin: a pipe; the worker holds the only write end)--> supervisor
        supervisor: leader of a new session and process group, PR_SET_CHILD_SUBREAPER
          └─ job leader (same process group): exec of the job's argv, stdin /dev/null
               └─ its children, grandchildren ... (orphans are reparented to the supervisor)

Contract:

* **Worker death.** When the worker dies (SIGKILL included) the kernel closes its end of
  the pipe; the supervisor reads EOF and SIGKILLs every descendant -- the job's process
  group, processes that left the group (``setsid``), and orphans, which come to the
  supervisor because it is the tree's subreaper -- until it has no child left, then exits.
  A worker that is only frozen (SIGSTOP) keeps its pipe open: its job runs on, and the
  store's attempt fence refuses that job's writes once another worker took it over.
* **Signals from the worker.** The worker signals the whole process group (SIGTERM to stop,
  SIGKILL at the end of the grace period): the supervisor ignores SIGTERM, SIGINT and SIGHUP
  (the job gets them itself) and dies with the group on SIGKILL. SIGUSR1 asks the
  supervisor to SIGKILL the whole tree, escaped processes included, and exit.
* **End of the job.** When the leader exits, whatever is left of its tree is killed (as the
  worker always did), and the supervisor exits with the leader's status: the same exit
  code, or death by the same signal, so the worker's failure classification is unchanged.
* **Errors.** A program that cannot be executed exits 127 with the reason on stderr (the
  worker checks the program exists before it starts a supervisor).

Linux only (``prctl``); elsewhere the worker runs the job directly.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import select
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36
KILL_TREE = signal.SIGUSR1
_IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def descendants(root: int) -> list[int]:
    """Pids of every live descendant of ``root`` (read from /proc; zombies included)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # exited while we read
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


class Supervisor:
    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.leader = 0
        self.status: int | None = None  # the leader's wait status once it exited
        self.kill_requested = False

    def start(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears it
        for sig in _IGNORED:
            signal.signal(sig, lambda *_: None)  # the job gets the group's signal itself
        signal.signal(KILL_TREE, self._on_kill)
        pid = os.fork()
        if pid == 0:
            self._exec_job()
        self.leader = pid

    def _on_kill(self, *_: object) -> None:
        self.kill_requested = True

    def _exec_job(self) -> None:
        """In the forked child: reset what the supervisor changed, then exec the job."""
        try:
            signal.set_wakeup_fd(-1)
            for sig in (*_IGNORED, KILL_TREE, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.execvp(self.argv[0], self.argv)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.write(2, f"could not start {self.argv[0]!r}: {exc}\n".encode())
        os._exit(127)

    def reap(self, block: bool = False) -> bool:
        """Collect exited children; False once none is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.leader:
                self.status = status
            if block:
                return True

    def watch(self) -> bool:
        """Wait until the leader exits (True) or the worker is gone or asks for a kill (False)."""
        while True:
            self.reap()
            if self.kill_requested:
                return False
            if self.status is not None:
                return True
            try:
                ready, _, _ = select.select([0, self.wake_r], [], [])
            except InterruptedError:
                continue
            if 0 in ready and not os.read(0, 4096):
                return False  # EOF: the worker died
            if self.wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self.wake_r, 4096):
                        pass

    def kill_tree(self) -> None:
        """SIGKILL every descendant, again and again, until no child is left to reap."""
        me = os.getpid()
        while True:
            for pid in descendants(me):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if not self.reap(block=True):
                return

    def exit_like_leader(self) -> None:
        status = self.status if self.status is not None else 137 << 8
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            with contextlib.suppress(OSError, ValueError):
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core of our own
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            os._exit(128 + sig)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main(args: list[str]) -> None:
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.stderr.write("usage: supervisor.py -- ARGV...\n")
        os._exit(2)
    sup = Supervisor(args)
    sup.start()
    sup.watch()
    sup.kill_tree()
    sup.exit_like_leader()


if __name__ == "__main__":
    main(sys.argv[1:])
