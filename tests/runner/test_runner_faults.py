"""Fault tests with real processes: many workers, SIGKILL, SIGSTOP, two schedulers, torchrun."""

from __future__ import annotations

import collections
import re
import signal
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support.polling import wait_for
from tests.support.runner import Procs, alive, read_json, script, stop_between_transactions
from tracker.entities import JobSpec
from tracker.store import Store, logs, queue
from tracker.store import jobs as store_jobs
from tracker.store import models as m
from tracker.store import schedules as store_schedules
from tracker.store.metrics import metric_history
from tracker.store.runs import get_run, list_runs

pytestmark = pytest.mark.slow

LOCK_ERRORS = re.compile(r"database is locked|deadlock|could not serialize|Traceback|ERROR")


def test_300_jobs_each_run_exactly_once(store: Store, procs: Procs, out: Path) -> None:
    """Workers are real `tracker worker` processes; every job appends its id to one file."""
    n_workers = 8 if store.dialect == "postgresql" else 4
    ran = out / "ran.txt"
    code = "import os, sys; open(sys.argv[1], 'a').write(os.environ['TRACKER_JOB_ID'] + '\\n')"
    argv = [sys.executable, "-S", "-c", code, str(ran)]
    jobs = queue.enqueue_many(store, [JobSpec(argv=argv) for _ in range(300)])
    workers = [
        procs.worker("--gpus", "none", "--exit-when-idle", "--lease-seconds", "30", name=f"w{i}")
        for i in range(n_workers)
    ]
    for w in workers:
        assert w.wait(300, "every worker to drain the queue and exit") == 0, w.output()
    counts = collections.Counter(int(x) for x in ran.read_text().split())
    assert counts == {j.id: 1 for j in jobs}  # each job ran once, none twice, none lost
    assert store_jobs.count_jobs(store) == {"succeeded": 300}
    with store.engine.connect() as conn:
        attempts = conn.execute(sa.select(sa.func.count()).select_from(m.JobAttemptRow)).scalar()
        owners = conn.execute(sa.select(m.JobAttemptRow.worker_id).distinct()).scalars().all()
    assert attempts == 300
    assert len(owners) >= 2  # the work really was shared
    for w in workers:
        assert not LOCK_ERRORS.search(w.output()), w.output()


@pytest.mark.parametrize("retries", [1, 0])
def test_sigkilled_worker_crashes_its_job_which_resumes_from_its_checkpoint(
    store: Store, procs: Procs, out: Path, retries: int
) -> None:
    job = queue.enqueue(
        store, JobSpec(argv=script("checkpointed.py", str(out)), max_retries=retries)
    )
    procs.scheduler()  # the reaper, in its own process
    first = procs.worker("--gpus", "none", "--lease-seconds", "2", "--no-housekeeping")
    saved = wait_for(lambda: (out / "saved-1").exists() and (out / "saved-1").read_text(), 60,
                     "attempt 1 to save a checkpoint")  # fmt: skip
    attempt1 = read_json(out / "attempt-1.json")
    first.signal(signal.SIGKILL)
    first.wait(10)
    # lease 2 s + one reaper pass (0.5 s), with slack for a loaded machine
    wait_for(lambda: store_jobs.attempts(store, job.id)[0].status == "crashed", 15,
             "the reaper to mark attempt 1 crashed")  # fmt: skip
    wait_for(lambda: not alive(attempt1["pid"]), 10, "attempt 1's process to die with its worker")
    crashed = store_jobs.attempts(store, job.id)[0]
    assert (
        crashed.failure_class == "crashed" and "stopped renewing the lease" in crashed.failure_hint
    )
    if retries == 0:
        final = store_jobs.get_job(store, job.id)
        assert (final.status, final.failure_class) == ("crashed", "crashed")
        assert get_run(store, job.run_id).status == "crashed"
        return
    assert store_jobs.get_job(store, job.id).status == "queued"
    second = procs.worker("--gpus", "none", "--once", "--no-housekeeping")
    assert second.wait(90, "attempt 2 to run") == 0, second.output()
    attempt2 = read_json(out / "attempt-2.json")
    assert attempt2["env"] == saved and attempt2["resume"] == saved and attempt2["start"] == 3
    done = store_jobs.get_job(store, job.id)
    assert (done.status, done.attempt) == ("succeeded", 2)
    tries = store_jobs.attempts(store, job.id)
    assert [t.status for t in tries] == ["crashed", "succeeded"]
    assert tries[1].resume_checkpoint == saved
    run = get_run(store, job.run_id)
    assert run.status == "finished" and [p.step for p in metric_history(store, run.id, "loss")] == [
        0, 1, 2, 3, 4, 5,
    ]  # fmt: skip


def test_stopped_worker_loses_its_job_and_changes_nothing_after_sigcont(
    store: Store, procs: Procs, out: Path
) -> None:
    release = out / "release"
    argv = script("jobscript.py", str(out), "--wait-for", str(release))
    job = queue.enqueue(store, JobSpec(argv=argv, max_retries=1))
    procs.scheduler()
    old = procs.worker("--gpus", "none", "--lease-seconds", "2", "--no-housekeeping",
                       "--name", "old")  # fmt: skip
    first = wait_for(lambda: read_json(out / f"{job.id}-1.json"), 30, "attempt 1 to start")
    stop_between_transactions(old, store, job.id)
    wait_for(lambda: store_jobs.get_job(store, job.id).status == "queued", 20,
             "the reaper to crash and requeue the stopped worker's job")  # fmt: skip
    new = procs.worker("--gpus", "none", "--lease-seconds", "30", "--no-housekeeping",
                       "--name", "new")  # fmt: skip
    second = wait_for(lambda: read_json(out / f"{job.id}-2.json"), 30, "attempt 2 to start")
    assert alive(first["pid"]) and alive(second["pid"])  # the old child still runs, for now
    before = (store_jobs.get_job(store, job.id), store_jobs.attempts(store, job.id))
    assert before[0].lease_owner == "new" and before[0].attempt == 2
    old_chunks = len(logs.logs_after(store, job.id, attempt=1))
    old.signal(signal.SIGCONT)
    wait_for(lambda: not alive(first["pid"]), 20, "the old worker to kill its child")
    wait_for(lambda: "lease lost" in old.output(), 20, "the old worker to report the lost lease")
    after = (store_jobs.get_job(store, job.id), store_jobs.attempts(store, job.id))
    assert after == before  # the old worker wrote nothing
    assert len(logs.logs_after(store, job.id, attempt=1)) == old_chunks
    assert alive(second["pid"])
    release.write_text("go")
    wait_for(
        lambda: store_jobs.get_job(store, job.id).status == "succeeded", 30, "attempt 2 to end"
    )
    assert [a.status for a in store_jobs.attempts(store, job.id)] == ["crashed", "succeeded"]
    assert new.popen.poll() is None and old.popen.poll() is None  # both workers live on


def test_two_scheduler_processes_fire_each_time_once(store: Store, procs: Procs) -> None:
    info = store_schedules.add_schedule(
        store, "* * * * * *", JobSpec(argv=[sys.executable, "-c", "pass"]), timezone="UTC"
    )  # every second (6 fields: seconds first)
    procs.scheduler()
    procs.scheduler()

    def fires() -> list[tuple[float, int]]:
        with store.engine.connect() as conn:
            return conn.execute(
                sa.select(m.ScheduleFireRow.fire_at, m.ScheduleFireRow.job_id).where(
                    m.ScheduleFireRow.schedule_id == info.id
                )
            ).all()

    def agreeing() -> tuple[list[tuple[float, int]], set[int]] | None:
        rows = fires()
        jobs = {j.id for j in store_jobs.list_jobs(store, limit=1000) if j.schedule_id == info.id}
        return (rows, jobs) if {j for _, j in rows} == jobs else None

    wait_for(lambda: len(fires()) >= 4, 30, "4 fires of the every-second schedule")
    store_schedules.set_paused(store, info.id, True)
    # a fire commits its row and its job together; a second job for a fire time would
    # have no row of its own and never agree
    rows, jobs = wait_for(agreeing, 10, "one job per fire row and one fire row per job")
    assert len({f for f, _ in rows}) == len(rows) == len(jobs)
    assert all(f == int(f) for f, _ in rows)  # whole seconds, as the cron says


def test_distributed_job_on_cpu_with_gloo_logs_from_rank_0_only(store: Store, procs: Procs) -> None:
    argv = script("distributed.py")
    job = queue.enqueue(store, JobSpec(argv=argv, nproc_per_node=2, project="dist"))
    worker = procs.worker("--gpus", "none", "--once")
    assert worker.wait(180, "the 2-process job to finish") == 0, worker.output()
    done = store_jobs.get_job(store, job.id)
    assert done.status == "succeeded", (done.failure_hint, logs.logs_after(store, job.id))
    text = "".join(c.text for c in logs.logs_after(store, job.id))
    assert "rank 0 of 2 done" in text and "rank 1 of 2 done" in text
    run = get_run(store, job.run_id)
    assert run.status == "finished"
    assert [p.value for p in metric_history(store, run.id, "rank")] == [0.0, 0.0, 0.0]
    assert [p.value for p in metric_history(store, run.id, "sum")] == [3.0, 3.0, 3.0]
    assert len(list_runs(store, project="dist")) == 1  # the follower did not create a run
