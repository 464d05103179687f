"""A sweep that learns, created over HTTP (issue 31): ``tracker sweep ... --method tpe
--metric val/loss --uri http://host:port --token T`` from a project directory that only the
submitter has. The code snapshot is uploaded to a real ``tracker ui`` (as ``tracker submit``
does), the sweep is stored there (``POST /api/v1/sweeps`` with the job under ``job``), the
dashboard's own periodic loop queues its trials, and a real ``tracker worker`` that shares no
directory with the submitter runs them from the snapshot to finished. A ``log`` token is
refused naming the scope it needs; a bad option fails before anything is uploaded; ``tracker
sweeps ...`` with a dashboard's address says where to go instead. SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.polling import wait_for
from tests.support.web import TOKEN
from tests.web import test_remote_submit as submit
from tests.web.test_remote_submit import Dashboard, WorkerProcs, api, blob_files, remote, tracker

pytest.importorskip("optuna")

dashboard = submit.dashboard  # the fixture: a real `tracker ui` with a token, on its own store

TRAIN = """\
import os
import helper
import tracker
VERSION = {version}
run = tracker.init(project="laptop", config={{"lr": 0.01, "width": 16}})
print(f"version {{VERSION}} helper {{helper.NAME}} width {{run.config['width']}}")
print(f"cwd {{os.getcwd()}}")
for step in range(4):
    tracker.log({{"val/loss": float(run.config["lr"]) * run.config["width"] + 1 / (step + 1)}},
                step=step)
tracker.finish()
"""
SEARCH = ["-c", "lr=loguniform(1e-3,1e-1)", "-c", "width=16,32"]
LEARN = ["--method", "tpe", "--metric", "val/loss", "--trials", "3", "--parallel", "3",
         "--seed", "7"]  # fmt: skip


def make_project(root: Path, version: int = 1) -> Path:
    root.mkdir(parents=True)
    (root / "train.py").write_text(TRAIN.format(version=version))
    (root / "helper.py").write_text("NAME = 'helped'\n")
    return root


def sweep_doc(dash: Dashboard, sweep_id: int) -> dict[str, Any]:
    status, doc = api(dash, "GET", f"/sweeps/{sweep_id}", dash.log_token)
    assert status == 200, doc
    return doc  # type: ignore[no-any-return]


@pytest.mark.slow
def test_a_sweep_that_learns_created_over_http_runs_its_trials_from_the_snapshot(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "submitter" / "project")
    made = tracker(project, "sweep", "train.py", *SEARCH, *LEARN, "--sweep-name", "laptop",
                   *remote(dashboard))  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines() == [
        "sweep 1 created (tpe, minimize val/loss, 3 trials, 3 at once, prune none, seed 7); "
        "trials are jobs tagged sweep-1",
        "  the dashboard queues the first trials within about 2 s",
        "It queues the next trials as slots free up; follow the sweep on its page, "
        f"{dashboard.url}/sweeps/1.",
    ]
    assert "snapshot 1: 2 files" in made.stderr and ", 2 new," in made.stderr
    # edited after creating the sweep: its trials keep the code it was created with
    (project / "train.py").write_text(TRAIN.format(version=2))

    # no worker yet: the dashboard's periodic loop alone queues the trials
    doc = wait_for(lambda: len((d := sweep_doc(dashboard, 1))["trials"]) == 3 and d, 60,
                   "the dashboard to queue the sweep's three trials", interval=0.2)  # fmt: skip
    sweep = doc["sweep"]
    assert sweep["name"] == "laptop" and sweep["spec"]["snapshot_id"] == 1
    assert sweep["spec"]["argv"] == ["python", "train.py"] and sweep["spec"]["cwd"] == "."
    assert {t["job_status"] for t in doc["trials"]} == {"queued"}

    worker_dir = tmp_path / "worker"  # empty: no copy of the project
    worker_dir.mkdir()
    snapshot_dir = worker_dir / "snapshots"
    procs = WorkerProcs(dashboard, worker_dir)
    try:
        worker = procs.worker("--gpus", "none", "--exit-when-idle",
                              "--snapshot-dir", str(snapshot_dir))  # fmt: skip
        doc = wait_for(
            lambda: (d := sweep_doc(dashboard, 1))["sweep"]["status"] == "finished" and d,
            120, "the sweep to finish", interval=0.2,
        )  # fmt: skip
        assert worker.wait(60, "the worker to exit when the queue is empty") == 0
    finally:
        procs.close()
    trials = doc["trials"]
    assert [t["number"] for t in trials] == [0, 1, 2]
    assert {t["state"] for t in trials} == {"complete"}, trials
    for trial in trials:
        status, job = api(dashboard, "GET", f"/jobs/{trial['job_id']}", dashboard.log_token)
        assert status == 200 and job["status"] == "succeeded" and job["snapshot_id"] == 1
        assert job["config"]["width"] == trial["params"]["width"]
        expected = trial["params"]["lr"] * trial["params"]["width"] + 1 / 4
        assert trial["value"] == pytest.approx(expected)
        logs = tracker(tmp_path, "jobs", "logs", str(job["id"]),
                       *remote(dashboard, dashboard.log_token))  # fmt: skip
        lines = [line for line in logs.stdout.splitlines() if not line.startswith("tracker: ")]
        assert lines[0] == f"version 1 helper helped width {trial['params']['width']}", logs
        ran_in = Path(lines[1].removeprefix("cwd ")).resolve()
        assert ran_in == (snapshot_dir / f"job-{job['id']}" / "attempt-1").resolve()
    assert doc["sweep"]["best"]["value"] == min(t["value"] for t in trials)


def test_a_log_token_may_not_create_a_sweep(dashboard: Dashboard, tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    refused = tracker(project, "sweep", "train.py", *SEARCH, *LEARN,
                      *remote(dashboard, dashboard.log_token))  # fmt: skip
    assert refused.returncode == 2, refused.stdout
    assert "error [forbidden_scope]" in refused.stderr and "'admin' scope" in refused.stderr
    # nor through the API with the job given in full
    status, answer = api(dashboard, "POST", "/sweeps", dashboard.log_token, {
        "job": {"argv": ["python", "train.py"]}, "overrides": ["lr=0.1,0.2"],
        "metric": "val/loss",
    })  # fmt: skip
    assert status == 403 and answer["error"]["code"] == "forbidden_scope", answer
    assert "'admin' scope" in answer["error"]["message"]
    assert api(dashboard, "GET", "/sweeps", dashboard.log_token) == (200, {"sweeps": []})
    assert blob_files(dashboard.artifact_root) == set()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--method", "grid"], "lr"),  # a grid takes comma lists, not a distribution
        (["--trials", "0"], "--trials"),
        (["--priority", "9999999"], "priority"),
    ],
    ids=["grid-over-a-distribution", "no-trials", "priority"],
)
def test_a_bad_option_fails_before_anything_is_uploaded(
    dashboard: Dashboard, tmp_path: Path, options: list[str], words: str
) -> None:
    project = make_project(tmp_path / "project")
    learn = [*LEARN]
    for name in options[::2]:  # the option under test replaces LEARN's own
        if name in learn:
            del learn[learn.index(name) : learn.index(name) + 2]
    refused = tracker(project, "sweep", "train.py", *SEARCH, *learn, *options,
                      *remote(dashboard))  # fmt: skip
    assert refused.returncode != 0, refused.stdout
    assert "error" in refused.stderr and words in refused.stderr, refused.stderr
    assert "snapshot" not in refused.stderr  # nothing was collected or uploaded
    assert blob_files(dashboard.artifact_root) == set()
    assert api(dashboard, "GET", "/snapshots/1", TOKEN)[0] == 404
    assert api(dashboard, "GET", "/sweeps", TOKEN) == (200, {"sweeps": []})


def test_sweeps_commands_with_a_dashboard_address_say_where_to_go(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    for args in (["ls"], ["show", "1"], ["stop", "1"], ["resume", "1"]):
        refused = tracker(tmp_path, "sweeps", *args, *remote(dashboard)[:2])
        assert refused.returncode == 2, (args, refused.stdout)
        assert f"`tracker sweeps {args[0]}` reads the database" in refused.stderr, refused.stderr
        assert f"Sweeps page ({dashboard.url}/sweeps)" in refused.stderr
        assert "give a database URL" in refused.stderr
