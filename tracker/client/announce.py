"""The one line ``tracker.init`` prints on stderr: which run, which store, where to see it.

::

    tracker: run 12 'bright-fox' logging to .tracker/tracker.db; view it at http://127.0.0.1:5000/runs/12
    tracker: run 1 'x' logging to a NEW store .tracker/tracker.db (no .tracker/ here or above ...)

The store is shown as its SQLite path (relative to the current directory where that stays
readable) or its URL with the password hidden; why this store was used when the script named
none (:mod:`tracker.discovery`: found above this folder, the running dashboard's store, or a
new one); and the run's page when a live ``tracker ui``/``tracker up`` serves that store
(:mod:`tracker.servers`: a local file read, no network call; never a sign-in token).

Printed by rank 0 only, also inside a job a worker started (the line goes to the job's log).
``tracker.init(..., quiet=True)`` or ``TRACKER_QUIET=1`` silences it. It never raises: the
place is looked up before the sink opens the store (so a store this run creates is called
NEW), and a failure to describe it prints a shorter line instead.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from tracker import discovery, servers
from tracker.errors import TrackerError
from tracker.rules import store_uri

ENV_QUIET = "TRACKER_QUIET"
_FALSE = ("", "0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class Place:
    """Where a run logs, seen before its sink opened the store."""

    choice: discovery.StoreChoice
    existed: bool  # the SQLite file was there before init (False: this run creates it)


def place_before_open(uri: str | None, injected_sink: bool) -> Place | None:
    """The store ``sink_for_uri(uri)`` is about to open, and whether it exists yet; None for
    an injected sink (it says nothing of a store) or a URL the sink will reject itself.
    Never raises."""
    if injected_sink:
        return None
    try:
        choice = discovery.locate(uri)
        path = store_uri.sqlite_path(choice.uri)
        return Place(choice, existed=path is None or os.path.exists(path))
    except (TrackerError, OSError):  # the sink raises these itself, with its own message
        return None


def quiet_wanted(quiet: bool | None) -> bool:
    """``quiet`` if given, else ``TRACKER_QUIET`` (any value but empty/0/false/no/off)."""
    if quiet is not None:
        return bool(quiet)
    return os.environ.get(ENV_QUIET, "").strip().lower() not in _FALSE


def announce(run_id: int, name: str | None, place: Place | None, quiet: bool | None) -> None:
    """Print the line on stderr unless quiet (see the module docstring). Never raises."""
    if quiet_wanted(quiet) or place is None:
        return
    head = f"tracker: run {run_id} {name!r}" if name else f"tracker: run {run_id}"
    try:
        text = describe(head, run_id, place, os.getcwd())
    except Exception as exc:  # the line is a courtesy: a surprise here must not stop init
        text = f"{head} ({type(exc).__name__} while describing its store: {exc})"
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):
        return  # stderr closed or gone: nobody to tell


def describe(head: str, run_id: int, place: Place, cwd: str) -> str:
    """The line for run ``run_id`` logging to ``place``, as seen from ``cwd``."""
    choice = place.choice
    uri = choice.uri
    if uri.startswith(("http://", "https://")):
        base = store_uri.redact(uri)
        return (
            f"{head} logging to the dashboard {base}; view it at {store_uri.run_page(base, run_id)}"
        )
    path = store_uri.sqlite_path(uri)
    shown = store_uri.shown_path(path, cwd) if path else store_uri.redact(uri)
    server = choice.server if choice.how == "server" else servers.dashboard_for(uri)
    if choice.how == "server" and server is not None:
        where = (
            f"{shown}, the store of the dashboard running at {server.url} "
            "(no .tracker/ here or above)"
        )
    elif not place.existed:
        why = " (no .tracker/ here or above)" if choice.how == "new" else ""
        where = f"a NEW store {shown}{why}"
    elif choice.how == "found" and path and os.path.dirname(os.path.dirname(path)) != cwd:
        where = f"{shown} (found above this folder)"
    elif choice.how == "TRACKER_URI":
        where = f"{shown} (TRACKER_URI)"
    else:
        where = shown
    if server is not None:
        return f"{head} logging to {where}; view it at {store_uri.run_page(server.url, run_id)}"
    return f"{head} logging to {where}; no dashboard is serving it (start one: tracker ui)"
