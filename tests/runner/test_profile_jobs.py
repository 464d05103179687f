"""A profile of a queued job, on every executor (issue 32): the same training script whose
DataLoader falls behind at step 100 (tests/doctor/scripts/stall_loader_profiled.py) runs as a
job on the local worker and on a real single-node Slurm; the run profiles itself when asked,
the trace is stored, and the job's verdict and the doctor's hint are the same on both: a
warning (the job succeeds) whose hint names the DataLoader."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.doctor.test_profile_diagnosis import SCRIPT, check_profiled_stall
from tests.support.runner import REAP, Procs
from tracker.store import Store
from tracker.store import jobs as store_jobs

# PostgreSQL stores keep artifacts (the trace) under an artifact root, which jobs inherit
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("artifact_root")]


@pytest.mark.parametrize("kind", ["local", pytest.param("slurm", marks=pytest.mark.slurm)])
def test_a_profiled_job_gets_the_same_verdict_on_every_executor(
    kind: str, store: Store, procs: Procs, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    done = procs.run("submit", "--json", "--", sys.executable, str(SCRIPT))
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    if kind == "local":
        starter = procs.worker("--gpus", "none", "--exit-when-idle")
    else:
        request.getfixturevalue("slurm")  # the cluster, started once per session
        starter = procs.tracker(
            "dispatcher", "--poll-interval", "0.3", "--lease-seconds", "6", "--log-dir",
            str(tmp_path / "slurm-logs"), "--exit-when-idle", *REAP, name="dispatcher",
        )  # fmt: skip
    assert starter.wait(300, "the job to run") == 0, starter.output()
    info = store_jobs.get_job(store, job["id"])
    assert (info.status, info.failure_class) == ("succeeded", None), info.failure_hint
    check_profiled_stall(store, job["run_id"])
