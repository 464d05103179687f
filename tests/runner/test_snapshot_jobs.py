"""Code snapshots end to end, as a user runs them: ``tracker submit`` from a project
directory (plain, or a git work tree with uncommitted changes), the project edited after
submission, then a real worker -- or a real Slurm dispatcher -- that shares no directory with
the project runs the job from its own fresh copy of the code, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.polling import wait_for
from tests.support.runner import REAP, Procs, SnapshotProcs
from tracker.entities import JobInfo
from tracker.store import Store, logs, snapshots
from tracker.store import jobs as store_jobs
from tracker.store.artifacts import blob_store
from tracker.store.runs import get_run

TRAIN = """\
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
print("data", open(os.path.join(here, "data.txt")).read().strip())
print("cwd", os.getcwd())
print("helper", __import__("helper").VALUE)
"""


def _project(tmp: Path) -> Path:
    project = tmp / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text(TRAIN)
    (project / "src" / "helper.py").write_text("VALUE = 'first'\n")
    (project / "src" / "data.txt").write_text("v1\n")
    (project / ".gitignore").write_text("*.ckpt\nscratch/\n")
    (project / "model.ckpt").write_bytes(b"x" * 1000)  # ignored: never snapshotted
    (project / "scratch").mkdir()
    (project / "scratch" / "notes.txt").write_text("ignored\n")
    return project


def _git(project: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}  # fmt: skip
    done = subprocess.run(
        ["git", *args], cwd=project, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _submit(procs: Procs, project: Path, *args: str) -> tuple[int, str]:
    done = procs.run("submit", "src/train.py", *args, cwd=project)
    assert done.returncode == 0, done.stderr
    job_id = int(done.stdout.split()[1])
    return job_id, done.stderr


def _stdout(store: Store, job_id: int) -> str:
    return "".join(c.text for c in logs.logs_after(store, job_id, limit=1000, stream="stdout"))


def _ended(store: Store, job_id: int) -> JobInfo:
    found: JobInfo = wait_for(
        lambda: (j := store_jobs.get_job(store, job_id)).is_final and j, 120, f"job {job_id}"
    )
    return found


def _start(kind: str, procs: Procs, tmp: Path, request: pytest.FixtureRequest) -> None:
    workdir = tmp / "executor-home"  # shares nothing with the project
    workdir.mkdir(exist_ok=True)
    if kind == "local":
        procs.tracker(
            "worker", "--gpus", "none", "--poll-interval", "0.05", *REAP, "--exit-when-idle",
            "--project-root", str(workdir), "--snapshot-dir", str(tmp / "worker-snapshots"),
            name="worker",
        )  # fmt: skip
    else:
        request.getfixturevalue("slurm")
        procs.tracker(
            "dispatcher", "--poll-interval", "0.3", "--lease-seconds", "6", "--log-dir",
            str(tmp / "slurm-logs"), *REAP, "--exit-when-idle", "--project-root", str(workdir),
            name="dispatcher",
        )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["local", pytest.param("slurm", marks=pytest.mark.slurm)])
def test_a_job_runs_the_code_as_submitted_not_as_edited_after(
    kind: str, store: Store, sprocs: SnapshotProcs, tmp_path: Path,
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", str(sprocs.root))
    project = _project(tmp_path)
    first, said = _submit(sprocs, project)
    assert "snapshot" in said and "4 files" in said, said  # .gitignore + 3 under src/
    (project / "src" / "data.txt").write_text("v2\n")  # edited after the first submission
    (project / "src" / "helper.py").write_text("VALUE = 'second'\n")
    second, said2 = _submit(sprocs, project)
    assert ", 2 new," in said2, said2  # only the two changed files are stored again
    live, said3 = _submit(sprocs, project, "--no-snapshot")
    assert "snapshot" not in said3

    _start(kind, sprocs, tmp_path, request)
    for job_id in (first, second):
        job = _ended(store, job_id)
        assert job.status == "succeeded", (job.failure_class, job.failure_hint)
    out1, out2 = _stdout(store, first), _stdout(store, second)
    assert "data v1" in out1 and "helper first" in out1, out1
    assert "data v2" in out2 and "helper second" in out2, out2
    home = tmp_path / ("worker-snapshots" if kind == "local" else "slurm-logs/snapshots")
    assert f"cwd {home / f'job-{first}' / 'attempt-1'}" in out1, out1
    copy = home / f"job-{first}" / "attempt-1"
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()) == [
        ".gitignore", "src/data.txt", "src/helper.py", "src/train.py",
    ]  # fmt: skip
    # --no-snapshot: the executor's own copy of the project, which it does not have here
    job = _ended(store, live)
    assert (job.status, job.failure_class) == ("failed", "missing_file"), job.failure_hint
    assert "executor-home" in (job.failure_hint or ""), job.failure_hint


def test_a_git_work_tree_records_its_commit_and_uncommitted_diff(
    store: Store, sprocs: SnapshotProcs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", str(sprocs.root))
    project = _project(tmp_path)
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "first")
    commit = _git(project, "rev-parse", "HEAD")
    (project / "src" / "helper.py").write_text("VALUE = 'edited'\n")  # uncommitted
    (project / "src" / "new.py").write_text("X = 1\n")  # untracked, not ignored
    job_id, said = _submit(sprocs, project)
    assert f"commit {commit[:8]} + uncommitted changes" in said, said
    job = store_jobs.get_job(store, job_id)
    assert job.snapshot_id is not None
    info = snapshots.get_snapshot(store, job.snapshot_id)
    assert info.git_commit == commit
    assert "+VALUE = 'edited'" in (info.git_diff or "")
    paths = [f.path for f in snapshots.snapshot_files(store, job.snapshot_id)]
    assert paths == [".gitignore", "src/data.txt", "src/helper.py", "src/new.py", "src/train.py"]
    assert get_run(store, job.run_id).git_commit == commit  # the run names the code's commit


def test_a_snapshot_whose_files_are_gone_fails_the_job_missing_file_with_the_reason(
    store: Store, sprocs: SnapshotProcs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", str(sprocs.root))
    project = _project(tmp_path)
    job_id, _ = _submit(sprocs, project)
    job = store_jobs.get_job(store, job_id)
    gone = snapshots.snapshot_files(store, int(job.snapshot_id or 0))[0]
    blob_store(store).delete(gone.sha256)  # e.g. an artifact root wiped by hand
    _start("local", sprocs, tmp_path, request)
    job = _ended(store, job_id)
    assert (job.status, job.failure_class) == ("failed", "missing_file")
    assert f"code snapshot {job.snapshot_id}" in (job.failure_hint or "")
    assert gone.path in (job.failure_hint or ""), job.failure_hint


def test_no_artifact_root_submits_without_a_snapshot_and_says_so(
    empty_store_url: str, tmp_path: Path
) -> None:
    if not empty_store_url.startswith("postgresql"):
        pytest.skip("a SQLite store keeps its files next to the database file")
    procs = Procs(empty_store_url, tmp_path)  # no TRACKER_ARTIFACT_ROOT
    project = _project(tmp_path)
    job_id, said = _submit(procs, project)
    assert "no code snapshot" in said and "TRACKER_ARTIFACT_ROOT" in said, said
    store = Store(empty_store_url)
    try:
        assert store_jobs.get_job(store, job_id).snapshot_id is None
    finally:
        store.close()


def test_a_project_over_the_cap_is_refused_naming_its_biggest_files(
    store: Store, sprocs: SnapshotProcs, tmp_path: Path
) -> None:
    project = _project(tmp_path)
    (project / "data.bin").write_bytes(os.urandom(300_000))
    done = sprocs.run("submit", "src/train.py", "--snapshot-max-bytes", "200KiB", cwd=project)
    assert done.returncode == 2, done.stderr
    assert "data.bin (0.3 MiB)" in done.stderr and "--no-snapshot" in done.stderr, done.stderr
    assert store_jobs.list_jobs(store) == []
    shutil.rmtree(project)
