"""The run page's numbers from the API: "attempt 2/2" after a requeue by hand (never an attempt
above its total), and a Duration that counts the time the attempts ran, not the waits in the
queue before and between them (the demo showed 2m 50s for 10 s of training)."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tracker.entities import Failure, JobAttemptInfo, JobSpec, RunInfo
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.store.runs import create_run, finish_run
from tracker.web.core.times import RunningTime, running_time

T0 = 1_800_000_000.0


def claim(store: Store, now: float) -> Any:
    claimed = queue.claim(store, "w1", lease_s=3600, now=now)
    assert claimed is not None
    return claimed[0]


def test_a_requeued_job_reads_attempt_2_of_2_and_its_run_time_is_its_attempts(
    client: FlaskClient, store: Store
) -> None:
    job = queue.enqueue(store, JobSpec(["python", "train.py"], "digits"), now=T0)
    first = claim(store, T0 + 150)  # 150 s in the queue
    queue.finish(store, first, exit_code=1, failure=Failure("exit_nonzero", "1"), now=T0 + 155)
    store_jobs.requeue(store, job.id, reason="requeued by hand")
    waiting = client.get(f"/api/v1/runs/{job.run_id}").json
    assert (waiting["job"]["attempt"], waiting["job"]["attempts_allowed"]) == (1, 2)
    second = claim(store, T0 + 160)
    running = client.get(f"/api/v1/runs/{job.run_id}").json
    assert running["running_time"] == {"seconds": 5.0, "since": T0 + 160, "attempts": 2}
    queue.finish(store, second, exit_code=0, failure=None, now=T0 + 170)
    doc = client.get(f"/api/v1/runs/{job.run_id}").json
    assert (doc["job"]["attempt"], doc["job"]["attempts_allowed"]) == (2, 2)
    assert doc["running_time"] == {"seconds": 15.0, "since": None, "attempts": 2}
    assert doc["duration"] == 20.0  # the span from the first start: what the page showed
    listed = client.get(f"/api/v1/jobs/{job.id}").json
    assert listed["attempts_allowed"] == 2


def test_attempts_allowed_is_the_retries_until_a_requeue(client: FlaskClient, store: Store) -> None:
    job = queue.enqueue(store, JobSpec(["python", "train.py"], "digits", max_retries=2), now=T0)
    assert client.get(f"/api/v1/jobs/{job.id}").json["attempts_allowed"] == 3
    claim(store, T0 + 1)
    doc = client.get(f"/api/v1/jobs/{job.id}").json
    assert (doc["attempt"], doc["attempts_allowed"]) == (1, 3)


def test_a_run_no_job_started_ran_from_its_start_to_its_end(
    client: FlaskClient, store: Store
) -> None:
    run = create_run(store, "digits", "by-hand", {}, [], now=T0)
    finish_run(store, run.id, "finished", now=T0 + 42)
    doc = client.get(f"/api/v1/runs/{run.id}").json
    assert doc["job"] is None
    assert doc["running_time"]["seconds"] == pytest.approx(doc["duration"])
    assert doc["running_time"]["since"] is None and doc["running_time"]["attempts"] == 0


def _run(status: str, started: float | None, ended: float | None) -> RunInfo:
    return RunInfo(
        id=1, project="p", name="r", status=status, config={}, tags=[], created_at=T0,
        started_at=started, ended_at=ended, heartbeat_at=ended,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("status", "ended", "spans", "expected"),
    [
        # a crashed attempt the reaper never stamped ends where the next one starts
        ("finished", T0 + 300, [(T0, None), (T0 + 200, T0 + 300)], RunningTime(300.0, None, 2)),
        # the last attempt without an end, in a run that ended: up to the run's end
        ("crashed", T0 + 50, [(T0 + 10, None)], RunningTime(40.0, None, 1)),
        # running: finished attempts summed, the current one open
        ("running", None, [(T0, T0 + 5), (T0 + 100, None)], RunningTime(5.0, T0 + 100, 2)),
    ],
)
def test_running_time_rules(
    status: str, ended: float | None, spans: list[tuple[float, float | None]], expected: Any
) -> None:
    attempts = [
        JobAttemptInfo(1, i + 1, "w", "failed", start, end, None, None, None, None)
        for i, (start, end) in enumerate(spans)
    ]
    assert running_time(_run(status, spans[0][0], ended), attempts) == expected
