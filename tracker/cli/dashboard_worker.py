"""The gunicorn worker class of ``tracker ui`` / ``tracker up``: gunicorn's threaded worker,
with a Ctrl-C that ends it in well under a second instead of a SIGKILL 10 s later, and a
keep-alive connection whose next request was already read never left waiting.

The second: when a view answers without reading the request's body (a refused POST),
gunicorn drains the body after the answer is sent. A client that got the answer may have
sent its next request by then, and the drain's read takes it too, into the parser's
buffer; the socket then has nothing more to read, so the poller never wakes for it, and
the request waited until the idle connection was closed (75 s, then "Remote end closed
connection without response"; an MLflow call failed so in CI, about one refused POST in
300 on a loaded machine). Such a connection is served at once here.

Why: Ctrl-C in a terminal sends SIGINT to the whole process group, so each worker got it
from the terminal, and a SIGQUIT from the master at nearly the same moment. gunicorn's
threaded worker handles both in ``handle_quit``, which is not re-entrant: the second signal
ran it again inside the first one's ``ThreadPoolExecutor.shutdown`` and blocked on the lock
that call holds. The worker hung until the master's ``graceful_timeout``, which then killed
it and logged ``[ERROR] Worker (pid:N) was sent SIGKILL! Perhaps out of memory?`` (seen in
about one Ctrl-C in three). Here a worker leaves SIGINT to the master (who passes it on as
SIGQUIT), quits once, whatever signals follow, and also on a quit that comes while it boots.

Imported only inside the server process (it imports gunicorn: the server extra).
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

__all__ = ["DashboardWorker"]

QUIT_GRACE_S = 1  # requests in flight when a worker is told to quit get this long


class DashboardWorker(ThreadWorker):  # type: ignore[misc]
    """``gthread`` worker that ignores SIGINT and quits at most once."""

    _quitting = False

    def init_process(self) -> None:
        # Until gunicorn installs a worker's handlers (init_signals), the master's are in
        # place, and they only queue a signal for the master: a quit sent while the worker
        # boots (Ctrl-C right after the banner) was lost, and the worker served on until
        # the master's SIGKILL. Quit on it from the start.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, self.handle_quit)
        signal.signal(signal.SIGTERM, self.handle_quit)
        super().init_process()

    def init_signals(self) -> None:
        super().init_signals()
        # The master turns a Ctrl-C into one SIGQUIT per worker; the terminal's own copy of
        # the SIGINT would start a second quit.
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    def handle_quit(self, sig: int, frame: Any) -> None:
        # No SystemExit from here (gunicorn's own handle_quit raises one): a signal that lands
        # while Python runs a weakref callback or a __del__ (a garbage collection inside
        # SQLAlchemy, say) has its exception printed as "Exception ignored ... Traceback" and
        # swallowed. The run loop ends the worker instead: it sees ``alive`` off as soon as
        # the wake-up below reaches it (or at once, for a quit while booting), serves what
        # is in flight for at most QUIT_GRACE_S and returns, and the worker exits.
        if self._quitting:  # already quitting: once is enough
            return
        self._quitting = True
        self.alive = False
        self.cfg.set("graceful_timeout", QUIT_GRACE_S)  # this process's copy only
        with contextlib.suppress(AttributeError, OSError):  # booting: no queue made yet
            self.method_queue.defer(_nothing)

    def finish_request(self, conn: Any, fs: Any) -> None:
        super().finish_request(conn, fs)
        if conn in self.keepalived_conns and _read_ahead(conn):
            # what on_client_socket_readable does for a socket the poller saw readable
            with contextlib.suppress(KeyError, OSError, ValueError):
                self.poller.unregister(conn.sock)
            self.keepalived_conns.remove(conn)
            self.enqueue_req(conn)


def _read_ahead(conn: Any) -> bool:
    """Whether the connection's parser already holds bytes of a next request."""
    unreader = getattr(getattr(conn, "parser", None), "unreader", None)
    buf = getattr(unreader, "buf", None)
    return buf is not None and len(buf.getvalue()) > 0


def _nothing() -> None:
    """What the wake-up of a quitting worker's loop runs."""
