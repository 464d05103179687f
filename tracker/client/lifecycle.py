"""Process-exit handling for the active run: normal exit, uncaught exception, SIGTERM.

* normal exit and ``sys.exit(0)`` / ``sys.exit()`` -> ``finished``; an uncaught exception ->
  ``failed`` with the exception and exit code 1; ``sys.exit(N)`` (also ``exit(N)``/``quit(N)``)
  with N != 0 -> ``failed`` with exit code N (a string message: code 1, as Python exits);
  KeyboardInterrupt or SIGTERM -> ``killed``. The buffer is flushed first in every case.
* How ``sys.exit(N)`` is seen: Python runs ``atexit`` after it has dropped the SystemExit, so
  ``sys.exit`` (and the ``exit``/``quit`` builtins) are wrapped to remember the exception they
  raise; at exit it counts only if it reached the outermost frame (its traceback starts in a
  frame without a caller), so a SystemExit that the script caught and survived (argparse's in
  a ``try``, a library's) does not fail the run. Not seen: ``raise SystemExit(N)`` written out
  (no call to wrap; the run ends ``finished``), ``os._exit`` (no exit handlers run: the
  heartbeat stops and the run is marked ``crashed``), a SystemExit caught at module level.
* a SIGKILLed process cannot do anything: its heartbeat stops, and the crash watch of
  ``tracker ui`` or the runner's housekeeping (defaults in ``tracker.rules.liveness``)
  (or ``tracker.store.runs.mark_stale_runs_crashed``) marks the run ``crashed``.
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
from types import FrameType, TracebackType
from typing import Any

_state: dict[str, Any] = {
    "run": None,
    "exc": None,
    "installed": False,
    "exit": None,  # the last SystemExit raised by sys.exit/exit/quit in the main thread
    "root": None,  # the main thread's outermost frame, seen at init()
}


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


def exit_code_for_exception(exc: BaseException) -> int | None:
    """The process exit status Python gives for an exception that ended the script."""
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None:
            return 0
        return code if isinstance(code, int) and not isinstance(code, bool) else 1
    if isinstance(exc, KeyboardInterrupt):
        return None  # Python re-raises SIGINT: the status is the signal's
    return 1


def set_active(run: Any) -> None:
    _state["run"] = run
    _state["exc"] = None
    if threading.current_thread() is threading.main_thread():
        frame = sys._getframe()
        while frame.f_back is not None:
            frame = frame.f_back
        _state["root"] = frame
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
    _wrap_exit()
    previous_hook = sys.excepthook

    def excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        _state["exc"] = exc
        previous_hook(kind, exc, tb)

    sys.excepthook = excepthook
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _sigterm_handler(previous))


def _wrap_exit() -> None:
    """Make ``sys.exit``/``exit``/``quit`` remember the SystemExit they raise (see above)."""
    import builtins

    def remembering(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            except SystemExit as exc:
                if threading.current_thread() is threading.main_thread():
                    _state["exit"] = exc
                raise

        call.__wrapped__ = original  # type: ignore[attr-defined]
        call.__doc__ = original.__doc__
        return call

    sys.exit = remembering(sys.exit)
    for name in ("exit", "quit"):
        original = getattr(builtins, name, None)
        if original is not None:
            setattr(builtins, name, remembering(original))


def _uncaught_exit() -> SystemExit | None:
    """The remembered SystemExit if the script's outermost frame ended by an exception."""
    exc, root = _state["exit"], _state["root"]
    if exc is None or root is None:
        return None
    return exc if _ended_by_exception(root) else None


def _ended_by_exception(frame: FrameType) -> bool:
    """Whether a finished frame stopped somewhere other than a return instruction."""
    import dis

    returns = {dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap}
    code, last = frame.f_code.co_code, frame.f_lasti
    return 0 <= last < len(code) and code[last] not in returns


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
    exc = _state["exc"] or _uncaught_exit()
    if exc is None:
        _finish_active("finished", None)
    else:
        status, message = status_for_exception(exc)
        _finish_active(status, message or None, exit_code_for_exception(exc))


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
