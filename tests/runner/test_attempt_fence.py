"""A superseded attempt writes nothing into its job's run (points, events, heartbeats, status).

Store-level checks on both databases, then real processes: a worker frozen with SIGSTOP past
its lease cannot stop its job's process; after another worker took the job over, that
process's writes are refused and it stops by itself with a clear error.
"""

from __future__ import annotations

import signal
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support.polling import wait_for
from tests.support.runner import Procs, alive, read_json, script, stop_between_transactions
from tracker.client.run import Run
from tracker.client.sinks import SqlSink
from tracker.entities import AttemptFence, JobSpec
from tracker.errors import AttemptSuperseded, WriterError
from tracker.runner.housekeeping import HousekeepingOptions, housekeeping_once
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.store import models as m
from tracker.store.engine import write_begin
from tracker.store.events import add_event, list_events
from tracker.store.metrics import intern_keys, metric_history, write_points
from tracker.store.runs import finish_run, get_run, heartbeat, start_run


def _claimed_job(store: Store) -> tuple[int, int]:
    """A job claimed by worker w1 at t=1000 with a 10 s lease: (job id, run id)."""
    queue.enqueue(store, JobSpec(argv=["true"], max_retries=1), now=1000.0)
    got = queue.claim(store, "w1", lease_s=10.0, now=1000.0)
    assert got is not None
    return got[0].job.id, got[0].run_id


def _points(store: Store, run_id: int) -> int:
    with store.engine.connect() as conn:
        query = sa.select(sa.func.count()).where(m.MetricPointRow.run_id == run_id)
        return int(conn.execute(query.select_from(m.MetricPointRow)).scalar_one())


def test_the_store_refuses_every_write_of_a_superseded_attempt(store: Store) -> None:
    job_id, run_id = _claimed_job(store)
    current, stale = AttemptFence(job_id, 1), AttemptFence(job_id, 1)
    key = intern_keys(store, ["loss"])["loss"]
    write_points(store, [(run_id, key, 0, 0, 1.0)], fence=current)
    heartbeat(store, run_id, fence=current)
    add_event(store, run_id, "note", "attempt 1 is alive", fence=current)
    # the lease expires; the reaper crashes attempt 1 and requeues the job
    assert queue.reap_expired_leases(store, retry=lambda *a, **k: 0.0, now=1011.0)
    for write in (
        lambda: write_points(store, [(run_id, key, 1, 0, 2.0)], fence=stale),
        lambda: heartbeat(store, run_id, now=1012.0, fence=stale),
        lambda: add_event(store, run_id, "note", "stale", fence=stale),
        lambda: finish_run(store, run_id, "finished", fence=stale),
        lambda: start_run(store, run_id, fence=stale),
    ):
        with pytest.raises(AttemptSuperseded, match=f"attempt 1 of job {job_id} was superseded"):
            write()
    assert _points(store, run_id) == 1
    assert [e.message for e in list_events(store, run_id) if e.kind == "note"] == [
        "attempt 1 is alive"
    ]
    assert get_run(store, run_id).status == "queued"  # the retry waits; no stale status
    # attempt 2 runs: its fence holds, attempt 1's still does not
    got = queue.claim(store, "w2", lease_s=10.0, now=1013.0)
    assert got is not None and got[0].attempt == 2
    write_points(store, [(run_id, key, 1, 0, 3.0)], fence=AttemptFence(job_id, 2))
    with pytest.raises(AttemptSuperseded, match="the job is at attempt 2 now"):
        write_points(store, [(run_id, key, 2, 0, 4.0)], fence=stale)
    write_points(store, [(run_id, key, 9, 0, 5.0)])  # unfenced writes are not checked
    assert _points(store, run_id) == 3


def test_a_superseded_writer_stops_with_a_clear_error_and_spills_nothing(
    store: Store, tmp_path: Path
) -> None:
    job_id, run_id = _claimed_job(store)
    sink = SqlSink(store, fence=AttemptFence(job_id, 1))
    info = get_run(store, run_id)
    run = Run(sink, info, job_id=job_id, system_interval=None, spill_dir=tmp_path / "spill")
    run.log({"loss": 1.0}, step=0)
    run.flush()
    queue.reap_expired_leases(store, now=2000.0)  # the job ends crashed: no retry
    run.log({"loss": 2.0}, step=1)
    with pytest.raises(WriterError, match="was superseded") as caught:
        run.flush()
    assert isinstance(caught.value.__cause__, AttemptSuperseded)
    with pytest.raises(WriterError), warnings.catch_warnings():
        warnings.simplefilter("error")  # no record is "set aside": nothing is bisected
        run.log({"loss": 3.0}, step=2)
    with pytest.raises((WriterError, AttemptSuperseded)):
        run.finish()
    assert [p.step for p in metric_history(store, run_id, "loss")] == [0]
    assert not list((tmp_path / "spill").glob("*"))  # refused points are not kept to replay
    assert get_run(store, run_id).status == "crashed"  # the reaper's verdict stands


def _reap_alone(store: Store) -> list[int]:
    return [job_id for job_id, _ in queue.reap_expired_leases(store)]


def _housekeeping_pass(store: Store) -> list[int]:  # the scheduler's and workers' reaper
    options = HousekeepingOptions(schedules=False, pending_reasons=False)
    return [job_id for job_id, _ in housekeeping_once(store, options).crashed_jobs]


@pytest.mark.parametrize("reap", [_reap_alone, _housekeeping_pass], ids=["store", "housekeeping"])
def test_the_takeover_is_stamped_once_the_reaper_holds_the_job(
    store: Store, reap: Callable[[Store], list[int]]
) -> None:
    """A write transaction that commits while the reaper waits for the job's row commits
    before the takeover, so the crashed attempt's end is stamped after it, not when the
    reaper began its pass (its points would otherwise look logged after the attempt ended).
    """
    job_id, _ = _claimed_job(store)  # its lease expired at t=1010, long ago
    holding, committed = threading.Event(), []

    def hold_the_jobs_for_a_while() -> None:
        with write_begin(store.engine) as conn:  # SQLite: BEGIN IMMEDIATE holds every writer
            if conn.dialect.name == "postgresql":  # the reaper's FOR UPDATE waits for it
                conn.exec_driver_sql("LOCK TABLE jobs IN EXCLUSIVE MODE")
            holding.set()
            time.sleep(0.5)
            committed.append(time.time())

    blocker = threading.Thread(target=hold_the_jobs_for_a_while)
    blocker.start()
    assert holding.wait(10)
    assert reap(store) == [job_id]
    blocker.join()
    ended = store_jobs.attempts(store, job_id)[0].ended_at
    assert ended is not None and ended >= committed[0]


@pytest.mark.slow
def test_frozen_workers_job_writes_nothing_after_the_takeover(
    store: Store, procs: Procs, out: Path
) -> None:
    job = queue.enqueue(store, JobSpec(argv=script("fenced.py", str(out)), max_retries=1))
    procs.scheduler()
    old = procs.worker("--gpus", "none", "--lease-seconds", "2", "--no-housekeeping",
                       "--name", "old")  # fmt: skip
    first = wait_for(lambda: read_json(out / "started-1.json"), 60, "attempt 1 to start")
    wait_for(lambda: metric_history(store, job.run_id, "a1/x"), 30,
             "attempt 1 to store some points")  # fmt: skip
    stop_between_transactions(old, store, job.id)
    wait_for(lambda: store_jobs.get_job(store, job.id).status == "queued", 30,
             "the reaper to crash and requeue the frozen worker's job")  # fmt: skip
    taken_over_ms = store_jobs.attempts(store, job.id)[0].ended_at * 1000
    new = procs.worker("--gpus", "none", "--lease-seconds", "30", "--no-housekeeping",
                       "--name", "new")  # fmt: skip
    wait_for(lambda: read_json(out / "started-2.json"), 60, "attempt 2 to start")
    # attempt 1 runs on (its worker is frozen) until the store refuses it; then it stops
    refused = wait_for(
        lambda: (out / "refused-1.txt").exists() and (out / "refused-1.txt").read_text(),
        30,
        "attempt 1 to stop on the store's refusal",
    )
    assert f"attempt 1 of job {job.id} was superseded" in refused
    wait_for(lambda: not alive(first["pid"]), 20, "attempt 1's process to exit by itself")
    late = [
        p for p in metric_history(store, job.run_id, "a1/x") if p.wall_time * 1000 > taken_over_ms
    ]
    assert late == []  # 0 points of the stale attempt after the takeover
    old.signal(signal.SIGCONT)
    wait_for(lambda: "lease lost" in old.output(), 30, "the old worker to report the lost lease")
    (out / "release").write_text("go")
    wait_for(lambda: store_jobs.get_job(store, job.id).status == "succeeded", 60,
             "attempt 2 to end")  # fmt: skip
    run = get_run(store, job.run_id)
    assert run.status == "finished" and metric_history(store, job.run_id, "a2/x")
    assert new.popen.poll() is None
