"""Where is my run? (issue 24, item 4), without a dashboard: real training processes in real
folders, real SQLite files.

* a script run from a sub-folder of a store's folder logs into that store (like git finds
  its repository), and says so; no second store appears;
* ``TRACKER_URI`` (and ``uri=``) still win;
* with no store here or above and no live dashboard, a NEW ``./.tracker/`` store, and the
  line says NEW;
* the server files a dead dashboard left (or one whose pid now belongs to a younger process)
  are ignored: no URL in the line, no store adopted;
* ``quiet=True`` and ``TRACKER_QUIET=1`` silence the line.

The same with a real ``tracker ui`` is tests/web/test_where_is_my_run.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.where import env_for, line_of, run_names, train


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A folder with a store and an ``examples/`` sub-folder."""
    folder = tmp_path / "demo"
    (folder / "examples").mkdir(parents=True)
    return folder


def test_a_new_store_says_new_then_a_sub_folder_logs_into_it(demo: Path, tmp_path: Path) -> None:
    env = env_for(tmp_path / "registry")
    first = line_of(train(demo, "first", env))
    assert first == (
        "tracker: run 1 'first' logging to a NEW store .tracker/tracker.db (no .tracker/ "
        "here or above); no dashboard is serving it (start one: tracker ui)"
    )
    second = line_of(train(demo / "examples", "second", env))
    assert second == (
        "tracker: run 2 'second' logging to ../.tracker/tracker.db (found above this "
        "folder); no dashboard is serving it (start one: tracker ui)"
    )
    third = line_of(train(demo, "third", env))
    assert "logging to .tracker/tracker.db; no dashboard" in third  # here: nothing to explain
    assert run_names(demo / ".tracker" / "tracker.db") == ["first", "second", "third"]
    assert not (demo / "examples" / ".tracker" / "tracker.db").exists()


def test_a_tracker_folder_without_a_database_is_not_a_store(demo: Path, tmp_path: Path) -> None:
    """Checkpoints saved from examples/ make examples/.tracker/checkpoints: that folder must
    not hide the store above it."""
    env = env_for(tmp_path / "registry")
    train(demo, "top", env)
    (demo / "examples" / ".tracker" / "checkpoints").mkdir(parents=True)
    assert "../.tracker/tracker.db" in line_of(train(demo / "examples", "below", env))
    assert run_names(demo / ".tracker" / "tracker.db") == ["below", "top"]


def test_tracker_uri_still_wins(demo: Path, tmp_path: Path) -> None:
    env = env_for(tmp_path / "registry")
    train(demo, "top", env)
    other = tmp_path / "other.db"
    line = line_of(
        train(demo / "examples", "elsewhere", {**env, "TRACKER_URI": f"sqlite:///{other}"})
    )
    assert "logging to a NEW store ../../other.db;" in line  # two folders up
    line = line_of(train(demo / "examples", "again", {**env, "TRACKER_URI": f"sqlite:///{other}"}))
    assert "logging to ../../other.db (TRACKER_URI);" in line
    assert run_names(other) == ["again", "elsewhere"]
    assert run_names(demo / ".tracker" / "tracker.db") == ["top"]


def test_the_line_can_be_silenced(demo: Path, tmp_path: Path) -> None:
    env = env_for(tmp_path / "registry")
    assert "tracker: run" not in train(demo, "a", env, "--quiet")
    assert "tracker: run" not in train(demo, "b", {**env, "TRACKER_QUIET": "1"})
    assert "tracker: run 3 'c'" in train(demo, "c", {**env, "TRACKER_QUIET": "0"})


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def server_record(store_db: Path, pid: int, started: float, port: int = 5999) -> dict[str, object]:
    from tracker.servers import store_key

    uri = f"sqlite:///{store_db}"
    return {
        "url": f"http://127.0.0.1:{port}/", "pid": pid, "host": socket.gethostname(),
        "started": started, "store_key": store_key(uri), "store_label": uri, "store": uri,
    }  # fmt: skip


@pytest.mark.parametrize("why", ["dead pid", "reused pid"])
def test_files_a_dead_dashboard_left_are_ignored(demo: Path, tmp_path: Path, why: str) -> None:
    registry = tmp_path / "registry"
    env = env_for(registry)
    train(demo, "first", env)
    db = demo / ".tracker" / "tracker.db"
    # "reused pid": a live process (this one) that started long after the record says
    pid, started = (dead_pid(), 1e9) if why == "dead pid" else (os.getpid(), 1.0)
    record = json.dumps(server_record(db, pid, started))
    (demo / ".tracker" / "server.json").write_text(record)
    registry.mkdir()
    (registry / f"{socket.gethostname()}-{pid}.json").write_text(record)
    line = line_of(train(demo / "examples", "second", env))
    assert "5999" not in line and "no dashboard is serving it" in line
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    line = line_of(train(sibling, "third", env))  # no live server: nothing to adopt
    assert "logging to a NEW store .tracker/tracker.db (no .tracker/ here or above)" in line
    assert run_names(sibling / ".tracker" / "tracker.db") == ["third"]


def test_the_line_names_the_dashboard_of_a_store_named_by_url(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite and PostgreSQL: a dashboard registered for the store (here by this test process,
    which is alive) is found by the store's URL; a password is shown as ***."""
    from tracker import servers
    from tracker.rules.store_uri import redact

    registry = tmp_path / "registry"
    if "://postgres@" in store_url:  # the test server trusts local connections
        store_url = store_url.replace("://postgres@", "://postgres:s3cret@", 1)
    with monkeypatch.context() as patched:
        patched.setenv(servers.ENV_REGISTRY, str(registry))
        unregister = servers.register(store_url, "http://127.0.0.1:5998/")
    try:
        line = line_of(train(tmp_path, "named", env_for(registry, TRACKER_URI=store_url)))
    finally:
        unregister()
    rid = int(line.split()[2])
    assert line.endswith(f"; view it at http://127.0.0.1:5998/runs/{rid}")
    assert "s3cret" not in line
    if store_url.startswith("postgresql"):
        assert f"logging to {redact(store_url)} (TRACKER_URI);" in line
