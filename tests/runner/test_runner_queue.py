"""The queue's SQL on real SQLite and PostgreSQL: claims, leases, fencing, endings, logs."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest

from tracker.entities import CancelResult, Failure, GpuDevice, JobSpec
from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.runner.pending import explain_pending
from tracker.runner.retry import RetryPolicy
from tracker.store import Store, logs, queue, queue_fast
from tracker.store import jobs as store_jobs
from tracker.store import workers as store_workers
from tracker.store.runs import get_run, list_runs

FAST = RetryPolicy(base_delay_s=0.0, max_delay_s=0.0).next_retry


def spec(name: str = "a", **kw: Any) -> JobSpec:
    return JobSpec(argv=["python", f"{name}.py"], **kw)


def claim_one(store: Store, worker: str = "w1", **kw: Any) -> Any:
    got = queue.claim(store, worker, lease_s=kw.pop("lease_s", 30.0), **kw)
    return None if got is None else got[0]


def test_enqueue_creates_a_queued_run_the_dashboard_can_show(store: Store) -> None:
    job = queue.enqueue(store, spec("train", config={"model": {"width": 64}}, project="digits"))
    assert job.status == "queued" and job.attempt == 0
    run = get_run(store, job.run_id)
    assert (run.status, run.project, run.name) == ("queued", "digits", f"train-job{job.id}")
    assert run.config == {"model": {"width": 64}}
    assert run.command == ["python", "train.py"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"argv": []}, "argv"),
        ({"argv": ["python", "a\0b"]}, "argv"),
        ({"gpus": -1}, "gpus"),
        ({"priority": 1.5}, "priority"),
        ({"timeout_s": 0}, "timeout"),
        ({"max_retries": -2}, "max_retries"),
        ({"env": {"CUDA_VISIBLE_DEVICES": "3"}}, "env"),
        ({"env": {"BAD NAME": "x"}}, "env"),
        ({"config": {"lr": float("nan")}}, "config.lr"),
        ({"project": ""}, "project"),
    ],
)
def test_bad_specs_are_refused_and_nothing_is_stored(
    store: Store, change: dict[str, Any], field: str
) -> None:
    base = {"argv": ["python", "a.py"]}
    with pytest.raises(InvalidInput) as info:
        queue.enqueue_many(store, [spec("ok"), JobSpec(**{**base, **change})])
    assert info.value.field == field
    assert store_jobs.list_jobs(store) == []
    assert list_runs(store) == []


def test_claims_take_highest_priority_first_then_oldest(store: Store) -> None:
    names = [("low-1", 0), ("high-1", 5), ("low-2", 0), ("mid", 2), ("high-2", 5)]
    for name, priority in names:
        queue.enqueue(store, spec(name, priority=priority))
    order = []
    while (c := claim_one(store)) is not None:
        order.append(c.job.argv[1].removesuffix(".py"))
    assert order == ["high-1", "high-2", "mid", "low-1", "low-2"]


def test_claim_respects_gpus_not_before_and_fits(store: Store) -> None:
    now = time.time()
    gpu = queue.enqueue(store, spec("gpu", gpus=2, priority=9))
    later = queue.enqueue(store, spec("later", not_before=now + 60, priority=8))
    cpu = queue.enqueue(store, spec("cpu"))
    assert claim_one(store, now=now).job.id == cpu.id  # a CPU-only worker skips the GPU job
    assert claim_one(store, now=now) is None
    assert claim_one(store, max_gpus=2, fits=lambda r: None, now=now) is None
    got = queue.claim(store, "w", lease_s=5, max_gpus=2, fits=lambda r: (3, 1), now=now)
    assert got is not None and got[0].job.id == gpu.id and got[1] == (3, 1)
    assert claim_one(store, now=now + 61).job.id == later.id


def test_claim_starts_an_attempt_and_the_run(store: Store) -> None:
    job = queue.enqueue(store, spec())
    c = claim_one(store, "w7", host="gpu-host-3")
    assert (c.attempt, c.run_id) == (1, job.run_id)
    stored = store_jobs.get_job(store, job.id)
    assert (stored.status, stored.lease_owner, stored.attempt) == ("running", "w7", 1)
    assert [a.status for a in store_jobs.attempts(store, job.id)] == ["running"]
    run = get_run(store, job.run_id)
    assert (run.status, run.host) == ("running", "gpu-host-3")


def test_concurrent_claimers_take_each_job_exactly_once(store_url: str) -> None:
    setup = Store(store_url)
    queue.enqueue_many(setup, [spec(str(i)) for i in range(120)])
    taken: list[list[int]] = [[] for _ in range(6)]
    errors: list[BaseException] = []

    def claimer(n: int) -> None:
        own = Store(store_url)
        try:
            while (c := claim_one(own, f"w{n}")) is not None:
                taken[n].append(c.job.id)
                queue.finish(own, c, exit_code=0, failure=None)
        except BaseException as exc:  # surfaced below: a lock error must fail the test
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    every = [j for ids in taken for j in ids]
    assert sorted(every) == list(range(1, 121))
    assert store_jobs.count_jobs(setup) == {"succeeded": 120}


def test_a_lost_lease_fences_every_write(store: Store) -> None:
    job = queue.enqueue(store, spec(max_retries=1))
    old = claim_one(store, "old", lease_s=1.0)
    later = time.time() + 2
    swept = queue.reap_expired_leases(store, now=later, retry=FAST)
    assert swept == [(job.id, "queued")]  # crashed, retried at once
    new = claim_one(store, "new", now=later)
    before = store_jobs.get_job(store, job.id)
    assert queue.renew(store, [old, new], lease_s=30, now=later) == {job.id}  # only the old one
    assert queue.finish(store, old, exit_code=0, failure=None) is None
    assert logs.append(store, old, [("stdout", time.time(), "stale\n")]) is False
    assert queue.set_resume_checkpoint(store, old, "/x.pt") is False
    assert queue.poll(store, [old])[job.id].held is False
    after = store_jobs.get_job(store, job.id)
    assert (after.status, after.lease_owner, after.attempt) == ("running", "new", 2)
    assert after.lease_expires_at >= before.lease_expires_at  # renewed by its holder only
    assert logs.logs_after(store, job.id) == []
    assert [a.status for a in store_jobs.attempts(store, job.id)] == ["crashed", "running"]


@pytest.mark.parametrize(
    ("max_retries", "cancel", "status", "run_status"),
    [(0, False, "crashed", "crashed"), (1, False, "queued", "queued"),
     (1, True, "cancelled", "killed")],
)  # fmt: skip
def test_the_reaper_ends_expired_leases(
    store: Store, max_retries: int, cancel: bool, status: str, run_status: str
) -> None:
    job = queue.enqueue(store, spec(max_retries=max_retries))
    c = claim_one(store, "dead-worker", lease_s=1.0)
    if cancel:
        assert store_jobs.cancel(store, job.id).outcome == "cancel_requested"
    assert queue.reap_expired_leases(store, now=time.time(), retry=FAST) == []  # not expired yet
    assert queue.reap_expired_leases(store, now=time.time() + 5, retry=FAST) == [(job.id, status)]
    after = store_jobs.get_job(store, job.id)
    assert after.status == status and after.lease_owner is None
    assert store_jobs.attempts(store, job.id)[0].status in ("crashed", "cancelled")
    assert get_run(store, c.run_id).status == run_status
    assert "dead-worker" in (after.failure_hint or "")


def test_finish_maps_failures_to_states_and_retries(store: Store) -> None:
    cases = [
        (None, 0, {}, "succeeded", "finished"),
        (Failure("python_exception", "ValueError: x"), 1, {"max_retries": 2}, "failed",
         "failed"),
        (Failure("python_exception", "ValueError: x"), 1,
         {"max_retries": 2, "retry_on_failure": True}, "queued", "queued"),
        (Failure("timeout", "too slow"), None, {"max_retries": 1}, "queued", "queued"),
        (Failure("timeout", "too slow"), None, {}, "timed_out", "killed"),
        (Failure("cancelled", "cancelled"), -15, {"max_retries": 3}, "cancelled", "killed"),
        (Failure("killed_by_signal", "SIGKILL"), -9, {"max_retries": 1}, "queued", "queued"),
    ]  # fmt: skip
    for failure, code, options, status, run_status in cases:
        job = queue.enqueue(store, spec(**options))
        c = claim_one(store)
        result = queue.finish(store, c, exit_code=code, failure=failure, retry=FAST)
        assert result is not None and result.status == status, (failure, options)
        stored = store_jobs.get_job(store, job.id)
        assert stored.status == status and stored.exit_code == code
        assert get_run(store, job.run_id).status == run_status
        if status == "queued":
            assert result.retry_at is not None and "retry 2 of" in stored.pending_reason
            store_jobs.cancel(store, job.id)  # out of the way of the next case


def test_cancel_and_requeue(store: Store) -> None:
    queued = queue.enqueue(store, spec("q"))
    running = queue.enqueue(store, spec("r"))
    assert store_jobs.cancel(store, queued.id) == CancelResult("cancelled", "cancelled")
    assert get_run(store, queued.run_id).status == "killed"
    c = claim_one(store)
    assert c.job.id == running.id
    assert store_jobs.cancel(store, running.id) == CancelResult("cancel_requested", "running")
    assert queue.poll(store, [c])[running.id].cancel_requested
    queue.finish(store, c, exit_code=-15, failure=Failure("cancelled", "cancelled"))
    assert store_jobs.cancel(store, running.id) == CancelResult("unchanged", "cancelled")
    with pytest.raises(NotFound):
        store_jobs.cancel(store, 999)
    again = store_jobs.requeue(store, running.id)
    assert (again.status, again.cancel_requested, again.attempt) == ("queued", False, 1)
    with pytest.raises(Conflict):
        store_jobs.requeue(store, running.id)
    assert claim_one(store).attempt == 2


def test_log_chunks_are_grouped_trimmed_and_read_in_order(store: Store) -> None:
    queue.enqueue(store, spec())
    c = claim_one(store)
    budget = logs.load_budget(store, c.job.id, limit=200)
    t = time.time()
    for i in range(40):
        lines = [("stdout", t, f"out line {i:03d}\n"), ("stdout", t, f"more {i:03d}\n"),
                 ("stderr", t, f"err line {i:03d}\n")]  # fmt: skip
        assert logs.append(store, c, lines, budget)
    chunks = logs.logs_after(store, c.job.id)
    assert chunks[0].stream == "meta" and "trimmed" in chunks[0].text
    assert [ch.stream for ch in chunks[-2:]] == ["stdout", "stderr"]
    assert chunks[-2].text == "out line 039\nmore 039\n"
    kept = sum(len(ch.text) for ch in chunks if ch.stream != "meta")
    assert kept <= 200
    assert [ch.id for ch in chunks] == sorted(ch.id for ch in chunks)
    assert len([ch for ch in chunks if ch.stream == "meta"]) == 1
    only_err = logs.logs_after(store, c.job.id, stream="stderr")
    assert {ch.stream for ch in only_err} == {"meta", "stderr"}
    assert logs.logs_after(store, c.job.id, after=chunks[-1].id) == []


def test_pending_reasons_name_what_no_live_worker_has(store: Store) -> None:
    big = queue.enqueue(store, spec("big", gpus=4))
    small = queue.enqueue(store, spec("small", gpus=1, gpu_memory_bytes=80 * 1024**3))
    cpu = queue.enqueue(store, spec("cpu"))
    store_workers.update_pending_reasons(store, explain_pending)
    assert "no live worker" in store_jobs.get_job(store, cpu.id).pending_reason
    store_workers.register_worker(store, "cpu-only", host="h", pid=1, gpus=[], max_jobs=1)
    store_workers.register_worker(
        store, "two-gpus", host="h", pid=2, max_jobs=1,
        gpus=[GpuDevice(0, "A", 40 * 1024**3), GpuDevice(1, "A", 40 * 1024**3)],
    )  # fmt: skip
    store_workers.update_pending_reasons(store, explain_pending)
    assert store_jobs.get_job(store, big.id).pending_reason == (
        "needs 4 GPU(s); the largest live worker (two-gpus) has 2"
    )
    assert "80.0 GiB" in store_jobs.get_job(store, small.id).pending_reason
    assert store_jobs.get_job(store, cpu.id).pending_reason is None
    store_workers.heartbeat_worker(store, "two-gpus", status="stopped")
    store_workers.update_pending_reasons(store, explain_pending)
    assert "CPU-only" in store_jobs.get_job(store, big.id).pending_reason
    assert [w.id for w in store_workers.list_workers(store)] == ["cpu-only"]
    # a live dispatcher takes any job (its cluster has the GPUs): nobody is told otherwise
    store_workers.register_worker(
        store, "slurm-login-1", host="login", pid=3, gpus=[], max_jobs=5, executor="slurm"
    )
    store_workers.update_pending_reasons(store, explain_pending)
    assert [store_jobs.get_job(store, j.id).pending_reason for j in (big, small, cpu)] == [
        None, None, None,
    ]  # fmt: skip
    listed = {w.id: w.executor for w in store_workers.list_workers(store)}
    assert listed == {"cpu-only": "local", "slurm-login-1": "slurm"}
    store_workers.heartbeat_worker(store, "slurm-login-1", status="stopped")
    store_workers.update_pending_reasons(store, explain_pending)
    assert "CPU-only" in store_jobs.get_job(store, big.id).pending_reason


def test_a_job_row_written_without_a_run_gets_one_at_claim(store: Store) -> None:
    import sqlalchemy as sa

    from tracker.store import models as m

    with store.engine.begin() as conn:  # as another writer (e.g. the dashboard) might
        conn.execute(
            sa.insert(m.JobRow).values(
                project="web", status="queued", priority=0, argv=["python", "clone.py"],
                config={"lr": 1}, resources={}, env={}, max_retries=0, attempt=0,
                cancel_requested=False, created_at=time.time(),
            )
        )  # fmt: skip
    c = claim_one(store)
    run = get_run(store, c.run_id)
    assert (run.project, run.name, run.status, run.config) == ("web", "clone-job1", "running",
                                                               {"lr": 1})  # fmt: skip
    assert store_jobs.get_job(store, c.job.id).run_id == run.id


def _rows(store: Store, job_id: int) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """The job, its attempt rows and its run, without the columns two jobs never share."""
    import sqlalchemy as sa

    from tracker.store import models as m

    with store.engine.connect() as conn:
        job = conn.execute(sa.select(m.JobRow).where(m.JobRow.id == job_id)).mappings().one()
        attempts = conn.execute(
            sa.select(m.JobAttemptRow).where(m.JobAttemptRow.job_id == job_id)
        ).mappings()
        run = conn.execute(sa.select(m.RunRow).where(m.RunRow.id == job["run_id"])).mappings().one()
        return _shared(job), [_shared(a) for a in attempts], _shared(run)


def _shared(row: Any) -> dict[str, Any]:
    own = {"id", "job_id", "run_id", "lease_token", "argv", "name", "command"}
    return {k: v for k, v in row.items() if k not in own}


def test_the_prewritten_claim_and_finish_write_what_the_general_path_writes(
    store: Store,
) -> None:
    """Claims without GPU placement and successful ends run as prewritten SQL
    (tracker/store/queue_fast.py); a ``fits`` claim and ``_end_attempt`` are the general path."""
    import sqlalchemy as sa

    from tracker.store import models as m
    from tracker.store.engine import write_begin

    assert queue_fast.supported(store)  # else this machine's SQLite lacks RETURNING
    now = time.time()
    fast_job = queue.enqueue(store, spec("fast"), now=now)
    slow_job = queue.enqueue(store, spec("slow"), now=now)
    fast = claim_one(store, "w1", host="h1", now=now + 1)  # the oldest first
    slow = claim_one(store, "w1", host="h1", now=now + 1, fits=lambda resources: ())
    assert (fast.job.id, slow.job.id) == (fast_job.id, slow_job.id)
    assert fast.job == dataclasses.replace(
        slow.job, id=fast.job.id, argv=fast.job.argv, run_id=fast.run_id
    )
    assert _rows(store, fast.job.id) == _rows(store, slow.job.id)
    assert _rows(store, fast.job.id)[0]["status"] == "running"
    pooled = [store.engine.connect() for _ in range(max(1, store.engine.pool.checkedin()))]
    assert all(c.get_isolation_level() != "AUTOCOMMIT" for c in pooled)  # transactional again
    for c in pooled:
        c.close()

    assert queue.finish(store, fast, exit_code=0, failure=None, now=now + 2).status == "succeeded"
    with write_begin(store.engine) as conn:
        row = conn.execute(
            sa.select(*store_jobs.JOB_COLUMNS).where(m.JobRow.id == slow.job.id).with_for_update()
        ).one()
        queue._end_attempt(conn, row, slow.lease_token, 0, None, FAST, now + 2)
    ended = _rows(store, fast.job.id)
    assert ended == _rows(store, slow.job.id)
    assert (ended[0]["status"], ended[1][0]["status"], ended[2]["status"]) == (
        "succeeded", "succeeded", "finished")  # fmt: skip
    assert queue.finish(store, fast, exit_code=0, failure=None) is None  # fenced: lease ended
