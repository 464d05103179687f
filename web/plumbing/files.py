"""Files the dashboard serves: checkpoint downloads and the file roots under
``/api/v1/files/<root>/``. A file is served only from inside a configured root, and no root
may hold the store.

* roots: ``check_roots`` runs when the app is built and refuses (``StoreUnderRoot``) a root
  that contains the SQLite database file or its directory -- where the ``-wal`` and
  ``-shm`` files live too -- so ``/api/v1/files/checkpoints/tracker.db`` can never download
  the store. The default roots (``./.tracker/checkpoints``, ``./.tracker/logs``) sit next
  to the default store (``./.tracker/tracker.db``), not above it.
* paths in requests (``resolve_inside``): ``..``, encoded and double-encoded traversal,
  absolute paths, NUL or backslash -> 400; anything resolving outside a root (a symlink
  pointing out) -> 404.
* stored paths: a checkpoint row written over the API must name a path inside the
  checkpoint roots (``checkpoint_path``, 400 otherwise); a stored path is served only if it
  still resolves inside a root (``file_inside_roots``, 404 otherwise), so a row written by
  a trusted script with any path is never a way out either.
* responses (``download``): an attachment with ``Cache-Control: no-store``, so no browser
  or proxy keeps a copy of a checkpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from urllib.parse import unquote

from flask import Response, send_file

from tracker.errors import InvalidInput, NotFound

__all__ = [
    "BadPath",
    "StoreUnderRoot",
    "check_roots",
    "checkpoint_path",
    "download",
    "file_inside_roots",
    "resolve_inside",
]


class BadPath(InvalidInput):
    code = "invalid_path"


class StoreUnderRoot(InvalidInput):
    code = "store_under_root"


def check_roots(roots: Mapping[str, Iterable[Path]], store_file: Path | None) -> None:
    """Refuse to serve a root that contains the store's database file or its directory.

    Raises:
        StoreUnderRoot: naming the root and the database file.
    """
    if store_file is None:
        return
    store_dir = store_file.resolve().parent
    for name, paths in roots.items():
        for root in paths:
            if store_dir.is_relative_to(root.resolve()):
                raise StoreUnderRoot(
                    f"refusing to serve {root} as the {name} root: it contains the store "
                    f"({store_file}), whose database anyone allowed to download files could "
                    f"then fetch. Give a directory that does not contain {store_dir} "
                    "(--checkpoint-root / --log-root), or keep the store elsewhere (TRACKER_URI)",
                    field=f"{name}_root",
                )


def _check_relative(text: str) -> None:
    if "\x00" in text or "\\" in text:
        raise BadPath("the path contains a NUL byte or a backslash", field="path")
    if text.startswith("/") or re.match(r"[A-Za-z]:", text):
        raise BadPath("absolute paths are not allowed; give a path inside the root", field="path")
    if any(part == ".." for part in text.split("/")):
        raise BadPath("'..' is not allowed in a file path", field="path")


def resolve_inside(roots: Sequence[str | Path], relpath: str) -> Path:
    """The file ``relpath`` names inside one of ``roots``.

    The path is checked as given and after each further percent-decoding (so ``%2e%2e/``
    and ``%252e%252e/`` are caught too).

    Raises:
        BadPath (400): traversal, an absolute path, NUL or backslash.
        NotFound (404): no such regular file inside a root, or it resolves outside
            every root (a symlink pointing out).
    """
    text = relpath
    for _ in range(4):
        _check_relative(text)
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    else:
        raise BadPath("the path is percent-encoded too many times", field="path")
    for root in roots:
        base = Path(root).resolve()
        candidate = (base / relpath).resolve()
        if candidate.is_relative_to(base) and candidate.is_file():
            return candidate
    raise NotFound(f"no file {relpath[:200]!r} inside the configured roots", field="path")


def file_inside_roots(roots: Sequence[str | Path], path: str) -> Path:
    """A stored absolute file path, if it (after resolving symlinks) lies inside a root.

    Raises:
        NotFound (404): the file is missing, outside every root, or the path is relative.
    """
    if Path(path).is_absolute() and "\x00" not in path:
        real = Path(path).resolve()
        for root in roots:
            if real.is_relative_to(Path(root).resolve()) and real.is_file():
                return real
    raise NotFound(
        "the file is missing or outside the configured roots (--checkpoint-root)", field="path"
    )


def checkpoint_path(roots: Sequence[str | Path], path: str) -> str:
    """``path`` as given, when it is absolute and lies inside a checkpoint root (after
    normalising ``..`` and resolving the symlinks that exist on this machine; the file
    itself may not exist here yet, or ever, when the training host is another machine).

    Raises:
        BadPath (400): a relative path, a NUL byte, or a path outside every root.
    """
    if "\x00" in path or not Path(path).is_absolute():
        raise BadPath(
            f"checkpoint path {path[:200]!r} must be an absolute path without NUL bytes",
            field="path",
        )
    real = Path(path).resolve()
    if any(real.is_relative_to(Path(root).resolve()) for root in roots):
        return path
    shown = ", ".join(str(r) for r in roots)
    raise BadPath(
        f"checkpoint path {path[:200]!r} is outside the dashboard's checkpoint roots "
        f"({shown}); save checkpoints there (TRACKER_CHECKPOINT_DIR) or start the dashboard "
        "with --checkpoint-root set to their directory",
        field="path",
    )


def download(path: Path) -> Response:
    """``path`` as an attachment that no browser or proxy may store."""
    response = send_file(path, as_attachment=True, download_name=path.name, max_age=0)
    response.headers["Cache-Control"] = "no-store"
    return response
