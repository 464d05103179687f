"""Which dashboards are serving which store right now: the files ``tracker ui``/``tracker up``
write while they serve, and the reads of them (``tracker.init``'s line, store discovery).

A server, once it listens, :func:`register` s itself in two places, each file written whole
(a temporary file, then ``os.replace``: a reader never sees half of one), and removes both
when it stops cleanly (Ctrl-C, SIGTERM, an error):

* the per-user registry of live servers, one ``<host>-<pid>.json`` per server process, in
  ``$TRACKER_SERVER_REGISTRY`` if set, else ``$XDG_RUNTIME_DIR/tracker/servers``, else
  ``~/.cache/tracker/servers`` (folders created ``0700``, files ``0600``);
* for a SQLite store, also ``server.json`` next to the database file (``.tracker/server.json``
  for the default store), so a process that shares the store but not this user's registry
  (another ``HOME``, a job of another user) finds the dashboard too.

Each file says ``url`` (the dashboard's base URL, never a sign-in token), ``pid``, ``host``,
``started`` (epoch seconds) and which store: ``store_key`` (a hash that identifies it),
``store_label`` (password hidden) and ``store`` (the URL itself, only when it holds no
password: a password is never written to disk; such a store is never adopted by discovery).

Stale files: a server killed with SIGKILL leaves its files. A file counts only while its
process lives: same host, the pid exists and was started no later than the file says (a
reused pid is a younger process). Files of other hosts are ignored (their pid cannot be
checked). Reading never raises: an unreadable or malformed file is skipped; only local files
are read, never the network, so :func:`dashboard_for` costs a few small file reads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracker.rules import store_uri

ENV_REGISTRY = "TRACKER_SERVER_REGISTRY"
STORE_FILE = "server.json"


@dataclasses.dataclass(frozen=True)
class Server:
    """One registered dashboard process and the store it serves."""

    url: str  # base URL, e.g. http://127.0.0.1:5000/
    pid: int
    host: str
    started: float
    store_key: str
    store_label: str
    store: str | None  # the store URL; None when it holds a password (never written)


def registry_dir() -> Path:
    """The per-user folder of live servers (see the module docstring)."""
    explicit = os.environ.get(ENV_REGISTRY)
    if explicit:
        return Path(explicit)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "tracker" / "servers"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "tracker" / "servers"


def store_identity(uri: str) -> str:
    """What makes two URLs the same store: a SQLite file's real path (symlinks and relative
    paths resolved against the current directory), else the URL itself."""
    path = store_uri.sqlite_path(uri)
    if path is not None:
        return "sqlite:" + os.path.realpath(path)
    return uri


def store_key(uri: str) -> str:
    """A stable hash of :func:`store_identity` (files may hold it: it reveals no password)."""
    return hashlib.sha256(store_identity(uri).encode()).hexdigest()[:32]


def register(uri: str, url: str) -> Callable[[], None]:
    """Record that this process serves store ``uri`` at ``url``; return the function that
    removes the records again (it removes only files that still name this process, and
    does nothing in another process, e.g. a forked gunicorn worker).

    Raises:
        OSError: a file could not be written (the caller warns; serving goes on).
    """
    pid = os.getpid()
    host = socket.gethostname()
    db = store_uri.sqlite_path(uri)
    label = store_uri.redact(uri)
    if db is not None:
        shown: str | None = "sqlite:///" + os.path.realpath(db)
    else:
        shown = uri if label == uri else None  # a password is never written
    record = {
        "url": url,
        "pid": pid,
        "host": host,
        "started": time.time(),
        "store_key": store_key(uri),
        "store_label": label,
        "store": shown,
    }
    paths = [registry_dir() / f"{host}-{pid}.json"]
    if db is not None:
        paths.append(Path(os.path.realpath(db)).parent / STORE_FILE)
    written: list[Path] = []
    try:
        for path in paths:
            _write_atomically(path, record)
            written.append(path)
    except OSError:
        _remove_own(written, pid)
        raise

    def unregister() -> None:
        if os.getpid() == pid:
            _remove_own(written, pid)

    return unregister


def dashboard_for(uri: str) -> Server | None:
    """The live dashboard serving store ``uri``, if one is registered (the file next to a
    SQLite store first, then this user's registry). Never raises."""
    try:
        key = store_key(uri)
        candidates: list[Path] = []
        db = store_uri.sqlite_path(uri)
        if db is not None:
            candidates.append(Path(os.path.realpath(db)).parent / STORE_FILE)
        candidates.extend(_registry_files())
        for path in candidates:
            server = _read_live(path)
            if server is not None and server.store_key == key:
                return server
    except (OSError, ValueError):
        return None
    return None


def live_servers() -> list[Server]:
    """Every live server in this user's registry, oldest first. Never raises."""
    try:
        found = [s for s in map(_read_live, _registry_files()) if s is not None]
    except (OSError, ValueError):
        return []
    return sorted(found, key=lambda s: s.started)


def _registry_files() -> list[Path]:
    folder = registry_dir()
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [folder / n for n in sorted(names) if n.endswith(".json") and not n.startswith(".")]


def _read_live(path: Path) -> Server | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        server = _server(data)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return server if server is not None and _alive(server) else None


def _server(data: Any) -> Server | None:
    if not isinstance(data, dict):
        return None
    url, pid, host, started = data["url"], data["pid"], data["host"], data["started"]
    key, label, store = data["store_key"], data["store_label"], data.get("store")
    if not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        return None
    if type(pid) is not int or not isinstance(started, int | float) or not isinstance(host, str):
        return None
    if not (isinstance(key, str) and isinstance(label, str)):
        return None
    if store is not None and not isinstance(store, str):
        return None
    return Server(url, pid, host, float(started), key, label, store)


_MAX_PID = 2**31 - 1  # pid_t is a signed 32-bit integer


def _alive(server: Server) -> bool:
    """Whether the process that wrote the record still runs (see the module docstring)."""
    if server.host != socket.gethostname() or not 0 < server.pid <= _MAX_PID:
        return False  # no process has that pid (os.kill would overflow on one past pid_t)
    try:
        os.kill(server.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process: alive
    except OSError:
        return False
    import psutil  # a base dependency; loaded only when a record is read

    try:
        created = psutil.Process(server.pid).create_time()
    except (psutil.Error, OSError):
        return False
    return created <= server.started + 1.0  # a reused pid belongs to a younger process


def _write_atomically(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _remove_own(paths: list[Path], pid: int) -> None:
    """Remove the files among ``paths`` that still name ``pid`` (another server may have
    replaced ``server.json`` since)."""
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                if json.load(fh).get("pid") != pid:
                    continue
            os.unlink(path)
        except (OSError, ValueError, AttributeError):
            continue  # gone already, or not ours to judge: nothing to remove
