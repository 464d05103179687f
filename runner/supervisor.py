"""The per-job supervisor: every process of a job dies when its worker dies, by any means.

``PR_SET_PDEATHSIG`` reaches one process only: when a worker was SIGKILLed, its job's
leader died but the leader's children (a shell's background jobs, DataLoader workers, a
``python -c`` child that ignores SIGTERM) were reparented to PID 1 and ran on beside the
job's retry. So the worker starts each job through this small program, imported from its
directory by ``python -I -S -c`` (standard library only, nothing of the tracker; its
bytecode cached): it costs ~35 ms of CPU per job on a busy 2-core machine, mostly the
interpreter's start, next to ~1 ms for exec'ing the job directly::

    worker --(stdin: a pipe; the worker holds the only write end)--> supervisor
        supervisor: own session, PR_SET_CHILD_SUBREAPER; reports the job's pid on --report-fd
          └─ job leader: own session and process group (pgid == its pid), exec of the job's
             argv, stdin /dev/null
               └─ its children, grandchildren ... (orphans are reparented to the supervisor)

Contract:

* **Worker death.** When the worker dies (SIGKILL included) the kernel closes its end of
  the pipe; the supervisor reads EOF and SIGKILLs every descendant -- the job's process
  group, processes that left the group (``setsid``), and orphans, which come to the
  supervisor because it is the tree's subreaper -- until it has no child left, then exits.
  A worker that is only frozen (SIGSTOP) keeps its pipe open: its job runs on, and the
  store's attempt fence refuses that job's writes once another worker took it over.
* **The job's process group.** The job's leader leads its own session and process group,
  as without a supervisor; the supervisor writes its pid (decimal, then closes the fd) to
  ``--report-fd`` once the leader has exec'd, so the worker signals the job's group
  (SIGTERM to stop, SIGKILL at the end of the grace period). The supervisor is outside
  that group and ignores SIGTERM, SIGINT and SIGHUP.
* **End of the job.** When the leader exits (or is killed with its group), whatever is
  left of its tree -- processes that left the group with ``setsid`` and orphans included --
  is killed, and the supervisor exits with the leader's status: the same exit code, or
  death by the same signal, so the worker's failure classification is unchanged.
* **Errors.** A program that cannot be executed exits 127 with the reason on stderr (the
  worker checks the program exists before it starts a supervisor); nothing is reported
  on ``--report-fd`` then (EOF).

Linux only (``prctl``); elsewhere the worker runs the job directly.
"""

# Every import is paid at each job's start (~20 ms of CPU for the interpreter alone), so:
# no `from __future__` and no contextlib, `resource` only when needed, and the C module
# `_signal` rather than `signal`, which imports enum, functools and collections.
import ctypes
import os
import select
import sys

try:
    import _signal as signal
except ImportError:  # not CPython
    import signal  # type: ignore[no-redef]

PR_SET_CHILD_SUBREAPER = 36
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
    def __init__(self, argv: list[str], report_fd: int | None) -> None:
        self.argv = argv
        self.report_fd = report_fd
        self.leader = 0
        self.status: int | None = None  # the leader's wait status once it exited

    def start(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears it
        for sig in _IGNORED:
            signal.signal(sig, lambda *_: None)  # the worker signals the job's group itself
        execd_r, execd_w = os.pipe()  # close-on-exec: EOF once the leader has exec'd
        pid = os.fork()
        if pid == 0:
            os.close(execd_r)
            self._exec_job(execd_w)
        os.close(execd_w)
        self.leader = pid
        failed = os.read(execd_r, 1)
        os.close(execd_r)
        if self.report_fd is not None:
            try:
                if not failed:
                    os.write(self.report_fd, str(pid).encode())
                os.close(self.report_fd)
            except OSError:
                pass  # the worker is gone; watch() sees it

    def _exec_job(self, execd_w: int) -> None:
        """In the forked child: own session, defaults restored, stdin /dev/null, exec."""
        try:
            os.setsid()
            signal.set_wakeup_fd(-1)
            for sig in (*_IGNORED, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            if self.report_fd is not None:
                os.close(self.report_fd)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.execvp(self.argv[0], self.argv)
        except OSError as exc:
            try:
                os.write(2, f"could not start {self.argv[0]!r}: {exc}\n".encode())
                os.write(execd_w, b"x")
            except OSError:
                pass
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
        """Wait until the leader exits (True) or the worker is gone (False)."""
        while True:
            self.reap()
            if self.status is not None:
                return True
            try:
                ready, _, _ = select.select([0, self.wake_r], [], [])
            except InterruptedError:
                continue
            if 0 in ready and not os.read(0, 4096):
                return False  # EOF: the worker died
            if self.wake_r in ready:
                try:
                    while os.read(self.wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass

    def kill_tree(self) -> None:
        """SIGKILL every descendant, again and again, until no child is left to reap.

        Without a child there is no descendant either (each one descends from a child, or
        was reparented to us), so a job that left nothing behind costs no /proc walk.
        """
        me = os.getpid()
        while self.reap():
            for pid in descendants(me):
                try:  # noqa: SIM105 - contextlib is not imported (start-up cost)
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if not self.reap(block=True):
                return

    def exit_like_leader(self) -> None:
        status = self.status if self.status is not None else 137 << 8
        if os.WIFSIGNALED(status):
            import resource

            sig = os.WTERMSIG(status)
            try:
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core of our own
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
            os.kill(os.getpid(), sig)
            os._exit(128 + sig)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main(args: list[str]) -> None:
    report_fd = None
    if args[:1] == ["--report-fd"] and len(args) > 1:
        report_fd, args = int(args[1]), args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.stderr.write("usage: supervisor.py [--report-fd FD] -- ARGV...\n")
        os._exit(2)
    sup = Supervisor(args, report_fd)
    sup.start()
    sup.watch()
    sup.kill_tree()
    sup.exit_like_leader()


if __name__ == "__main__":
    main(sys.argv[1:])
