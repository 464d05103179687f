"""Jobs recorded relative to a project root run on a worker elsewhere (issue 14, item 5).

The laptop (the submitting copy) and the server (the worker's copy, ``tracker worker
--project-root``) are two different directories holding the same scripts; a real
``tracker submit`` records ``python`` and a relative directory, and a real worker runs
the job in its own copy with its own interpreter. A copy without the script fails
``missing_file`` naming the path; jobs stored with absolute paths keep working. These are
jobs submitted ``--no-snapshot`` (a snapshot job runs its own copy of the code:
tests/runner/test_snapshot_jobs.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.polling import wait_for
from tests.support.runner import Procs
from tracker.entities import JobSpec
from tracker.store import Store
from tracker.store import jobs as store_jobs
from tracker.store.queue import enqueue

REPORT = """\
import json, os, sys
with open(os.environ["REPORT"], "w") as f:
    json.dump({"cwd": os.getcwd(), "python": sys.executable}, f)
"""


def copy_of_project(root: Path, with_script: bool = True) -> Path:
    (root / "examples").mkdir(parents=True)
    if with_script:
        (root / "examples" / "report.py").write_text(REPORT)
    return root


def finished(store: Store, job_id: int) -> object:
    job = store_jobs.get_job(store, job_id)
    return job if job.is_final else None


@pytest.fixture
def laptop(tmp_path: Path) -> Path:
    root = copy_of_project(tmp_path / "laptop" / "proj")
    (root / ".git").mkdir()  # the default project root is the git work tree
    return root


def submit_from(procs: Procs, where: Path, *args: str) -> int:
    result = procs.run("submit", "--no-snapshot", *args, "--json", cwd=where)
    assert result.returncode == 0, result.stderr
    return int(json.loads(result.stdout)["id"])


def test_a_job_runs_in_the_workers_copy_with_the_workers_python(
    procs: Procs, store: Store, laptop: Path, tmp_path: Path
) -> None:
    server = copy_of_project(tmp_path / "server" / "proj")
    report = tmp_path / "report.json"
    job_id = submit_from(procs, laptop / "examples", "report.py", "--env", f"REPORT={report}")
    stored = store_jobs.get_job(store, job_id)
    assert (stored.argv, stored.cwd) == (["python", "report.py"], "examples")
    worker = procs.worker("--gpus", "none", "--exit-when-idle", "--project-root", str(server))
    job = wait_for(lambda: finished(store, job_id), 60, f"job {job_id} to finish")
    assert worker.wait(60) == 0
    assert job.status == "succeeded", (job.failure_class, job.failure_hint, worker.output())
    ran = json.loads(report.read_text())
    assert ran == {"cwd": str(server / "examples"), "python": sys.executable}


def test_an_explicit_project_root_at_submit(procs: Procs, store: Store, laptop: Path) -> None:
    job_id = submit_from(procs, laptop / "examples", "report.py",
                         "--project-root", str(laptop / "examples"))  # fmt: skip
    assert store_jobs.get_job(store, job_id).cwd == "."


@pytest.mark.parametrize("with_script", [False, True], ids=["no directory", "no script"])
def test_a_copy_without_the_script_fails_missing_file_naming_the_path(
    procs: Procs, store: Store, laptop: Path, tmp_path: Path, with_script: bool
) -> None:
    server = tmp_path / "server" / "proj"
    if with_script:
        copy_of_project(server, with_script=False)  # examples/ but no report.py
    else:
        server.mkdir(parents=True)
    job_id = submit_from(procs, laptop / "examples", "report.py", "--env", "REPORT=/dev/null")
    procs.worker("--gpus", "none", "--exit-when-idle", "--project-root", str(server))
    job = wait_for(lambda: finished(store, job_id), 60, f"job {job_id} to finish")
    assert (job.status, job.failure_class) == ("failed", "missing_file")
    missing = server / "examples" / ("report.py" if with_script else "")
    assert str(missing).rstrip("/") in job.failure_hint
    assert f"project root {server}" in job.failure_hint and "--project-root" in job.failure_hint


def test_jobs_stored_with_absolute_paths_still_run(
    procs: Procs, store: Store, laptop: Path, tmp_path: Path
) -> None:
    report = tmp_path / "legacy.json"
    spec = JobSpec(argv=[sys.executable, "report.py"], cwd=str(laptop / "examples"),
                   env={"REPORT": str(report)})  # fmt: skip
    job_id = enqueue(store, spec).id
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    procs.worker("--gpus", "none", "--exit-when-idle", "--project-root", str(elsewhere))
    job = wait_for(lambda: finished(store, job_id), 60, f"job {job_id} to finish")
    assert job.status == "succeeded", job.failure_hint
    assert json.loads(report.read_text())["cwd"] == str(laptop / "examples")


def test_a_worker_without_project_root_on_the_same_host_finds_the_submitters_copy(
    procs: Procs, store: Store, laptop: Path, tmp_path: Path
) -> None:
    report = tmp_path / "same-host.json"
    job_id = submit_from(procs, laptop / "examples", "report.py", "--env", f"REPORT={report}")
    assert store_jobs.get_job(store, job_id).project_root == str(laptop)
    # The worker starts in the test's directory, which holds no `examples/`.
    assert not (procs.tmp / "examples").exists()
    procs.worker("--gpus", "none", "--exit-when-idle")
    job = wait_for(lambda: finished(store, job_id), 60, f"job {job_id} to finish")
    assert job.status == "succeeded", (job.failure_class, job.failure_hint)
    assert json.loads(report.read_text())["cwd"] == str(laptop / "examples")


def test_an_explicit_worker_project_root_wins_over_the_submitters(
    procs: Procs, store: Store, laptop: Path, tmp_path: Path
) -> None:
    server = copy_of_project(tmp_path / "server" / "proj")
    report = tmp_path / "explicit.json"
    job_id = submit_from(procs, laptop / "examples", "report.py", "--env", f"REPORT={report}")
    procs.worker("--gpus", "none", "--exit-when-idle", "--project-root", str(server))
    job = wait_for(lambda: finished(store, job_id), 60, f"job {job_id} to finish")
    assert job.status == "succeeded", job.failure_hint
    assert json.loads(report.read_text())["cwd"] == str(server / "examples")
