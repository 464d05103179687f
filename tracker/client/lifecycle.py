"""Process-exit handling for the active run: normal exit, uncaught exception, SIGTERM.

* normal exit -> ``finished``; an uncaught exception -> ``failed`` with the exception;
  KeyboardInterrupt or SIGTERM -> ``killed``. The buffer is flushed first in every case.
* a SIGKILLed process cannot do anything: its heartbeat stops, and the crash watch of
  ``tracker ui`` or the runner's housekeeping (defaults in ``tracker.rules.liveness``)
  (or ``Store.mark_stale_runs_crashed``) marks the run ``crashed``.
* the exit waits while points are being stored, but no longer than the run's
  ``exit_timeout`` (10 s) while nothing is: when the store is down at exit, the points not
  stored and the final status (with exit code 1 after an uncaught exception) go to the spill
  file, stderr names it, and ``tracker db replay FILE`` applies both later.
* a forked child has no active run (``tracker.client.fork``): its exit finishes nothing.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any

_state: dict[str, Any] = {"run": None, "exc": None, "installed": False}


def status_for_exception(exc: BaseException) -> tuple[str, str]:
    """(run status, one-line message) for an exception that ended the script."""
    if isinstance(exc, KeyboardInterrupt):
        return "killed", "interrupted (KeyboardInterrupt)"
    if isinstance(exc, SystemExit):
        code = exc.code
        if code in (None, 0):
            return "finished", ""
        return "failed", f"SystemExit({code!r})"
    return "failed", f"{type(exc).__name__}: {exc}"


def set_active(run: Any) -> None:
    _state["run"] = run
    _state["exc"] = None
    if not _state["installed"]:
        _install()
        _state["installed"] = True


def active() -> Any:
    return _state["run"]


def forget_active() -> None:
    """Drop the active run without finishing it (in a forked child: it is the parent's)."""
    _state["run"] = None
    _state["exc"] = None


def _install() -> None:
    atexit.register(_at_exit)
    previous_hook = sys.excepthook

    def excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        _state["exc"] = exc
        previous_hook(kind, exc, tb)

    sys.excepthook = excepthook
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _sigterm_handler(previous))


def _sigterm_handler(previous: Any) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        _finish_active("killed", "terminated by SIGTERM")
        if callable(previous):
            previous(signum, frame)
            return
        # Re-deliver with the default action so the exit status still says "SIGTERM".
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    return handler


def _at_exit() -> None:
    exc = _state["exc"]
    if exc is None:
        _finish_active("finished", None)
    else:
        status, message = status_for_exception(exc)
        # An uncaught exception makes the interpreter exit with status 1.
        _finish_active(status, message, 1 if status == "failed" else None)


def _finish_active(status: str, error: str | None, exit_code: int | None = None) -> None:
    from tracker.errors import StoreUnavailable

    run = _state["run"]
    if run is None or run.finished:
        return
    try:
        run.finish(
            status, error=error, exit_code=exit_code, timeout=run.exit_timeout, report=_report
        )
    except StoreUnavailable as exc:  # the message names the spill file and the command
        sys.stderr.write(f"tracker: {exc}\n")
    except Exception:
        # At exit there is no caller left to raise to: say it loudly on stderr instead.
        sys.stderr.write(f"tracker: could not finish run {run.id} as {status}:\n")
        traceback.print_exc()


def _report(line: str) -> None:
    sys.stderr.write(f"tracker: finishing {line}\n")
    sys.stderr.flush()
