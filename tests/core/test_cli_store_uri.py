"""Store URLs on the command line (issue 14, item 2), through the real ``tracker`` command.

Read commands never create a store: a SQLite path that does not exist is an error naming
the absolute path, and the directory stays empty (no database, no parent directory, no
``.migrate.lock``). A malformed ``sqlite:/x.db`` is a clear error, never a traceback.
``tracker -v`` says which store a command used; ``runs ls`` says it when nothing matches.

With no ``--uri`` and no ``TRACKER_URI`` (issue 24, item 4), a command run from a sub-folder
of a store's folder uses that store, as ``tracker.init`` does (tracker.discovery); ``--uri``
and ``TRACKER_URI`` still win. (The store of a running dashboard, for a sibling folder:
tests/web/test_where_is_my_run.py.)
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.runner import TRACKER

READ_COMMANDS = [
    ("runs", "ls"),
    ("runs", "show", "1"),
    ("runs", "export", "1"),
    ("jobs", "ls"),
    ("jobs", "show", "1"),
    ("jobs", "logs", "1"),
    ("jobs", "cancel", "1"),
    ("workers", "ls"),
    ("schedule", "ls"),
    ("token", "ls"),
    ("db", "current"),
]


def tracker(cwd: Path, *args: str, uri: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    # no live dashboard's store is adopted: a registry of servers that stays empty
    env["TRACKER_SERVER_REGISTRY"] = str(cwd.parent / "no-live-dashboards")
    if uri is not None:
        env["TRACKER_URI"] = uri
    return subprocess.run(
        [*TRACKER, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60,
        check=False,
    )  # fmt: skip


def everything_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("args", READ_COMMANDS, ids=lambda a: " ".join(a))
def test_a_read_command_never_creates_a_store(tmp_path: Path, args: tuple[str, ...]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    result = tracker(work, *args, uri="sqlite:///nonexistent/dir/x.db")
    assert result.returncode == 2, result.stderr
    assert f"no store at {work / 'nonexistent/dir/x.db'}" in result.stderr
    assert "relative to the current directory" in result.stderr
    assert "sqlite:////absolute" in result.stderr
    assert "Traceback" not in result.stderr
    assert everything_under(work) == []


def test_the_default_store_is_not_created_by_a_read(tmp_path: Path) -> None:
    result = tracker(tmp_path, "runs", "ls")
    assert result.returncode == 2
    assert f"no store at {tmp_path / '.tracker' / 'tracker.db'}" in result.stderr
    assert everything_under(tmp_path) == []


def test_an_absolute_path_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "data" / "x.db"
    result = tracker(tmp_path, "jobs", "ls", "--uri", f"sqlite:///{missing}")
    assert result.returncode == 2
    assert f"no store at {missing}:" in result.stderr  # absolute: no "relative to"
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("uri", "suggested"),
    [
        ("sqlite:/data/x.db", "sqlite:////data/x.db"),
        ("sqlite:x.db", "sqlite:///x.db"),
        ("sqlite://host/x.db", "sqlite:////host/x.db"),
    ],
)
def test_a_malformed_sqlite_url_is_explained(tmp_path: Path, uri: str, suggested: str) -> None:
    for args in (("runs", "ls"), ("submit", "--", "true")):
        result = tracker(tmp_path, *args, uri=uri)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert f"error [invalid_input]: TRACKER_URI {uri!r} is not a valid SQLite URL" in (
            result.stderr
        )
        assert "sqlite:///relative/path.db (three slashes: relative" in result.stderr
        assert "sqlite:////absolute/path.db (four slashes" in result.stderr
        assert f"e.g. {suggested}" in result.stderr
    assert everything_under(tmp_path) == []


def test_verbose_names_the_store_and_an_empty_runs_ls_does_too(tmp_path: Path) -> None:
    created = tracker(tmp_path, "-v", "submit", "--uri", "sqlite:///rel/t.db", "--", "true")
    assert created.returncode == 0, created.stderr
    assert f"store: sqlite:///{tmp_path / 'rel' / 't.db'}" in created.stderr
    listed = tracker(tmp_path, "--verbose", "jobs", "ls", uri="sqlite:///rel/t.db")
    assert listed.returncode == 0 and "true" in listed.stdout
    assert f"store: sqlite:///{tmp_path / 'rel' / 't.db'}" in listed.stderr
    empty = tracker(tmp_path, "runs", "ls", "--status", "failed", uri="sqlite:///rel/t.db")
    assert empty.returncode == 0
    assert f"no runs match in sqlite:///{tmp_path / 'rel' / 't.db'}" in empty.stderr
    quiet = tracker(tmp_path, "jobs", "ls", uri="sqlite:///rel/t.db")
    assert "store:" not in quiet.stderr


def test_verbose_hides_a_postgres_password(tmp_path: Path) -> None:
    uri = "postgresql://alice:s3cret@127.0.0.1:1/nodb"
    result = tracker(tmp_path, "-v", "runs", "ls", uri=uri)
    assert "store: postgresql+psycopg://alice:***@127.0.0.1:1/nodb" in result.stderr
    assert "s3cret" not in result.stderr


SUB_FOLDER_READS = [
    ("runs", "ls"),
    ("jobs", "ls"),
    ("workers", "ls"),
    ("schedule", "ls"),
    ("token", "ls"),
    ("db", "current"),
]


@pytest.mark.parametrize("args", SUB_FOLDER_READS, ids=" ".join)
def test_a_read_command_from_a_sub_folder_reads_the_store_above(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    demo = tmp_path / "demo"
    examples = demo / "examples"
    examples.mkdir(parents=True)
    submitted = tracker(demo, "submit", "--", "true")
    assert submitted.returncode == 0, submitted.stderr
    result = tracker(examples, "-v", *args)
    assert result.returncode == 0, result.stderr
    assert f"store: sqlite:///{demo / '.tracker' / 'tracker.db'}" in result.stderr
    assert everything_under(examples) == []
    if args == ("jobs", "ls"):
        assert "true" in result.stdout


def test_uri_and_tracker_uri_still_win_over_the_store_above(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    (demo / "examples").mkdir(parents=True)
    assert tracker(demo, "submit", "--", "true").returncode == 0
    for how in ("--uri", "TRACKER_URI"):
        other = f"sqlite:///{tmp_path / how}.db"
        args = ("jobs", "ls", "--uri", other) if how == "--uri" else ("jobs", "ls")
        result = tracker(demo / "examples", *args, uri=other if how == "TRACKER_URI" else None)
        assert result.returncode == 2  # the named store does not exist: not the one above
        assert f"no store at {tmp_path / how}.db" in result.stderr
