"""Take a code snapshot of a project for ``tracker submit`` / ``tracker sweep``.

:func:`collect` lists and hashes the files: in a git work tree the tracked files and the
untracked ones git does not ignore (``git ls-files --cached --others --exclude-standard``),
with the commit (``HEAD``) and the uncommitted diff (``git diff HEAD``) for display; else
the files under the project root less what its ``.gitignore`` files and
:data:`tracker.rules.snapshot.ALWAYS_IGNORED` leave out. The caps are checked from sizes
before anything is read. :func:`store_snapshot` puts the files a SQL store lacks into its
artifact root and saves the list; ``tracker.cli.remote_submit`` does the same over HTTP.
Only files the store lacks are written: a second submission of the same tree stores nothing.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from tracker.filedigest import file_sha256
from tracker.rules.snapshot import (
    ALWAYS_IGNORED_DIRS,
    ALWAYS_IGNORED_SUFFIXES,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FILES,
    FileEntry,
    IgnoreRules,
    check_size,
)
from tracker.rules.units import parse_size

__all__ = ["Collected", "collect", "snapshot_options", "store_snapshot"]


@dataclass(frozen=True)
class Collected:
    """A project's files, hashed: ``entries`` by path, ``sources`` their files here."""

    root: str
    entries: list[FileEntry]
    sources: dict[str, Path]
    git_commit: str | None
    git_diff: str | None


def snapshot_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--no-snapshot``, ``--snapshot-max-bytes``, ``--snapshot-max-files``."""
    decorators = [
        click.option("--no-snapshot", is_flag=True,
                     help="Do not record the code: the worker runs the job from its own copy "
                          "of the project (a shared file system), as before snapshots."),
        click.option("--snapshot-max-bytes", default="100MiB", show_default=True,
                     metavar="SIZE", help="Refuse a code snapshot bigger than this."),
        click.option("--snapshot-max-files", type=click.IntRange(1, 10_000_000),
                     default=DEFAULT_MAX_FILES, show_default=True,
                     help="Refuse a code snapshot with more files than this."),
    ]  # fmt: skip
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def collect(
    root: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_files: int = DEFAULT_MAX_FILES,
    exclude: Sequence[str] = (),
) -> Collected:
    """List, check and hash the files of the project at ``root`` (absolute).

    ``exclude``: absolute paths left out with everything under them (the store's own
    database file and artifact root when they lie inside the project).

    Raises:
        SnapshotTooLarge (an InvalidInput): over a cap; the message names the biggest files.
    """
    root = os.path.abspath(root)
    excluded = [os.path.abspath(p) for p in exclude]
    git = _git_files(root)
    names = git if git is not None else list(_walk(root))
    sized: list[tuple[str, Path, int, bool]] = []
    for rel in names:
        path = Path(root, *rel.split("/"))
        if any(str(path) == e or str(path).startswith(e + os.sep) for e in excluded):
            continue
        try:
            st = path.stat()  # follows a symbolic link: its target's bytes are recorded
        except OSError:
            continue  # deleted in the work tree, or a dangling link
        if not stat.S_ISREG(st.st_mode):
            continue
        sized.append((rel, path, st.st_size, bool(st.st_mode & 0o111)))
    check_size(
        [FileEntry(rel, "", size) for rel, _, size, _ in sized],
        root,
        max_bytes=max_bytes,
        max_files=max_files,
    )
    entries = []
    sources = {}
    for rel, path, size, executable in sorted(sized):
        entries.append(FileEntry(rel, file_sha256(path), size, executable))
        sources[rel] = path
    commit, diff = _git_state(root) if git is not None else (None, None)
    return Collected(root, entries, sources, commit, diff)


def _git(root: str, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    try:
        return subprocess.run(
            ["git", "-C", root, *args], capture_output=True, check=False, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return None  # no git here: walk the directory instead


def _git_files(root: str) -> list[str] | None:
    """The paths git would commit from ``root`` (relative to it), or None outside a work tree."""
    inside = _git(root, "rev-parse", "--is-inside-work-tree")
    if inside is None or inside.returncode != 0 or inside.stdout.strip() != b"true":
        return None
    listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if listed is None or listed.returncode != 0:
        return None
    out = []
    for raw in listed.stdout.split(b"\0"):
        if not raw:
            continue
        rel = os.fsdecode(raw)
        parts = rel.split("/")
        if any(p in ALWAYS_IGNORED_DIRS for p in parts[:-1]) or rel.endswith(
            ALWAYS_IGNORED_SUFFIXES
        ):
            continue
        out.append(rel)
    return sorted(set(out))


def _git_state(root: str) -> tuple[str | None, str | None]:
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    if head is None or head.returncode != 0:
        return None, None  # a repository without commits
    commit = head.stdout.decode().strip() or None
    diff = _git(root, "diff", "--no-ext-diff", "--no-color", "HEAD", "--", ".")
    text = diff.stdout.decode("utf-8", "replace") if diff and diff.returncode == 0 else None
    return commit, text or None


def _walk(root: str) -> Iterator[str]:
    rules = IgnoreRules()
    for here, dirs, files in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(here, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir
        prefix = rel_dir + "/" if rel_dir else ""
        if ".gitignore" in files:
            try:
                with open(os.path.join(here, ".gitignore"), encoding="utf-8") as f:
                    rules.add(f.read().splitlines(), rel_dir)
            except (OSError, UnicodeDecodeError):
                pass
        dirs[:] = sorted(d for d in dirs if not rules.ignored(prefix + d, True))
        for name in sorted(files):
            if not rules.ignored(prefix + name, False):
                yield prefix + name


def parse_max_bytes(text: str) -> int:
    return parse_size(text, field="snapshot_max_bytes")


def store_snapshot(store: Any, collected: Collected) -> tuple[Any, int]:
    """Put the blobs the SQL ``store`` lacks into its artifact root and save the snapshot;
    returns ``(SnapshotInfo, files written)``."""
    from tracker.store import snapshots

    missing = set(snapshots.missing_blobs(store, (e.sha256 for e in collected.entries)))
    todo: dict[str, Path] = {}
    for entry in collected.entries:
        if entry.sha256 in missing:
            todo.setdefault(entry.sha256, collected.sources[entry.path])
    for sha256, path in todo.items():  # not fsynced one by one (3 ms each): flushed once
        snapshots.put_blob_file(store, path, sha256, sync=False)
    if todo:
        snapshots.flush_blobs(store)  # durable before the snapshot row names them
    written = len(todo)
    info = snapshots.save_snapshot(
        store,
        collected.entries,
        git_commit=collected.git_commit,
        git_diff=collected.git_diff,
        root_name=os.path.basename(collected.root),
    )
    return info, written


def say_snapshot(info: Any, written: int, started: float) -> None:
    """``snapshot 3: 412 files, 2.1 MiB (commit 1a2b3c4d + uncommitted changes), 5 new, 0.4 s``."""
    commit = ""
    if info.git_commit:
        dirty = " + uncommitted changes" if info.git_diff else ""
        commit = f" (commit {info.git_commit[:8]}{dirty})"
    click.echo(
        f"snapshot {info.id}: {info.files} files, {info.bytes / 1024 / 1024:.1f} MiB{commit}, "
        f"{written} new, {time.monotonic() - started:.1f} s",
        err=True,
    )


def attach_snapshot(spec: Any, store: Any, options: dict[str, Any]) -> Any:
    """``spec`` with the snapshot of its project root (``options``: the snapshot options as
    click passes them); ``spec`` unchanged with ``--no-snapshot``, or with a note on stderr
    when the store keeps no files (no artifact root) or the job's directory lies outside its
    project root."""
    import dataclasses

    from tracker.errors import InvalidInput
    from tracker.store.artifacts import artifact_root

    if options["no_snapshot"]:
        return spec
    if spec.project_root is None or spec.cwd is None or os.path.isabs(spec.cwd):
        click.echo("note: no code snapshot: the job's directory is outside its project root; "
                   "the worker runs it from its own files", err=True)  # fmt: skip
        return spec
    try:
        root_of_files = artifact_root(store)
    except InvalidInput as exc:
        click.echo(f"note: no code snapshot ({exc.message}); the worker runs the job from its "
                   "own files", err=True)  # fmt: skip
        return spec
    started = time.monotonic()
    exclude = [str(p) for p in (store.database_file(),) if p is not None]
    if "://" not in root_of_files:
        exclude.append(root_of_files)
    collected = collect(
        spec.project_root,
        max_bytes=parse_max_bytes(options["snapshot_max_bytes"]),
        max_files=options["snapshot_max_files"],
        exclude=exclude,
    )
    if not collected.entries:
        say_nothing_to_snapshot(spec.project_root)
        return spec
    info, written = store_snapshot(store, collected)
    say_snapshot(info, written, started)
    return dataclasses.replace(spec, snapshot_id=info.id)


def say_nothing_to_snapshot(root: str) -> None:
    """The project root holds no file to record (a job that runs a program, not a script
    of the project): the job runs where the worker is."""
    click.echo(f"note: no code snapshot: {root} holds no file to record (.gitignore, caches "
               "and the store left out); the worker runs the job from its own files",
               err=True)  # fmt: skip


SNAPSHOT_KEYS = ("no_snapshot", "snapshot_max_bytes", "snapshot_max_files")
