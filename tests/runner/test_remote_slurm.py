"""Issue 28 on real Slurm: a laptop that shares nothing with the cluster submits over HTTP
(``tracker submit --uri http://... --token``); a real ``tracker dispatcher`` hands the job to
a real single-node Slurm, which runs it from its code snapshot on the shared directory; the
job logs back over HTTP with a token of its own (never the dispatcher's), and the output and
final status come back with ``tracker jobs logs --follow --uri``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.runner import REAP
from tests.support.slurm_cluster import SlurmCluster
from tests.support.web import TOKEN
from tests.web.test_remote_submit import (  # noqa: F401 - the fixture
    Dashboard,
    WorkerProcs,
    dashboard,
    remote,
    tracker,
)
from tracker.store import Store
from tracker.store.metrics import metric_history

TRAIN = """\
import json, os
import tracker
lr = json.loads(os.environ["TRACKER_CONFIG"])["lr"]
print("lr", lr, "own-token", os.environ.get("TRACKER_TOKEN") != os.environ.get("DISPATCHER_TOKEN"))
print("cwd", os.getcwd())
run = tracker.init(project="remote")
run.log({"loss": lr}, step=1)
run.finish()
"""


@pytest.mark.slow
@pytest.mark.slurm
def test_a_laptop_submits_over_http_and_slurm_runs_the_snapshot(
    store_url: str, slurm: SlurmCluster, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    del store_url, slurm  # the dashboard's store (SQLite, PostgreSQL); the running cluster
    dash: Dashboard = request.getfixturevalue("dashboard")
    project = tmp_path / "laptop" / "project"
    project.mkdir(parents=True)
    (project / "train.py").write_text(TRAIN)
    sent = tracker(project, "submit", "train.py", *remote(dash), "-c", "lr=0.25")
    assert sent.returncode == 0, sent.stderr
    (project / "train.py").write_text("raise SystemExit('edited after submission')\n")

    shared = tmp_path / "cluster-shared"
    shared.mkdir()
    procs = WorkerProcs(dash, shared)
    env = procs.env
    procs.env = lambda: {**env(), "TRACKER_TOKEN": TOKEN, "DISPATCHER_TOKEN": TOKEN}  # type: ignore[method-assign]
    try:
        procs.tracker(
            "dispatcher", "--poll-interval", "0.3", "--lease-seconds", "6", *REAP,
            "--log-dir", str(shared / "slurm-logs"), "--job-uri", dash.url, "--exit-when-idle",
            name="dispatcher",
        )  # fmt: skip
        follow = tracker(tmp_path / "laptop", "jobs", "logs", "1", "--follow", *remote(dash))
    finally:
        procs.close()
    assert follow.returncode == 0, (follow.stderr, [p.output()[-3000:] for p in procs.started])
    assert "lr 0.25 own-token True" in follow.stdout, follow.stdout
    assert f"cwd {shared / 'slurm-logs' / 'snapshots' / 'job-1' / 'attempt-1'}" in follow.stdout
    assert "job 1 succeeded" in follow.stderr
    store = Store(dash.store_url)
    try:
        assert [p.value for p in metric_history(store, 1, "loss")] == [0.25]
    finally:
        store.close()
    assert not os.path.exists(project / "__pycache__")  # nothing ran on the laptop
