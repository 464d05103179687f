"""The cluster scheduler's id of an attempt (Slurm's job id, stored by the dispatcher) in
the JSON API: the job, its attempts, the queue listing and the run's job; the real Slurm
path is in tests/runner/test_slurm_dispatcher.py."""

from __future__ import annotations

from typing import Any

from tracker.entities import JobSpec
from tracker.store import queue


def test_the_slurm_job_id_is_shown_with_the_job(app: Any, store: Any) -> None:
    job = queue.enqueue(store, JobSpec(argv=["python", "train.py"]), now=1000.0)
    other = queue.enqueue(store, JobSpec(argv=["python", "other.py"]), now=1000.0)
    claimed, _ = queue.claim(store, "slurm-host-1", lease_s=60.0, now=1001.0) or (None, None)
    assert claimed is not None and claimed.job.id == job.id
    assert queue.set_external_id(store, claimed, "4242") is True
    client = app.test_client()
    one = client.get(f"/api/v1/jobs/{job.id}").json
    assert one["external_id"] == "4242"
    assert [a["external_id"] for a in one["attempts"]] == ["4242"]
    listed = {j["id"]: j["external_id"] for j in client.get("/api/v1/jobs").json["jobs"]}
    assert listed == {job.id: "4242", other.id: None}
    run = client.get(f"/api/v1/runs/{job.run_id}").json
    assert run["job"]["external_id"] == "4242"
    local = client.get(f"/api/v1/jobs/{other.id}").json
    assert local["external_id"] is None and local["attempts"] == []


def test_a_lost_lease_stores_no_id(store: Any) -> None:
    queue.enqueue(store, JobSpec(argv=["true"]), now=1000.0)
    claimed, _ = queue.claim(store, "slurm-a", lease_s=1.0, now=1000.0) or (None, None)
    assert claimed is not None
    queue.reap_expired_leases(store, now=1100.0)  # the lease expired: someone else's now
    assert queue.set_external_id(store, claimed, "1") is False
