"""Fork safety: a forked child never logs into, flushes, finishes or blocks on its parent's run.

Every ``DataLoader(num_workers>0)``, ``torch.multiprocessing`` and ``multiprocessing`` pool
on Linux forks the training process after ``tracker.init()``. The child gets a copy of the
parent's run without its writer thread, a copy of its database connections (a SQLite one may
be mid-statement, its mutex held by a thread that does not exist in the child) and the
parent's ``atexit`` hook. The rule, applied by ``os.register_at_fork`` in the child right
after the fork:

* the child has no active run: ``tracker.log()``, ``tracker.flush()``, ``tracker.finish()``,
  and ``log``/``flush``/``finish``/``event``/``save_checkpoint`` on an inherited ``Run``
  object raise :class:`~tracker.errors.InheritedRunError` (a ``NoActiveRun``) naming the
  run, both process ids and this rule. Nothing is queued that nobody would store.
* the child's exit (normal exit, an exception, SIGTERM) never finishes the parent's run, so
  the parent's run stays ``running`` until the parent itself ends.
* the child never touches the parent's connections, not even to close them: closing a SQLite
  connection copied while the parent's writer was inside a statement blocks forever on its
  mutex, and closing a PostgreSQL one would end the parent's session. Their objects are kept
  alive (never deallocated) until the child exits.
* ``tracker.init()`` in the child starts a run of its own, with its own connections and
  writer thread (the parent's run is not touched) -- except on a SQLite file the parent has
  open: SQLite keeps the lock state of a file in per-process memory that the child inherits
  stale, so a new connection there waits on locks nobody holds (measured: some of 12 such
  children hung for the whole busy timeout). That ``init()`` raises ``InheritedRunError``
  naming the file; use PostgreSQL, the HTTP sink, or the "spawn" start method.

Why not give the child its own writer into the parent's run: a forked ``multiprocessing``
child ends with ``os._exit`` (no ``atexit``, no flush), and DataLoader workers are terminated
at the end of every epoch, so points accepted there would be lost silently; and the child's
step counter is a stale copy of the parent's. Return values to the parent and log them there.

A *spawned* child (``multiprocessing`` "spawn"/"forkserver") starts with no run at all; its
``tracker.log()`` raises ``NoActiveRun`` saying it is a child process (see
:func:`no_run_message`).
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any

from tracker.errors import InheritedRunError

_runs: weakref.WeakSet[Any] = weakref.WeakSet()  # every Run created in this process
_inherited: dict[str, Any] = {"run_id": None, "parent_pid": None}
_kept_alive: list[Any] = []  # the parent's sinks, never closed in the child
_parent_sqlite_files: set[str] = set()  # SQLite files the parent had open (real paths)
_registered = [False]


def track(run: Any) -> None:
    """Remember ``run`` so that a fork after this call detaches it in the child."""
    _runs.add(run)
    _inherited["run_id"] = None  # a run of this process's own: the parent's is history
    if not _registered[0]:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _registered[0] = True


def inherited_error(run_id: int, parent_pid: int, what: str) -> InheritedRunError:
    return InheritedRunError(
        f"{what} in process {os.getpid()}: run {run_id} belongs to process {parent_pid}, "
        f"which forked this one (a DataLoader worker, a multiprocessing child). A forked "
        f"child never logs into, flushes or finishes its parent's run: return the values to "
        f"the parent and log them there, or call tracker.init() in the child for a run of "
        f"its own"
    )


def raise_if_inherited(what: str) -> None:
    """Raise InheritedRunError when this process was forked from one with an active run."""
    run_id = _inherited["run_id"]
    if run_id is not None:
        raise inherited_error(run_id, _inherited["parent_pid"], what)


def check_sqlite_file(database: str) -> None:
    """Raise InheritedRunError when ``database`` (a SQLite path) was open in the parent of
    this forked process (see the module docstring)."""
    if _parent_sqlite_files and os.path.realpath(database) in _parent_sqlite_files:
        raise InheritedRunError(
            f"SQLite store {database}: this process (pid {os.getpid()}) was forked from one "
            f"that has it open, and a forked child cannot open a SQLite file its parent has "
            f"open (SQLite's lock state is per process and the child's copy is stale). Log "
            f"from the parent, or start the child with the 'spawn' method, or use a "
            f"PostgreSQL or HTTP store",
            field="uri",
        )


def no_run_message() -> str:
    """The NoActiveRun message, saying so when this is a multiprocessing child process."""
    message = "no active run: call tracker.init(project=...) first"
    mp = sys.modules.get("multiprocessing")
    parent = mp.parent_process() if mp is not None else None
    if parent is not None:
        message += (
            f" (this is a child process, pid {os.getpid()}, started by pid {parent.pid}: runs "
            f"belong to one process, so log from the parent or call tracker.init() here)"
        )
    return message


class _InheritedWriter:
    """Stands in for the writer in the child: every use raises the rule."""

    def __init__(self, run_id: int, parent_pid: int) -> None:
        self.run_id = run_id
        self.parent_pid = parent_pid
        self.error = inherited_error(run_id, parent_pid, "writing")  # log() checks this

    def raise_error(self, what: str = "tracker.log()") -> None:
        raise inherited_error(self.run_id, self.parent_pid, what)

    def put(self, entry: Any) -> None:
        self.raise_error()

    def flush(self, timeout: float | None = None) -> None:
        self.raise_error("flush()")

    def close(self, timeout: float | None = None) -> None:
        self.raise_error("finish()")


class _InheritedSink:
    """Stands in for the parent's sink in the child: every call raises the rule."""

    def __init__(self, run_id: int, parent_pid: int) -> None:
        self._run_id = run_id
        self._parent_pid = parent_pid

    def __getattr__(self, name: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise inherited_error(self._run_id, self._parent_pid, f"{name}()")

        return refuse


def _after_fork_in_child() -> None:
    from tracker.client import lifecycle

    parent_pid = os.getppid()
    active = lifecycle.active()
    if active is not None and not active.finished:
        _inherited["run_id"], _inherited["parent_pid"] = active.id, parent_pid
    lifecycle.forget_active()  # atexit and SIGTERM in the child find no run to finish
    for run in list(_runs):
        database = _sqlite_file(run.sink)
        if database is not None:
            _parent_sqlite_files.add(os.path.realpath(database))
        _kept_alive.append(run.sink)
        _kept_alive.append(run._writer)
        run.sink = _InheritedSink(run.id, parent_pid)
        run._writer = _InheritedWriter(run.id, parent_pid)
        run._put = run._writer.put
        run._sampler = None  # its thread does not exist here
        run._memory = None
        run.inherited_from = parent_pid
    _runs.clear()
    if _kept_alive:
        _never_deallocate(_kept_alive)


def _sqlite_file(sink: Any) -> str | None:
    engine = getattr(getattr(sink, "store", None), "engine", None)
    url = getattr(engine, "url", None)
    if url is None or url.get_backend_name() != "sqlite" or not url.database:
        return None
    return str(url.database)


def _never_deallocate(objects: list[Any]) -> None:
    """Keep ``objects`` alive through interpreter shutdown: at exit, module globals are
    cleared and their connections would be closed (see the module docstring)."""
    import ctypes

    for obj in objects:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    objects.clear()
