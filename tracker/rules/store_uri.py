"""The grammar of store URLs (``TRACKER_URI`` / ``--uri``): pure, no I/O.

Accepted forms, and what a SQLite path is relative to:

* ``sqlite:///rel/x.db``: three slashes, a path **relative to the current directory**;
* ``sqlite:////abs/x.db``: four slashes, an **absolute** path (``/abs/x.db``);
* ``sqlite://`` or ``sqlite:///:memory:``: an in-memory database (tests only);
* ``postgresql+psycopg://USER@HOST/DB`` (``postgresql://`` is read as psycopg);
* ``http://HOST:PORT`` / ``https://...``: a dashboard (the client's HTTP sink).

:func:`normalize` returns the URL to use or raises :class:`~tracker.errors.InvalidInput`
with a message that shows the forms above: a URL SQLAlchemy cannot parse (``sqlite:/x.db``,
``sqlite:x.db``, ``sqlite://host/x.db``) never reaches the driver, whose error would be a
traceback. :func:`sqlite_path` says which file a SQLite URL names (None for memory).

Showing a store to the user (the line ``tracker.init`` prints, ``tracker -v``):
:func:`redact` hides a password, :func:`shown_path` shortens a file path relative to the
current directory where that stays readable, :func:`run_page` is a run's dashboard page.
Store discovery (which store a script uses when none is named) is :mod:`tracker.discovery`.
"""

from __future__ import annotations

import re

from tracker.errors import InvalidInput

FIELD = "TRACKER_URI"

SQLITE_FORMS = (
    "sqlite:///relative/path.db (three slashes: relative to the current directory) or "
    "sqlite:////absolute/path.db (four slashes: an absolute path)"
)

# sqlite[+driver]:// then nothing, a query, or a path that starts with '/'.
_SQLITE = re.compile(r"^sqlite(\+\w+)?://(?P<rest>(/.*)?(\?.*)?)$", re.S)
_POSTGRES = re.compile(r"^postgresql\+psycopg://[^/?#]*(/[^?#]*)?(\?.*)?$", re.S)


def normalize(uri: str) -> str:
    """The store URL to open for ``uri`` (``postgresql://`` becomes ``postgresql+psycopg://``).

    Raises:
        InvalidInput: an unsupported scheme, or a SQLite/PostgreSQL URL that is malformed;
            the message names the value and shows the accepted forms.
    """
    if uri.startswith("postgresql://"):
        uri = "postgresql+psycopg://" + uri[len("postgresql://") :]
    if uri.startswith(("http://", "https://")):
        return uri
    if uri.startswith("sqlite"):
        if not _SQLITE.match(uri):
            raise InvalidInput(
                f"{FIELD} {uri!r} is not a valid SQLite URL: write {SQLITE_FORMS}; "
                f"e.g. {_suggest_sqlite(uri)}",
                field=FIELD,
            )
        return uri
    if uri.startswith("postgresql+psycopg:"):
        if not _POSTGRES.match(uri):
            raise InvalidInput(
                f"{FIELD} {uri!r} is not a valid PostgreSQL URL: write "
                "postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB",
                field=FIELD,
            )
        return uri
    raise InvalidInput(
        f"{FIELD} {uri!r} is not supported: use sqlite:///PATH, "
        "postgresql+psycopg://USER@HOST/DB or http://HOST:PORT",
        field=FIELD,
    )


def sqlite_path(uri: str) -> str | None:
    """The file path a valid SQLite URL names, as written (relative paths stay relative);
    None for an in-memory database or a non-SQLite URL."""
    m = _SQLITE.match(uri)
    if not m:
        return None
    path = m.group("rest").split("?", 1)[0][1:]  # drop the slash that ends "sqlite://"
    if path in ("", ":memory:") or path.startswith("file:"):
        return None
    return path


def redact(uri: str) -> str:
    """``uri`` with its password (``scheme://user:PASSWORD@host``) shown as ``***``; a URL
    without one is returned unchanged. Never raises."""
    if "@" not in uri or "://" not in uri:
        return uri
    scheme, rest = uri.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    if ":" not in creds:
        return uri
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"


# A relative path that climbs more than this many folders reads worse than the absolute one.
MAX_PARENT_STEPS = 2


def shown_path(path: str, cwd: str) -> str:
    """``path`` (absolute) as the user should read it from ``cwd`` (absolute): relative when
    it lies below ``cwd`` or at most :data:`MAX_PARENT_STEPS` folders up and across
    (``.tracker/tracker.db``, ``../.tracker/tracker.db``, ``../demo/.tracker/tracker.db``),
    else absolute. Pure string arithmetic (no file system access); never raises."""
    import posixpath

    if not (posixpath.isabs(path) and posixpath.isabs(cwd)):
        return path
    relative = posixpath.relpath(path, cwd)
    parts = relative.split("/")
    climbs = 0
    while climbs < len(parts) and parts[climbs] == "..":
        climbs += 1
    if climbs > MAX_PARENT_STEPS or climbs == len(parts) or relative == ".":
        return path
    return relative


def run_page(dashboard_url: str, run_id: int) -> str:
    """The dashboard page of run ``run_id``, given the dashboard's base URL (``http://h:p/``);
    never a sign-in token (the base URL a server registers carries none)."""
    return f"{dashboard_url.rstrip('/')}/runs/{run_id}"


def _suggest_sqlite(uri: str) -> str:
    """What the user most likely meant: the path after the scheme, kept absolute if it was."""
    rest = re.sub(r"^sqlite(\+\w+)?:", "", uri).lstrip("/")
    was_absolute = re.match(r"^sqlite(\+\w+)?:/(?!/)", uri) or uri.startswith("sqlite://")
    if not rest:
        return "sqlite:///.tracker/tracker.db"
    return f"sqlite:////{rest}" if was_absolute else f"sqlite:///{rest}"
