"""The store down when the training script starts: ``tracker.init()`` returns an offline run
(:mod:`tracker.client.offline`) that keeps everything in one spill file, the loop trains
through all of its steps and exits 0 with one warning line, and ``tracker db replay FILE``
later creates the run with its points, config, checkpoints, media, events and final status.
``TRACKER_STRICT=1`` raises from ``init()`` as it always did. Real processes, real stores.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracker.cli import main
from tracker.store import Store, artifacts
from tracker.store.checkpoints import list_checkpoints
from tracker.store.events import list_events
from tracker.store.metrics import count_points
from tracker.store.runs import get_run

SCRIPTS = Path(__file__).parent / "scripts"
STEPS, MEDIA_STEPS = 30, [0, 5, 10, 15, 20, 25]
POINTS = 2 * STEPS + 200 * (STEPS - 11)  # as train_through_failures.py logs them
OFFLINE = re.compile(
    r"^tracker: offline run: creating the run in the store failed: .*`tracker db replay "
    r"([^`]+)`.*Training goes on",
    re.M,
)


@pytest.fixture
def held() -> Iterator[list[socket.socket]]:
    """Sockets a test holds until it ends."""
    sockets: list[socket.socket] = []
    yield sockets
    for sock in sockets:
        sock.close()


def _unreachable(kind: str, tmp_path: Path, held: list[socket.socket]) -> str:
    """A store that cannot be reached, even by root: a SQLite file whose parent is a regular
    file, or a local port where nothing listens: bound by a socket in ``held`` that never
    listens (connections are refused), so no other test's server can take the port meanwhile
    (a port merely free a moment ago was, once, another worker's dashboard)."""
    if kind == "sqlite":
        (tmp_path / "not-a-dir").write_text("a file, not a folder\n")
        return f"sqlite:///{tmp_path / 'not-a-dir' / 'store.db'}"
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    held.append(sock)
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _train(uri: str, tmp_path: Path, *, strict: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRACKER_STRICT": "1" if strict else "0", "TRACKER_URI": uri}
    env.pop("TRACKER_QUIET", None)
    return subprocess.run(
        [sys.executable, str(SCRIPTS / "train_through_failures.py"), "none", str(tmp_path)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["sqlite", "http"])
def test_a_store_down_at_start_raises_strict_else_gives_an_offline_run_the_replay_stores(
    tmp_path: Path, kind: str, held: list[socket.socket]
) -> None:
    uri = _unreachable(kind, tmp_path, held)
    strict = _train(uri, tmp_path, strict=True)  # raises from init(), as it always did
    assert strict.returncode == 1 and "RUN" not in strict.stdout, strict.stderr
    # the error of the SQLite folder that cannot be made, or of the refused connection
    expected = "FileExistsError" if kind == "sqlite" else "refused the connection"
    assert expected in strict.stderr.splitlines()[-1], strict.stderr
    assert not OFFLINE.search(strict.stderr) and not (tmp_path / "spill").exists()

    done = _train(uri, tmp_path, strict=False)
    assert done.returncode == 0, done.stderr
    assert "RUN 0" in done.stdout and f"DONE {STEPS}" in done.stdout, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(re.findall(r"^tracker: ", done.stderr, re.M)) == 1, done.stderr  # one line
    (spill,) = OFFLINE.findall(done.stderr)
    assert Path(spill).exists() and Path(spill).parent == tmp_path / "spill", done.stderr

    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)  # the cause fixed: a store that works
    (tmp_path / "artifacts").mkdir()
    env = {"TRACKER_ARTIFACT_ROOT": str(tmp_path / "artifacts")}
    result = CliRunner(env=env).invoke(main, ["db", "replay", "--uri", url, spill])
    assert result.exit_code == 0, result.output
    assert "created run 1" in result.output and "run 1 is now finished" in result.output
    assert not Path(spill).exists()
    run = get_run(store, 1)
    assert (run.project, run.status, run.config) == ("never-stops", "finished", {"lr": 0.1})
    assert run.ended_at is not None and run.started_at is not None
    assert run.started_at < run.ended_at  # the original times, not the replay's
    assert count_points(store, 1) == POINTS
    assert sorted(c.step for c in list_checkpoints(store, 1)) == [20, 29]
    keys = artifacts.media_keys(store, 1)
    assert keys["images"]["samples/noise"] == MEDIA_STEPS
    assert keys["histograms"]["weights"] == MEDIA_STEPS
    (event,) = [e for e in list_events(store, 1) if e.kind == "tracker_failure"]
    assert event.message.startswith("creating the run in the store failed")
