"""The files a dashboard writes while it serves a store (:mod:`tracker.servers`), with real
files in the test's folder: written whole, read back only while their process lives, removed
only by the process that wrote them, and any content of such a file (it is untrusted: any
process of this user can write it) never makes a reader raise."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracker import discovery, servers


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "registry"
    monkeypatch.setenv(servers.ENV_REGISTRY, str(folder))
    return folder


def test_register_then_unregister(tmp_path: Path, registry: Path) -> None:
    db = tmp_path / "demo" / ".tracker" / "tracker.db"
    db.parent.mkdir(parents=True)
    db.touch()
    uri = f"sqlite:///{db}"
    unregister = servers.register(uri, "http://127.0.0.1:5000/")
    beside = db.parent / servers.STORE_FILE
    assert json.loads(beside.read_text())["url"] == "http://127.0.0.1:5000/"
    assert [p.name for p in registry.iterdir()] == [f"{socket.gethostname()}-{os.getpid()}.json"]
    found = servers.dashboard_for(f"sqlite:///{tmp_path}/demo/../demo/.tracker/tracker.db")
    assert found is not None and found.url == "http://127.0.0.1:5000/"
    assert [s.store for s in servers.live_servers()] == [f"sqlite:///{db}"]
    chosen = discovery.locate(cwd=tmp_path)  # no store here or above: the live one
    assert (chosen.how, chosen.uri) == ("server", f"sqlite:///{db}")
    assert discovery.locate(cwd=tmp_path, live_servers=False).how == "new"
    unregister()
    assert not beside.exists() and list(registry.iterdir()) == []
    assert servers.dashboard_for(uri) is None


def test_a_password_is_never_written_and_such_a_store_never_adopted(
    tmp_path: Path, registry: Path
) -> None:
    uri = "postgresql+psycopg://bob:hunter2@db.example/tracker"
    unregister = servers.register(uri, "http://127.0.0.1:5001/")
    try:
        (entry,) = registry.iterdir()
        assert "hunter2" not in entry.read_text()
        assert servers.dashboard_for(uri) is not None  # found by its key
        assert discovery.locate(cwd=tmp_path).how == "new"  # its URL is not known
    finally:
        unregister()


def test_only_the_registering_process_removes_its_files(tmp_path: Path, registry: Path) -> None:
    """A forked gunicorn worker runs the server's cleanup code too when it exits."""
    uri = f"sqlite:///{tmp_path / 'x.db'}"
    unregister = servers.register(uri, "http://127.0.0.1:5002/")
    pid = os.fork()
    if pid == 0:  # the child: its unregister() must leave the parent's files alone
        unregister()
        os._exit(0)
    os.waitpid(pid, 0)
    assert servers.dashboard_for(uri) is not None
    # a newer server of the same store replaced server.json: ours must not remove it
    beside = tmp_path / servers.STORE_FILE
    newer = {**json.loads(beside.read_text()), "pid": os.getppid()}
    beside.write_text(json.dumps(newer))
    unregister()
    assert json.loads(beside.read_text())["pid"] == os.getppid()
    assert list(registry.iterdir()) == []


def test_an_unwritable_registry_is_an_error_for_the_server_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(servers.ENV_REGISTRY, str(blocker / "registry"))
    with pytest.raises(OSError):
        servers.register(f"sqlite:///{tmp_path / 'x.db'}", "http://127.0.0.1:5003/")
    assert not (tmp_path / servers.STORE_FILE).exists()  # nothing half registered
    assert servers.live_servers() == []
    assert discovery.locate(cwd=tmp_path).how == "new"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=6)
    ),
    max_leaves=12,
)
RECORD = st.fixed_dictionaries(
    {
        "url": st.one_of(st.text(max_size=30), st.just("http://127.0.0.1:1/"), JSON),
        "pid": st.one_of(st.just(os.getpid()), st.integers(), JSON),
        "host": st.one_of(st.just(socket.gethostname()), JSON),
        "started": st.one_of(st.just(0.0), st.floats(), JSON),
        "store_key": st.one_of(st.text(max_size=40), JSON),
        "store_label": st.one_of(st.text(max_size=40), JSON),
    },
    optional={"store": st.one_of(st.text(max_size=40), JSON)},
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=st.one_of(st.binary(max_size=200), JSON.map(json.dumps), RECORD.map(json.dumps)))
def test_any_file_content_is_skipped_or_read_never_raised(
    tmp_path: Path, registry: Path, content: str | bytes
) -> None:
    registry.mkdir(exist_ok=True)
    data = content if isinstance(content, bytes) else content.encode()
    (registry / "x.json").write_bytes(data)
    (tmp_path / servers.STORE_FILE).write_bytes(data)
    uri = f"sqlite:///{tmp_path / 'tracker.db'}"
    found = servers.dashboard_for(uri)
    assert found is None or found.url.startswith("http")
    for server in servers.live_servers():
        assert server.pid == os.getpid()  # the only live pid a record can name here
    discovery.locate(cwd=tmp_path)  # never raises either


def test_a_stale_pid_is_not_alive(tmp_path: Path, registry: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    uri = f"sqlite:///{tmp_path / 'x.db'}"
    registry.mkdir()
    record = {
        "url": "http://127.0.0.1:1/", "pid": int(done.stdout), "host": socket.gethostname(),
        "started": 1e9, "store_key": servers.store_key(uri), "store_label": uri, "store": uri,
    }  # fmt: skip
    (registry / "dead.json").write_text(json.dumps(record))
    assert servers.dashboard_for(uri) is None and servers.live_servers() == []
    alive = {**record, "pid": os.getpid(), "started": time.time()}
    (registry / "dead.json").write_text(json.dumps(alive))
    assert servers.dashboard_for(uri) is not None  # the same record, a live pid: read
    other_host = {**alive, "host": socket.gethostname() + "-elsewhere"}
    (registry / "dead.json").write_text(json.dumps(other_host))
    assert servers.dashboard_for(uri) is None  # its pid cannot be checked here
