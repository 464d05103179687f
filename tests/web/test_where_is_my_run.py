"""Where is my run? (issue 24, item 4) with a real ``tracker ui`` serving a demo folder's store.

* a script in the store's folder or a sub-folder prints its run's page on the dashboard
  (never the sign-in token), and the page's run is that run;
* a script in a SIBLING folder (no ``.tracker/`` above it) logs into the one live dashboard's
  store and its line says so; nothing is created in the sibling;
* the CLI's read commands from ``examples/`` and from the sibling read the demo's store;
* a job a worker runs prints the line into its job log;
* a clean stop removes the server's files: then the sibling gets a NEW store.

The server's registry is the test's own folder (``TRACKER_SERVER_REGISTRY``), so dashboards
of other tests or users are not seen.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.polling import wait_for
from tests.support.web import TRACKER, Proc, free_port
from tests.support.where import env_for, line_of, run_names, train

pytestmark = pytest.mark.slow


class Dashboard:
    def __init__(self, root: Path) -> None:
        self.demo = root / "demo"
        (self.demo / "examples").mkdir(parents=True)
        self.sibling = root / "sibling"
        self.sibling.mkdir()
        self.registry = root / "registry"
        self.env = env_for(self.registry)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.proc = Proc([*TRACKER, "ui", "--port", str(self.port)], self.env, self.demo)
        self.token = self.proc.login_token(self.port)

    def get(self, path: str) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.token}"}
        request = urllib.request.Request(f"{self.url.rstrip('/')}{path}", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, None

    def tracker(self, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*TRACKER, *args], cwd=cwd, env=self.env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    board = Dashboard(tmp_path_factory.mktemp("where"))
    try:
        yield board
    finally:
        board.proc.kill()


def run_id(line: str) -> int:
    match = re.match(r"tracker: run (\d+) ", line)
    assert match, line
    return int(match.group(1))


def test_init_prints_the_run_page_of_the_dashboard(dashboard: Dashboard) -> None:
    line = line_of(train(dashboard.demo, "here", dashboard.env))
    rid = run_id(line)
    page = f"{dashboard.url}runs/{rid}"
    assert line == f"tracker: run {rid} 'here' logging to .tracker/tracker.db; view it at {page}"
    assert dashboard.token not in line
    status, body = dashboard.get(f"/api/v1/runs/{rid}")
    assert status == 200 and body["name"] == "here"
    below = line_of(train(dashboard.demo / "examples", "below", dashboard.env))
    assert below == (
        f"tracker: run {run_id(below)} 'below' logging to ../.tracker/tracker.db (found above "
        f"this folder); view it at {dashboard.url}runs/{run_id(below)}"
    )
    assert not (dashboard.demo / "examples" / ".tracker").exists()


def test_a_sibling_folder_logs_into_the_live_dashboards_store(dashboard: Dashboard) -> None:
    line = line_of(train(dashboard.sibling, "sibling", dashboard.env))
    rid = run_id(line)
    assert line == (
        f"tracker: run {rid} 'sibling' logging to ../demo/.tracker/tracker.db, the store of the "
        f"dashboard running at {dashboard.url} (no .tracker/ here or above); view it at "
        f"{dashboard.url}runs/{rid}"
    )
    assert "sibling" in run_names(dashboard.demo / ".tracker" / "tracker.db")
    assert list(dashboard.sibling.iterdir()) == []  # no second store


@pytest.mark.parametrize(
    "args", [("runs", "ls"), ("jobs", "ls"), ("doctor", "1"), ("db", "current")], ids=" ".join
)
def test_read_commands_from_a_sub_folder_and_a_sibling_find_the_store(
    dashboard: Dashboard, args: tuple[str, ...]
) -> None:
    train(dashboard.demo, f"for {args[0]}", dashboard.env)
    below = dashboard.tracker(dashboard.demo / "examples", *args)
    assert below.returncode == 0, below.stderr
    beside = dashboard.tracker(dashboard.sibling, *args)
    assert beside.returncode == 0, beside.stderr
    if args == ("runs", "ls"):
        assert f"for {args[0]}" in below.stdout and f"for {args[0]}" in beside.stdout
    if args != ("db", "current"):
        assert f"the store of the dashboard running at {dashboard.url}" in beside.stderr
    assert "dashboard running" not in below.stderr  # found above: nothing to explain
    assert list(dashboard.sibling.iterdir()) == []


def test_a_job_prints_the_line_into_its_log(dashboard: Dashboard) -> None:
    script = dashboard.demo / "examples" / "train.py"
    script.write_text(
        "import tracker\n"
        "tracker.init(project='p', name='job', system_interval=None)\n"
        "tracker.log({'x': 1.0})\n"
    )
    examples = dashboard.demo / "examples"
    submitted = dashboard.tracker(examples, "submit", "train.py", "--name", "job")
    assert submitted.returncode == 0, submitted.stderr
    worker = dashboard.tracker(examples, "worker", "--once", "--poll-interval", "0.1")
    assert worker.returncode == 0, worker.stderr
    jobs = dashboard.tracker(examples, "jobs", "ls", "--json")
    job = json.loads(jobs.stdout)[0]
    assert job["status"] == "succeeded", job
    logs = dashboard.tracker(examples, "jobs", "logs", str(job["id"]))
    rid = job["run_id"]
    assert f"tracker: run {rid} 'job' logging to " in logs.stdout, logs.stdout
    assert f"view it at {dashboard.url}runs/{rid}" in logs.stdout


def test_a_clean_stop_removes_the_servers_files(dashboard: Dashboard) -> None:
    """Last in this module: it stops the dashboard."""
    beside = dashboard.demo / ".tracker" / "server.json"
    entry = dashboard.registry / f"{socket.gethostname()}-{dashboard.proc.popen.pid}.json"
    assert json.loads(beside.read_text())["url"] == dashboard.url
    assert json.loads(entry.read_text())["pid"] == dashboard.proc.popen.pid
    os.kill(dashboard.proc.popen.pid, signal.SIGINT)  # Ctrl-C
    dashboard.proc.wait(60)
    wait_for(lambda: not beside.exists() and not entry.exists(), 10, "the files to go")
    line = line_of(train(dashboard.sibling, "alone", dashboard.env))
    assert "logging to a NEW store .tracker/tracker.db (no .tracker/ here or above)" in line
