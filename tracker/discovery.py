"""Which store a script or a command uses when it names none: found like git finds its
repository.

Order (the first that applies wins):

1. an explicit URL: the ``uri=`` argument (``tracker.init(uri=...)``, ``--uri``), else
   ``TRACKER_URI``;
2. ``.tracker/tracker.db`` in the current directory or the nearest folder above it that
   has one (a ``.tracker/`` folder without the database, e.g. one that only holds
   checkpoints a script saved there, does not count);
3. the store of the one live dashboard of this user (``tracker ui``/``tracker up``, see
   :mod:`tracker.servers`), when exactly one store is being served and its URL may be
   used (a SQLite file, or a URL without a password); not for the servers themselves
   (``live_servers=False``): a new ``tracker ui`` in an empty folder starts a new store;
4. a NEW store ``./.tracker/tracker.db`` (created on first write, never by a read).

:func:`locate` says which rule chose the store (:class:`StoreChoice`), so the line
``tracker.init`` prints and the CLI can say so. It reads only local files (a few ``stat``
calls up the folder tree and the server registry): no network.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Literal

from tracker import servers
from tracker.rules import store_uri

DEFAULT_DIR = ".tracker"
DEFAULT_FILE = "tracker.db"

How = Literal["argument", "TRACKER_URI", "found", "server", "new"]


@dataclasses.dataclass(frozen=True)
class StoreChoice:
    """The store to use and why: ``how`` is ``argument`` (``uri=``/``--uri``),
    ``TRACKER_URI``, ``found`` (a ``.tracker/tracker.db`` here or above), ``server`` (the
    live dashboard's store: ``server`` says which) or ``new`` (``./.tracker/tracker.db``
    does not exist yet)."""

    uri: str
    how: How
    server: servers.Server | None = None


def locate(
    uri: str | None = None, *, live_servers: bool = True, cwd: str | os.PathLike[str] | None = None
) -> StoreChoice:
    """The store for ``uri`` (None: discover it, see the module docstring), from ``cwd``
    (default: the current directory).

    Raises:
        InvalidInput: ``uri`` or ``TRACKER_URI`` is unsupported or malformed (see
            :mod:`tracker.rules.store_uri`). Discovery itself never raises.
    """
    if uri:
        return StoreChoice(store_uri.normalize(uri), "argument")
    env = os.environ.get(store_uri.FIELD)
    if env:
        return StoreChoice(store_uri.normalize(env), "TRACKER_URI")
    here = Path(cwd) if cwd is not None else Path.cwd()
    found = find_upward(here)
    if found is not None:
        return StoreChoice(_sqlite(found), "found")
    if live_servers:
        server = adoptable_server()
        if server is not None and server.store is not None:
            return StoreChoice(server.store, "server", server)
    return StoreChoice(_sqlite(here / DEFAULT_DIR / DEFAULT_FILE), "new")


def find_upward(start: Path) -> Path | None:
    """The nearest ``.tracker/tracker.db`` in ``start`` or a folder above it; None if there
    is none (or a folder cannot be read)."""
    for folder in (start, *start.parents):
        candidate = folder / DEFAULT_DIR / DEFAULT_FILE
        try:
            if candidate.is_file():
                return candidate
        except OSError:
            return None
    return None


def adoptable_server() -> servers.Server | None:
    """The live dashboard whose store a script with no store of its own uses: only when the
    live servers of this user serve exactly one store, and its URL is known (see the module
    docstring). None otherwise."""
    live = servers.live_servers()
    if len({s.store_key for s in live}) != 1:
        return None
    server = live[0]
    store = server.store
    if store is None:
        return None
    if store.startswith("sqlite") and store_uri.sqlite_path(store) is None:
        return None  # an in-memory store: nothing another process could open
    return server


def _sqlite(path: Path) -> str:
    return "sqlite:///" + str(path.absolute())
