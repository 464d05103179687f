"""``tracker up`` / ``tracker ui`` start-up order (issue 14, item 1), as real processes.

A port in use fails at once ("port N is in use: use --port") before anything is stored,
queued or started; the "is up" banner appears only once the server listens; ``up --demo``
on a store that has the demo already does not queue it again.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.web import TRACKER, Proc, free_port
from tracker.cli.ui import DEMO_GRID, demo_script, ensure_demo
from tracker.store import Store
from tracker.store.jobs import list_jobs


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process listens on (a real socket, held for the test)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize("command", [["up", "--demo"], ["ui"]], ids=["up --demo", "ui"])
def test_a_taken_port_fails_fast_and_nothing_is_stored_or_started(
    tmp_path: Path, taken_port: int, command: list[str]
) -> None:
    result = subprocess.run(
        [*TRACKER, *command, "--port", str(taken_port)], capture_output=True, text=True,
        cwd=tmp_path, env=_env(), timeout=120, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert f"port {taken_port} is in use on 127.0.0.1: use --port" in output
    assert "is up" not in output and "tracker dashboard:" not in output
    assert "login?token=" not in output
    # no store made, so no demo job queued, no token created, no worker started
    assert sorted(tmp_path.iterdir()) == []


def test_the_port_hint_names_a_free_port(tmp_path: Path, taken_port: int) -> None:
    result = subprocess.run(
        [*TRACKER, "ui", "--no-auth", "--port", str(taken_port)], capture_output=True,
        text=True, cwd=tmp_path, env=_env(), timeout=120, check=False,
    )  # fmt: skip
    hint = result.stderr.split("(e.g. --port ", 1)[1].split(")", 1)[0]
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", int(hint)))  # free when the hint was given


@pytest.mark.parametrize("dev", [False, True], ids=["gunicorn", "dev server"])
def test_the_banner_is_printed_once_the_server_listens(tmp_path: Path, dev: bool) -> None:
    port = free_port()
    argv = [*TRACKER, "ui", "--no-auth", "--port", str(port)] + (["--dev"] if dev else [])
    server = Proc(argv, _env(), tmp_path)
    try:
        server.wait_for_line("tracker dashboard:", 120)
        # Connecting right after the banner must work: the socket was listening already.
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        server.kill()


def test_ensure_demo_queues_the_demo_once(store_url: str) -> None:
    store = Store(store_url)
    try:
        first = ensure_demo(store, demo_script())
        assert len(first) == len(DEMO_GRID["lr"]) * len(DEMO_GRID["model.width"])
        assert ensure_demo(store, demo_script()) == []
        assert sorted(j.id for j in list_jobs(store)) == sorted(first)
    finally:
        store.close()


@pytest.mark.slow
def test_up_demo_twice_on_one_store_queues_the_demo_once(tmp_path: Path) -> None:
    port = free_port()
    outputs = []
    for _ in range(2):
        up = Proc([*TRACKER, "up", "--demo", "--no-auth", "--port", str(port)], _env(), tmp_path)
        try:
            up.wait_for_line("tracker is up", 120)
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            os.killpg(up.popen.pid, signal.SIGINT)  # Ctrl-C
            up.wait(90)
        finally:
            up.kill()
        outputs.append(up.output())
    assert "queued 4 demo jobs" in outputs[0]
    assert "the demo is already in this store" in outputs[1]
    assert "queued 4 demo jobs" not in outputs[1]
    store = Store(f"sqlite:///{tmp_path / '.tracker' / 'tracker.db'}")
    try:
        assert len(list_jobs(store)) == 4
    finally:
        store.close()
