"""Who on this host may read a SQLite store: only its owner.

The store holds job environments (secrets a job was given) and the installation secret that
signs sign-in cookies, so no other local account may read it. A store this code creates is
private from the start: its directory (when this creates it) 0700, its file 0600 before
SQLite opens it (SQLite gives the ``-wal`` and ``-shm`` files the same mode). A store made
before, readable by others, is warned about once per process; ``tracker db permissions
--fix`` makes it private (:func:`make_private`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_WARNED: set[str] = set()
_OTHERS_READ = stat.S_IRGRP | stat.S_IROTH
_OTHERS_ANY = stat.S_IRWXG | stat.S_IRWXO


def private_dir(path: Path) -> None:
    """Create ``path`` (and its parents) if missing; the directory this creates is 0700. An
    existing directory is left as it is."""
    if path.is_dir():
        return
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)  # the umask may have taken bits away; never adds any


def private_sqlite_file(path: Path) -> None:
    """Create the SQLite file ``path`` 0600 if it does not exist; warn (once) when an
    existing one can be read by other accounts."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        if str(path) not in _WARNED and readable_by_others(path):
            _WARNED.add(str(path))
            log.warning(
                "the store %s can be read by other accounts on this host (it holds job "
                "environments and the installation secret): run `tracker db permissions "
                "--fix`", path,
            )  # fmt: skip
        return
    except OSError:
        return  # a read-only directory and the like: SQLite says what is wrong
    os.close(fd)


def _files(path: Path) -> list[Path]:
    return [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]


def readable_by_others(path: Path) -> bool:
    """Whether another account may read the SQLite file ``path`` or its WAL files: a
    group or other read bit on one of them, and its directory searchable by them."""
    try:
        if not os.stat(path.parent).st_mode & (stat.S_IXGRP | stat.S_IXOTH):
            return False
    except OSError:
        return False
    return any(os.stat(p).st_mode & _OTHERS_READ for p in _files(path))


@dataclass(frozen=True)
class Mode:
    path: Path
    mode: int  # the permission bits

    @property
    def private(self) -> bool:
        return not self.mode & _OTHERS_ANY

    def __str__(self) -> str:
        return f"{stat.filemode(self.mode)[1:]} {self.mode:04o} {self.path}"


def modes(path: Path) -> list[Mode]:
    """The store's directory and files with their permission bits."""
    return [Mode(p, stat.S_IMODE(os.stat(p).st_mode)) for p in [path.parent, *_files(path)]]


def make_private(path: Path) -> list[Mode]:
    """Take every group and other permission off the store's directory (0700) and files
    (0600); returns what changed, with the old modes."""
    changed = []
    for entry in modes(path):
        if entry.private:
            continue
        os.chmod(entry.path, 0o700 if entry.path.is_dir() else 0o600)
        changed.append(entry)
    return changed
