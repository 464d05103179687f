"""``GET /api/v1/jobs/<id>``, the job page's one read: every attempt with the executor and
host that ran it (a Slurm dispatcher's attempt with its Slurm job id, a local worker's), the
job's run, its schedule's name and the jobs cloned from it; an unknown job is a 404 in the
one envelope. The page itself, with a real retried job, is tests/browser/test_job_page.py."""

from __future__ import annotations

from typing import Any

from tracker.entities import Failure, JobSpec
from tracker.store import jobs as store_jobs
from tracker.store import queue, schedules
from tracker.store.clone import clone
from tracker.store.workers import register_worker


def test_attempts_name_their_executor_host_and_slurm_id(app: Any, store: Any) -> None:
    register_worker(store, "login-1:99", host="login-1", pid=99, gpus=[], max_jobs=8,
                    executor="slurm", now=1000.0)  # fmt: skip
    register_worker(store, "gpu-7:12", host="gpu-7", pid=12, gpus=[], max_jobs=1, now=1000.0)
    job = queue.enqueue(store, JobSpec(argv=["python", "train.py"], name="flaky"), now=1000.0)
    first, _ = queue.claim(store, "login-1:99", lease_s=60.0, now=1001.0) or (None, None)
    assert first is not None
    assert queue.set_external_id(store, first, "4242") is True
    queue.finish(store, first, exit_code=None, failure=Failure("node_fail", "node died"),
                 now=1010.0)  # fmt: skip
    store_jobs.requeue(store, job.id)
    second, _ = queue.claim(store, "gpu-7:12", lease_s=60.0, now=1020.0) or (None, None)
    assert second is not None and second.attempt == 2

    doc = app.test_client().get(f"/api/v1/jobs/{job.id}").json
    ran = [(a["attempt"], a["executor"], a["host"], a["worker"], a["external_id"])
           for a in doc["attempts"]]  # fmt: skip
    assert ran == [(1, "slurm", "login-1", "login-1:99", "4242"),
                   (2, "local", "gpu-7", "gpu-7:12", None)]  # fmt: skip
    assert doc["attempts"][0]["failure_class"] == "node_fail"
    assert doc["attempts"][0]["failure_hint"] == "node died"
    assert doc["attempts"][1]["status"] == "running" and doc["attempts"][1]["ended_at"] is None
    assert doc["run"] == {"id": job.run_id, "name": "flaky", "status": "running", "deleted": False}
    assert doc["schedule_name"] is None and doc["children"] == []
    assert doc["external_id"] == "4242"  # the latest attempt that has one


def test_clones_and_the_schedule_are_linked(app: Any, store: Any) -> None:
    parent = queue.enqueue(store, JobSpec(argv=["python", "train.py"], config={"lr": 0.1}))
    copies = clone(store, ("job", parent.id), grid={"lr": [0.01, 0.001]})
    nightly = schedules.add_schedule_from(store, ("job", parent.id), "0 3 * * *", name="nightly")
    fired = queue.enqueue(store, JobSpec(argv=["python", "train.py"], schedule_id=nightly.id))
    client = app.test_client()
    doc = client.get(f"/api/v1/jobs/{parent.id}").json
    assert [c["id"] for c in doc["children"]] == sorted((j.id for j in copies), reverse=True)
    assert {c["status"] for c in doc["children"]} == {"queued"}
    assert all(c["run_id"] is not None for c in doc["children"])
    assert doc["attempts"] == [] and doc["position"] == 1
    assert client.get(f"/api/v1/jobs/{copies[0].id}").json["parent_job_id"] == parent.id
    assert client.get(f"/api/v1/jobs/{fired.id}").json["schedule_name"] == "nightly"


def test_an_unknown_job_is_404_in_the_envelope(app: Any) -> None:
    answer = app.test_client().get("/api/v1/jobs/987654")
    assert answer.status_code == 404
    assert (
        answer.json["error"]["code"] == "not_found" and "987654" in answer.json["error"]["message"]
    )
    page = app.test_client().get("/jobs/987654")  # the page loads, and says so itself
    assert page.status_code == 200 and b'data-job-id="987654"' in page.data
