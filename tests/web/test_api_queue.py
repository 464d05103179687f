"""API tests for jobs, workers and schedules. The dashboard writes through the same store
functions as the CLI and the worker (enqueue, cancel, schedules), and the rows it writes are
read back by the worker's claim and the housekeeping's fire_due, so both sides agree."""

from __future__ import annotations

import time
from typing import Any

from flask.testing import FlaskClient

from tests.support.web import envelope
from tracker.entities import GpuDevice, JobSpec
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.store import schedules as store_schedules
from tracker.store import workers as store_workers
from tracker.store.runs import get_run


def runner_job(store: Store, **kw: Any) -> Any:
    spec = JobSpec(argv=["python", "train.py", "--fast"], project="digits", **kw)
    return queue.enqueue(store, spec)


def test_jobs_list_with_queue_positions_and_counts(client: FlaskClient, store: Store) -> None:
    low = runner_job(store, priority=0)
    high = runner_job(store, priority=10)
    other = runner_job(store, priority=0)
    doc = client.get("/api/v1/jobs").json
    assert [j["id"] for j in doc["jobs"]] == [other.id, high.id, low.id]  # newest first
    positions = {j["id"]: j["position"] for j in doc["jobs"]}
    assert positions == {high.id: 1, low.id: 2, other.id: 3}  # the order a worker claims
    assert doc["total"] == 3 and doc["counts"] == {"queued": 3}
    assert client.get("/api/v1/jobs?status=running").json["jobs"] == []
    assert envelope(client.get("/api/v1/jobs?status=bogus"))["field"] == "status"


def test_job_detail_hides_env_values(client: FlaskClient, store: Store) -> None:
    job = runner_job(store, env={"API_KEY": "hidden-value"}, config={"lr": 0.1})
    doc = client.get(f"/api/v1/jobs/{job.id}").json
    assert doc["env_keys"] == ["API_KEY"] and "hidden-value" not in str(doc)
    assert (doc["status"], doc["config"], doc["attempts"]) == ("queued", {"lr": 0.1}, [])
    assert client.get("/api/v1/jobs/999").status_code == 404


def test_cancel_queued_and_running_jobs_like_the_runner(client: FlaskClient, store: Store) -> None:
    queued = runner_job(store)
    running = runner_job(store)
    claimed, _ = queue.claim(store, "w1", lease_s=30)
    assert claimed.job.id == queued.id  # oldest first
    first = client.post(f"/api/v1/jobs/{running.id}/cancel", json={}).json
    assert first == {"job_id": running.id, "result": "cancelled", "outcome": "cancelled",
                     "status": "cancelled"}  # fmt: skip
    assert get_run(store, running.run_id).status == "killed"
    second = client.post(f"/api/v1/jobs/{queued.id}/cancel", json={}).json
    assert second["result"] == "cancel_requested"
    assert queue.poll(store, [claimed])[queued.id].cancel_requested  # the worker sees it
    again = client.post(f"/api/v1/jobs/{running.id}/cancel", json={}).json
    assert again["result"] == "cancelled"
    assert (again["outcome"], again["status"]) == ("unchanged", "cancelled")  # not a new cancel
    assert client.post("/api/v1/jobs/999/cancel", json={}).status_code == 404


def test_clone_job_with_edited_config_is_claimed_by_the_runner(
    client: FlaskClient, store: Store
) -> None:
    source = runner_job(store, config={"lr": 0.1, "model": {"width": 32}}, gpus=0, max_retries=2)
    response = client.post(
        f"/api/v1/jobs/{source.id}/clone", json={"config": {"lr": 0.01, "model": {"width": 64}}}
    )
    assert response.status_code == 201
    (new_id,) = response.json["job_ids"]
    got, _ = queue.claim(store, "w1", lease_s=30)
    assert got.job.id == source.id
    got, _ = queue.claim(store, "w1", lease_s=30)
    job = got.job
    assert job.id == new_id and job.parent_job_id == source.id
    assert (job.argv, job.config, job.max_retries) == (
        ["python", "train.py", "--fast"],
        {"lr": 0.01, "model": {"width": 64}},
        2,
    )
    run = get_run(store, got.run_id)
    assert (run.status, run.project, run.name) == ("running", "digits", f"train-job{new_id}")


def test_clone_validates_config_grid_and_priority(client: FlaskClient, store: Store) -> None:
    source = runner_job(store)
    cases = [
        ({"config": [1]}, "config"),
        ({"config": {"x": {"y": object.__name__}}, "grid": {"a": []}}, "grid"),
        ({"grid": {"a": list(range(40)), "b": list(range(40))}}, "grid"),  # 1600 > 1000
        ({"priority": "high"}, "priority"),
        ({"grid": {"a..b": [1]}}, "grid"),
    ]
    for body, field in cases:
        response = client.post(f"/api/v1/jobs/{source.id}/clone", json=body)
        assert response.status_code == 400, body
        assert envelope(response)["field"] == field
    assert len(store_jobs.list_jobs(store)) == 1
    grid = client.post(f"/api/v1/jobs/{source.id}/clone", json={"grid": {"lr": [1, 2, 3]}})
    assert len(grid.json["job_ids"]) == 3


def test_clone_has_the_grid_cap_of_tracker_sweep(client: FlaskClient, store: Store) -> None:
    """One cap (MAX_CONFIGS) for `tracker sweep` and the dashboard; it was 256 here."""
    from tracker.rules.sweep import MAX_CONFIGS

    source = runner_job(store)
    grid = {"a": list(range(20)), "b": list(range(MAX_CONFIGS // 20))}
    response = client.post(f"/api/v1/jobs/{source.id}/clone", json={"grid": grid})
    assert response.status_code == 201 and len(response.json["job_ids"]) == MAX_CONFIGS
    grid["c"] = [1, 2]
    response = client.post(f"/api/v1/jobs/{source.id}/clone", json={"grid": grid})
    assert (
        envelope(response)["field"] == "grid" and str(MAX_CONFIGS) in envelope(response)["message"]
    )


def test_clone_rejects_what_tracker_submit_rejects(client: FlaskClient, store: Store) -> None:
    """Every enqueue passes check_spec: the dashboard's clone used to skip it, so a job whose
    settings `tracker submit` refuses (here: a reserved env name written by an older version,
    too many GPUs, a bad timeout) could be cloned back into the queue."""
    import sqlalchemy as sa

    from tracker.store import models as m
    from tracker.store.engine import write_begin

    source = runner_job(store)
    bad = [
        ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "env"),
        ({"resources": {"gpus": 5000}}, "gpus"),
        ({"timeout_s": -1.0}, "timeout"),
    ]
    for values, field in bad:
        with write_begin(store.engine) as conn:
            conn.execute(sa.update(m.JobRow).where(m.JobRow.id == source.id).values(**values))
        response = client.post(f"/api/v1/jobs/{source.id}/clone", json={})
        assert response.status_code == 400, values
        assert envelope(response)["field"] == field, values
        with write_begin(store.engine) as conn:
            conn.execute(
                sa.update(m.JobRow)
                .where(m.JobRow.id == source.id)
                .values(env={}, resources={"gpus": 0}, timeout_s=None)
            )
    too_high = client.post(f"/api/v1/jobs/{source.id}/clone", json={"priority": 10**7})
    assert envelope(too_high)["field"] == "priority"
    assert len(store_jobs.list_jobs(store)) == 1


def test_grid_keys_follow_the_one_set_path_rule(client: FlaskClient, store: Store) -> None:
    """A grid key that goes through a value that is not a mapping is refused, as `tracker
    sweep -c` refuses it (the dashboard used to replace the value with a mapping)."""
    source = runner_job(store, config={"model": "resnet", "opt": None})
    crossing = {"grid": {"model.width": [64, 128]}}
    response = client.post(f"/api/v1/jobs/{source.id}/clone", json=crossing)
    assert response.status_code == 400 and envelope(response)["field"] == "grid"
    assert "'model' is 'resnet', not a mapping" in envelope(response)["message"]
    through_none = client.post(f"/api/v1/jobs/{source.id}/clone", json={"grid": {"opt.lr": [0.1]}})
    (new_id,) = through_none.json["job_ids"]
    assert store_jobs.get_job(store, new_id).config == {"model": "resnet", "opt": {"lr": 0.1}}


def test_workers_list(client: FlaskClient, store: Store) -> None:
    store_workers.register_worker(
        store, "host-a:1", host="host-a", pid=1, gpus=[GpuDevice(0, "A100", 80 << 30)], max_jobs=2
    )
    store_workers.register_worker(
        store, "host-b:2", host="host-b", pid=2, gpus=[], max_jobs=1, now=time.time() - 3600
    )
    job = runner_job(store)
    queue.claim(store, "host-a:1", lease_s=30)
    workers = {w["id"]: w for w in client.get("/api/v1/workers").json["workers"]}
    assert workers["host-a:1"]["status"] == "running"
    assert workers["host-a:1"]["running_jobs"] == [job.id]
    assert workers["host-a:1"]["gpus"][0]["name"] == "A100"
    assert workers["host-b:2"]["status"] == "lost"


def test_the_cli_and_the_api_list_the_same_workers(client: FlaskClient, store: Store) -> None:
    """`tracker workers ls` used to hide lost workers that the API showed."""
    import json

    from click.testing import CliRunner

    from tracker.cli import main

    store_workers.register_worker(store, "live", host="a", pid=1, gpus=[], max_jobs=1)
    store_workers.register_worker(
        store, "gone", host="b", pid=2, gpus=[], max_jobs=1, now=time.time() - 3600
    )
    api = {w["id"]: w["status"] for w in client.get("/api/v1/workers").json["workers"]}
    env = {"TRACKER_URI": store.uri}
    run = CliRunner().invoke(main, ["workers", "ls", "--json"], env=env)
    assert run.exit_code == 0, run.output
    cli = {w["id"]: w["status"] for w in json.loads(run.output)}
    assert cli == api == {"live": "running", "gone": "lost"}
    live = CliRunner().invoke(main, ["workers", "ls", "--json", "--live"], env=env)
    assert [w["id"] for w in json.loads(live.output)] == ["live"]


def test_schedules_add_pause_delete_and_the_runner_fires_them(
    client: FlaskClient, store: Store
) -> None:
    source = runner_job(store, config={"lr": 0.1})
    response = client.post(
        "/api/v1/schedules",
        json={"job_id": source.id, "cron": "0 3 * * 1-5", "config": {"lr": 0.5}, "name": "nightly"},
    )
    assert response.status_code == 201, response.json
    sched = response.json
    assert (sched["name"], sched["cron"], sched["paused"]) == ("nightly", "0 3 * * 1-5", False)
    assert sched["next_fire_at"] > time.time()
    (runner_view,) = store_schedules.list_schedules(store)
    assert runner_view.next_fire_at == sched["next_fire_at"]  # both read the cron alike
    paused = client.patch(f"/api/v1/schedules/{sched['id']}", json={"paused": True}).json
    assert paused["paused"] is True and paused["next_fire_at"] is None
    client.patch(f"/api/v1/schedules/{sched['id']}", json={"paused": False})
    fired = store_schedules.fire_due(store, now=sched["next_fire_at"] + 1)
    assert [f[0] for f in fired] == [sched["id"]]
    job = store_jobs.get_job(store, fired[0][2])
    assert (job.argv, job.config, job.schedule_id) == (source.argv, {"lr": 0.5}, sched["id"])
    listed = client.get("/api/v1/schedules").json["schedules"]
    assert [s["id"] for s in listed] == [sched["id"]]
    assert client.delete(f"/api/v1/schedules/{sched['id']}", json={}).json["deleted"] is True
    assert client.get("/api/v1/schedules").json["schedules"] == []
    assert client.delete(f"/api/v1/schedules/{sched['id']}", json={}).status_code == 404


def test_bad_schedules_are_refused(client: FlaskClient, store: Store) -> None:
    source = runner_job(store)
    cases = [
        ({"job_id": source.id, "cron": "61 * * * *"}, "cron"),
        ({"job_id": source.id, "cron": "* * *"}, "cron"),
        ({"job_id": source.id, "cron": "0 3 * * *", "timezone": "Mars/Base"}, "timezone"),
        ({"cron": "0 3 * * *"}, "job_id"),
        ({"job_id": source.id, "run_id": 1, "cron": "0 3 * * *"}, "job_id"),
        ({"job_id": source.id}, "cron"),
    ]
    for body, field in cases:
        response = client.post("/api/v1/schedules", json=body)
        assert response.status_code == 400, body
        assert envelope(response)["field"] == field, body
    assert (
        client.post("/api/v1/schedules", json={"job_id": 999, "cron": "* * * * *"}).status_code
        == 404
    )
    assert store_schedules.list_schedules(store) == []
    assert (
        envelope(client.patch("/api/v1/schedules/1", json={"paused": "yes"}))["field"] == "paused"
    )


def test_the_fail_on_policy_is_shown_copied_and_edited(client: FlaskClient, store: Store) -> None:
    """A job's ``fail_on`` (which diagnoses fail an exit 0) is in the job object; a clone or
    a schedule keeps it unless the body changes it, by the rule of ``tracker submit``."""
    source = runner_job(store, fail_on="Divergence, memory_growth")
    doc = client.get(f"/api/v1/jobs/{source.id}").json
    assert doc["fail_on"] == "divergence,memory_growth"  # stored canonical
    assert client.get("/api/v1/jobs").json["jobs"][0]["fail_on"] == "divergence,memory_growth"
    (kept,) = client.post(f"/api/v1/jobs/{source.id}/clone", json={}).json["job_ids"]
    edit = client.post(f"/api/v1/jobs/{source.id}/clone", json={"fail_on": "none"})
    (edited,) = edit.json["job_ids"]
    assert client.get(f"/api/v1/jobs/{kept}").json["fail_on"] == "divergence,memory_growth"
    assert client.get(f"/api/v1/jobs/{edited}").json["fail_on"] == "none"
    from_run = client.post(
        f"/api/v1/runs/{source.run_id}/clone", json={"fail_on": "errors,amp_scale_collapse"}
    )
    (copied,) = from_run.json["job_ids"]
    assert store_jobs.get_job(store, copied).fail_on == "errors,amp_scale_collapse"
    for body in ({"fail_on": "divergense"}, {"fail_on": ["errors"]}, {"fail_on": ""}):
        response = client.post(f"/api/v1/jobs/{source.id}/clone", json=body)
        assert response.status_code == 400, body
        error = envelope(response)
        assert (error["code"], error["field"]) == ("invalid_fail_on", "fail_on"), error
    bad = envelope(client.post(f"/api/v1/jobs/{source.id}/clone", json={"fail_on": "divergense"}))
    assert "unknown diagnosis kind 'divergense' (did you mean divergence?)" in bad["message"]
    scheduled = client.post(
        "/api/v1/schedules", json={"job_id": source.id, "cron": "0 3 * * *", "fail_on": "none"}
    )
    assert scheduled.status_code == 201, scheduled.json
    assert scheduled.json["spec"]["fail_on"] == "none"
    fired = store_schedules.fire_due(store, now=time.time() + 2 * 86400)
    assert [store_jobs.get_job(store, job).fail_on for _, _, job in fired] == ["none"]
    assert len(store_jobs.list_jobs(store)) == 5  # the refused clones queued nothing
