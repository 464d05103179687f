"""Code snapshots, the pure rules: which files a snapshot leaves out, what a stored file
entry may be, its identity, and the size caps with an error that names the biggest files.

A snapshot is the list of a project's files (path relative to the project root,
``/``-separated; sha256; size; executable bit) that ``tracker submit`` records so that a
worker runs the code as submitted (:mod:`tracker.store.snapshots` stores it,
``tracker.cli.snapshot`` collects it). Outside a git work tree the files are those of the
project root less what :class:`IgnoreRules` (``.gitignore`` files, the common subset of
git's syntax) and :data:`ALWAYS_IGNORED` leave out; in a git work tree git itself lists them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tracker.errors import InvalidInput

__all__ = [
    "ALWAYS_IGNORED",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILES",
    "MAX_DIFF_CHARS",
    "MAX_PATH",
    "FileEntry",
    "IgnoreRules",
    "SnapshotTooLarge",
    "check_entries",
    "check_path",
    "check_size",
    "snapshot_digest",
]

# Directories and files never snapshotted (caches, environments, the store's own files).
ALWAYS_IGNORED_DIRS = frozenset(
    {".git", ".hg", ".svn", ".tracker", "__pycache__", ".venv", "venv", ".cache", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", ".tox", ".nox", "node_modules", ".ipynb_checkpoints"}
)  # fmt: skip
ALWAYS_IGNORED_SUFFIXES = (".pyc", ".pyo")
ALWAYS_IGNORED = (*sorted(ALWAYS_IGNORED_DIRS), *(f"*{s}" for s in ALWAYS_IGNORED_SUFFIXES))
DEFAULT_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_MAX_FILES = 20_000
MAX_PATH = 1024
MAX_DIFF_CHARS = 1_000_000  # the uncommitted diff kept for display (the files are exact)
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class FileEntry:
    """One file of a snapshot."""

    path: str  # relative to the project root, '/'-separated
    sha256: str
    size: int
    executable: bool = False


class SnapshotTooLarge(InvalidInput):
    """The project is over a snapshot cap; the message names the biggest files."""


def check_path(path: object) -> str:
    """A stored file path: relative, ``/``-separated, no ``.``/``..``/empty parts, no NUL or
    backslash, at most :data:`MAX_PATH` characters. Returns it; raises InvalidInput."""
    if not isinstance(path, str) or not path:
        raise InvalidInput(f"snapshot file path {path!r}: must be a non-empty string", field="path")
    bad = (
        len(path) > MAX_PATH
        or path.startswith("/")
        or "\0" in path
        or "\\" in path
        or any(part in ("", ".", "..") for part in path.split("/"))
    )
    if bad:
        raise InvalidInput(
            f"snapshot file path {path[:200]!r}: must be relative to the project root, "
            f"'/'-separated, without '.', '..' or empty parts, NUL or backslash, at most "
            f"{MAX_PATH} characters",
            field="path",
        )
    return path


def check_entries(entries: Iterable[object]) -> list[FileEntry]:
    """Validate an untrusted file list (a JSON body): each a mapping with ``path``,
    ``sha256`` (64 lowercase hex digits), ``size`` (integer >= 0) and optional
    ``executable``; no path twice, and no path that is also another's directory.

    Raises InvalidInput naming the entry and the rule.
    """
    out: list[FileEntry] = []
    for i, raw in enumerate(entries):
        if not isinstance(raw, dict):
            raise InvalidInput(f"files[{i}]: must be an object", field="files")
        path = check_path(raw.get("path"))
        sha = raw.get("sha256")
        if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
            raise InvalidInput(f"files[{i}] ({path}): sha256 must be 64 hex digits", field="files")
        size = raw.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size < 1 << 62:
            raise InvalidInput(f"files[{i}] ({path}): size must be an integer >= 0", field="files")
        executable = raw.get("executable", False)
        if not isinstance(executable, bool):
            raise InvalidInput(
                f"files[{i}] ({path}): executable must be true or false", field="files"
            )
        out.append(FileEntry(path, sha, size, executable))
    paths = sorted(e.path for e in out)
    for a, b in itertools.pairwise(paths):
        if a == b:
            raise InvalidInput(f"snapshot file {a} is listed twice", field="files")
        if b.startswith(a + "/"):
            raise InvalidInput(f"snapshot file {a} is also the directory of {b}", field="files")
    return sorted(out, key=lambda e: e.path)


def snapshot_digest(
    entries: Sequence[FileEntry], git_commit: str | None, git_diff: str | None
) -> str:
    """The identity of a snapshot: its files (sorted by path) and its git commit and diff."""
    doc = {
        "files": [[e.path, e.sha256, e.size, e.executable] for e in sorted(entries, key=_path)],
        "git_commit": git_commit,
        "git_diff": hashlib.sha256((git_diff or "").encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode()).hexdigest()


def _path(e: FileEntry) -> str:
    return e.path


def check_size(
    entries: Sequence[FileEntry],
    root: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_files: int = DEFAULT_MAX_FILES,
) -> None:
    """Raise :class:`SnapshotTooLarge` when the snapshot is over a cap, naming the biggest
    files (or directories, by file count) and the ways out."""
    total = sum(e.size for e in entries)
    fixes = (
        "leave them out with a .gitignore, raise the cap (--snapshot-max-bytes / "
        "--snapshot-max-files), or submit with --no-snapshot to run from the worker's files"
    )
    if total > max_bytes:
        biggest = sorted(entries, key=lambda e: -e.size)[:5]
        listed = ", ".join(f"{e.path} ({_mib(e.size)})" for e in biggest)
        raise SnapshotTooLarge(
            f"the code snapshot of {root} is {_mib(total)}, over the {_mib(max_bytes)} cap; "
            f"the biggest files: {listed}: {fixes}",
            field="snapshot",
        )
    if len(entries) > max_files:
        per_dir: dict[str, int] = {}
        for e in entries:
            top = e.path.split("/", 1)[0] if "/" in e.path else "."
            per_dir[top] = per_dir.get(top, 0) + 1
        crowded = sorted(per_dir.items(), key=lambda kv: -kv[1])[:5]
        listed = ", ".join(f"{d}/ ({n} files)" for d, n in crowded)
        raise SnapshotTooLarge(
            f"the code snapshot of {root} has {len(entries)} files, over the {max_files} cap; "
            f"the most crowded directories: {listed}: {fixes}",
            field="snapshot",
        )


def _mib(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB"


# --------------------------------------------------------------------- .gitignore


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    base: str  # the directory of the .gitignore ('' for the root), '/'-terminated or ''


class IgnoreRules:
    """The ``.gitignore`` files met on a walk, applied git's way for the common syntax:
    ``#`` comments, ``!`` negation (last match wins), a trailing ``/`` for directories only,
    a pattern with a ``/`` (other than a trailing one) anchored to its file's directory, else
    matched against the name at any depth, ``*``, ``?``, ``[...]`` and ``**``. A file inside
    an ignored directory is ignored (the walk does not enter it)."""

    def __init__(self) -> None:
        self._patterns: list[_Pattern] = []

    def add(self, lines: Iterable[str], base: str = "") -> None:
        """Add the lines of the ``.gitignore`` in directory ``base`` ('' = the root)."""
        prefix = base.strip("/") + "/" if base.strip("/") else ""
        for raw in lines:
            line = raw.rstrip("\n").rstrip("\r")
            if not line.strip() or line.startswith("#"):
                continue
            if not line.endswith("\\ "):
                line = line.rstrip(" ")
            negate = line.startswith("!")
            if negate:
                line = line[1:]
            if line.startswith("\\"):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            line = line.lstrip("/")
            body = _glob_regex(line)
            if not anchored:
                body = "(?:.*/)?" + body
            regex = re.compile(re.escape(prefix) + body + r"\Z", re.DOTALL)
            self._patterns.append(_Pattern(regex, negate, dir_only, prefix))

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether ``path`` (relative to the root, '/'-separated) is ignored."""
        name = path.rsplit("/", 1)[-1]
        if is_dir and name in ALWAYS_IGNORED_DIRS:
            return True
        if not is_dir and name.endswith(ALWAYS_IGNORED_SUFFIXES):
            return True
        verdict = False
        for p in self._patterns:
            if p.dir_only and not is_dir:
                continue
            if p.base and not path.startswith(p.base):
                continue
            if p.regex.match(path):
                verdict = not p.negate
        return verdict


def _glob_regex(glob: str) -> str:
    out = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = glob.find("]", i + 2)
            if end < 0:
                out.append(re.escape(c))
                i += 1
            else:
                inner = glob[i + 1 : end]
                if inner.startswith("!"):
                    inner = "^" + inner[1:]
                out.append("[" + inner.replace("\\", "\\\\") + "]")
                i = end + 1
        elif c == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)
