"""The dispatcher's parts that need no Slurm: adoption by lease token, the pending reason of a
claimed job, putting back a claim the scheduler could not take, where a restarted dispatcher
resumes reading output, UTF-8-safe file following."""

from __future__ import annotations

import time
from pathlib import Path

from tracker.entities import ClaimedJob, JobSpec
from tracker.runner.dispatcher import OutputFile
from tracker.store import Store, logs, queue, workers
from tracker.store import jobs as store_jobs
from tracker.store.events import list_events
from tracker.store.runs import get_run


def test_adopt_moves_the_lease_only_with_the_current_token(store: Store) -> None:
    job = queue.enqueue(store, JobSpec(argv=["python", "t.py"]))
    got = queue.claim(store, "old", lease_s=5, now=100.0)
    assert got is not None
    claim = got[0]
    assert queue.adopt(store, job.id, "not-the-token", "new", lease_s=60) is None
    adopted = queue.adopt(store, job.id, claim.lease_token, "new", lease_s=60, now=200.0)
    assert adopted is not None
    assert (adopted.attempt, adopted.run_id, adopted.lease_token) == (
        1,
        job.run_id,
        claim.lease_token,
    )
    stored = store_jobs.get_job(store, job.id)
    assert (stored.lease_owner, stored.lease_expires_at) == ("new", 260.0)
    # once the attempt ended, its token adopts nothing
    assert queue.finish(store, adopted, exit_code=0, failure=None) is not None
    assert queue.adopt(store, job.id, claim.lease_token, "newer", lease_s=60) is None


def test_pending_reason_of_a_claimed_job_is_fenced(store: Store) -> None:
    job = queue.enqueue(store, JobSpec(argv=["python", "t.py"]))
    got = queue.claim(store, "d", lease_s=30)
    assert got is not None
    claim = got[0]
    assert queue.set_pending_reason(store, claim, "slurm: Resources")
    assert store_jobs.get_job(store, job.id).pending_reason == "slurm: Resources"
    assert queue.set_pending_reason(store, claim, None)
    assert store_jobs.get_job(store, job.id).pending_reason is None
    stale = type(claim)(job=claim.job, lease_token="stale", attempt=1, run_id=claim.run_id)
    assert not queue.set_pending_reason(store, stale, "slurm: Priority")
    assert store_jobs.get_job(store, job.id).pending_reason is None


def test_release_puts_a_claim_back_as_if_it_never_started(store: Store) -> None:
    job = queue.enqueue(store, JobSpec(argv=["python", "t.py"]))
    got = queue.claim(store, "d", lease_s=30, now=100.0)
    assert got is not None
    claim = got[0]
    stale = type(claim)(job=claim.job, lease_token="stale", attempt=1, run_id=claim.run_id)
    assert not queue.release(store, stale, reason="x", not_before=0.0)
    assert store_jobs.get_job(store, job.id).status == "running"  # the wrong token wrote nothing

    reason = "slurm could not be reached, trying again at 00:01:50: connect failure"
    assert queue.release(store, claim, reason=reason, not_before=110.0, now=101.0)
    back = store_jobs.get_job(store, job.id)
    assert (back.status, back.attempt, back.pending_reason) == ("queued", 0, reason)
    assert (back.lease_owner, back.lease_expires_at, back.started_at) == (None, None, None)
    assert store_jobs.attempts(store, job.id) == []  # the attempt never ran
    run = get_run(store, job.run_id)
    assert (run.status, run.started_at) == ("queued", None)
    events = [e for e in list_events(store, job.run_id) if e.kind == "job_attempt"]
    assert [e.message for e in events] == [f"attempt 1 was not started: {reason}"]
    assert not queue.release(store, claim, reason=reason, not_before=0.0)  # the token is spent

    assert queue.claim(store, "d", lease_s=30, now=109.0) is None  # not before 110
    again = queue.claim(store, "d", lease_s=30, now=110.0)
    assert again is not None and again[0].attempt == 1 and again[0].run_id == job.run_id
    assert store_jobs.get_job(store, job.id).pending_reason is None
    assert [a.attempt for a in store_jobs.attempts(store, job.id)] == [1]


def test_stored_bytes_counts_utf8_bytes_per_stream_and_attempt(store: Store) -> None:
    queue.enqueue(store, JobSpec(argv=["python", "t.py"]))
    got = queue.claim(store, "d", lease_s=30)
    assert got is not None
    claim = got[0]
    lines = [("stdout", 1.0, "é✓\n"), ("stderr", 1.0, "ab\n"), ("stdout", 2.0, "x\n")]
    assert logs.append(store, claim, lines)
    assert logs.stored_bytes(store, claim.job.id, 1) == {"stdout": 8, "stderr": 3}
    assert logs.stored_bytes(store, claim.job.id, 2) == {}


def test_output_file_keeps_split_characters_and_partial_lines(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    data = "first ∑ line\nsecond é".encode()
    split = data.index("∑".encode()) + 1  # inside the 3-byte character
    path.write_bytes(data[:split])
    f = OutputFile(str(path), "stdout")
    assert f.read() == []  # no complete line yet
    path.write_bytes(data)
    assert [t for _, _, t in f.read()] == ["first ∑ line\n"]
    assert f.read() == []  # "second é" has no newline yet
    assert [t for _, _, t in f.read(final=True)] == ["second é"]
    assert f.offset == len(data)
    # a restarted dispatcher resumes at the bytes already stored
    again = OutputFile(str(path), "stdout", offset=len("first ∑ line\n".encode()))
    assert [t for _, _, t in again.read(final=True)] == ["second é"]


def test_output_file_missing_is_empty_and_unread_lines_come_back(tmp_path: Path) -> None:
    path = tmp_path / "later.txt"
    f = OutputFile(str(path), "stderr")
    assert f.read() == [] and f.offset == 0
    path.write_text("a\nb\n")
    got = f.read()
    assert [t for _, _, t in got] == ["a\n", "b\n"]
    f.unread(got)  # the store was down: read again next time
    assert [t for _, _, t in f.read()] == ["a\n", "b\n"]


def test_adopt_leaves_a_live_owners_attempt_alone(store: Store) -> None:
    job = queue.enqueue(store, JobSpec(argv=["python", "t.py"]))
    workers.register_worker(store, "live", host="h", pid=1, gpus=[], max_jobs=1, executor="slurm")
    got = queue.claim(store, "live", lease_s=60, now=100.0)
    assert got is not None
    token = got[0].lease_token
    # renewed a moment ago (expires at 160): another dispatcher must not take it over
    answer = queue.adopt(store, job.id, token, "other", lease_s=60, now=110.0)
    assert answer == queue.LiveOwner("live", 130.0)  # asked again within a third of a lease
    assert store_jobs.get_job(store, job.id).lease_owner == "live"
    # the owner's own restart under the same id may take it back at once
    assert isinstance(queue.adopt(store, job.id, token, "live", lease_s=60, now=111.0), ClaimedJob)
    # a whole renewal missed (less than a third of the lease left): the owner is gone
    late = queue.adopt(store, job.id, token, "other", lease_s=60, now=111.0 + 41.0)
    assert isinstance(late, ClaimedJob) and late.attempt == 1
    assert store_jobs.get_job(store, job.id).lease_owner == "other"


def test_adopt_takes_over_at_once_from_an_owner_that_said_it_stopped(store: Store) -> None:
    job = queue.enqueue(store, JobSpec(argv=["python", "t.py"]))
    workers.register_worker(store, "old", host="h", pid=1, gpus=[], max_jobs=1, executor="slurm")
    got = queue.claim(store, "old", lease_s=300, now=time.time())
    assert got is not None
    assert isinstance(
        queue.adopt(store, job.id, got[0].lease_token, "new", lease_s=300), queue.LiveOwner
    )
    workers.heartbeat_worker(store, "old", status="stopped")
    adopted = queue.adopt(store, job.id, got[0].lease_token, "new", lease_s=300)
    assert isinstance(adopted, ClaimedJob)
    assert store_jobs.get_job(store, job.id).lease_owner == "new"
