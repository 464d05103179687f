"""Every process of a job dies with its worker, SIGKILL included (the per-job supervisor).

Real ``tracker worker`` processes run a shell job whose processes leave its leader: a
background child, a child that ignores SIGTERM, an orphan reparented when its parent
exited, a process that left the group with setsid (tests/runner/scripts/orphans.sh).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from tests.support.polling import wait_for
from tests.support.runner import SCRIPTS, Procs, alive
from tracker.entities import JobSpec
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs

pytestmark = pytest.mark.slow


def _pids(out: Path) -> list[int]:
    path = out / "pids-1.txt"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_sigkilled_worker_takes_every_process_of_its_job_with_it(
    store: Store, procs: Procs, out: Path
) -> None:
    argv = ["bash", str(SCRIPTS / "orphans.sh"), str(out), sys.executable]
    job = queue.enqueue(store, JobSpec(argv=argv, max_retries=1))
    worker = procs.worker("--gpus", "none", "--lease-seconds", "2", "--no-housekeeping")
    pids = wait_for(lambda: _pids(out), 60, "the job to start all five of its processes")
    assert len(pids) == 5 and all(alive(p) for p in pids)
    worker.signal(signal.SIGKILL)
    worker.wait(10, "the SIGKILLed worker to exit")
    wait_for(
        lambda: not [p for p in pids if alive(p)],
        30,
        "every process of the job (leader, background child, SIGTERM-ignoring child, "
        "orphan, setsid escapee) to die with its worker",
    )
    # The retry runs once the reaper crashed the lease; it records survivors of attempt 1.
    procs.scheduler()
    wait_for(lambda: store_jobs.get_job(store, job.id).status == "queued", 30,
             "the reaper to crash and requeue the job")  # fmt: skip
    second = procs.worker("--gpus", "none", "--once", "--no-housekeeping")
    assert second.wait(60, "the retry to run") == 0, second.output()
    assert (out / "survivors-2.txt").read_text().split() == []
    assert [a.status for a in store_jobs.attempts(store, job.id)] == ["crashed", "succeeded"]


def test_cancel_kills_the_processes_that_left_the_group(
    store: Store, procs: Procs, out: Path
) -> None:
    argv = ["bash", str(SCRIPTS / "orphans.sh"), str(out), sys.executable]
    job = queue.enqueue(store, JobSpec(argv=argv))
    worker = procs.worker("--gpus", "none", "--grace-seconds", "1", "--exit-when-idle")
    pids = wait_for(lambda: _pids(out), 60, "the job to start all five of its processes")
    store_jobs.cancel(store, job.id)
    assert worker.wait(60, "the worker to cancel the job and exit") == 0, worker.output()
    assert store_jobs.get_job(store, job.id).status == "cancelled"
    wait_for(
        lambda: not [p for p in pids if alive(p)],
        10,
        "every process of the cancelled job to be gone, the setsid escapee included",
    )
