"""``/api/v1/sweeps`` (web/views/sweeps.py): an admin makes a sweep that learns from a
submitted job or run (a ``log`` token may only read), bad input is a 400 naming the field,
the trials run through the real queue (claimed, metrics logged, finished, one pruned), and
the detail answers every trial with the params' importance and each trial's learning curve;
stop and resume. Real app on a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.web import TOKEN, envelope
from tracker.entities import Failure, JobSpec
from tracker.store import Store, queue, sweeps
from tracker.store.jobs import get_job
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run, get_run
from tracker.store.tokens import create_token

pytest.importorskip("optuna")

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
SPEC = JobSpec(argv=["python", "train.py"], project="sw", config={"lr": 0.1, "width": 32},
               env={"WANDB_KEY": "do-not-show"})  # fmt: skip
BODY = {"overrides": ["lr=loguniform(1e-4,1e-1)", "width=32,64"], "method": "tpe",
        "metric": "val/loss", "goal": "minimize", "trials": 8, "parallel": 1,
        "prune": "median", "seed": 3}  # fmt: skip


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    return make_app(TOKEN=TOKEN)


def _store(app: Flask) -> Store:
    store: Store = app.extensions["tracker"].store
    return store


def _source_job(store: Store) -> int:
    """A submitted job that ran and ended, so the queue holds only the sweep's trials."""
    job = queue.enqueue_many(store, [SPEC])[0]
    claim = queue.claim(store, "w0", lease_s=60)
    assert claim is not None and claim[0].job.id == job.id
    queue.finish(store, claim[0], exit_code=0, failure=None)
    return job.id


def _post(app: Flask, url: str, body: Any, headers: dict[str, str] = ADMIN) -> Any:
    return app.test_client().post(url, json=body, headers=headers)


def _log_headers(store: Store) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(store, 'log', 'laptop')[1]}"}


def _run_trial(store: Store, values: dict[int, float]) -> Any:
    sweeps.control_once(store)
    claim = queue.claim(store, "w1", lease_s=60)
    assert claim is not None
    for step, value in values.items():
        log_metrics(store, claim[0].run_id, step, {"val/loss": value})
    queue.finish(store, claim[0], exit_code=0, failure=None)
    return claim[0]


def test_an_admin_makes_a_sweep_and_reads_its_trials_importance_and_curves(app: Flask) -> None:
    store = _store(app)
    job_id = _source_job(store)
    made = _post(app, "/api/v1/sweeps", {**BODY, "job_id": job_id, "name": "lr search"})
    assert made.status_code == 201, made.get_json()
    sweep = made.get_json()
    assert sweep["name"] == "lr search" and sweep["status"] == "running"
    assert sweep["method"] == "tpe" and sweep["prune"] == "median" and sweep["trials"] == 8
    assert sweep["space"] == BODY["overrides"]
    assert sweep["spec"]["argv"] == SPEC.argv and sweep["spec"]["env_keys"] == ["WANDB_KEY"]
    assert "do-not-show" not in made.get_data(as_text=True)
    # five trials that end, then one the median pruner stops at its first step
    for n in range(5):
        _run_trial(store, {s: 1.0 / (s + 1) + n for s in range(4)})
    sweeps.control_once(store)
    claim = queue.claim(store, "w1", lease_s=60)
    assert claim is not None
    for s in range(3):
        log_metrics(store, claim[0].run_id, s, {"val/loss": 50.0})
    sweeps.control_once(store)
    queue.finish(store, claim[0], exit_code=None, failure=Failure("cancelled", "stopped"))
    sweeps.control_once(store)

    listed = app.test_client().get("/api/v1/sweeps?project=sw", headers=ADMIN).get_json()
    (row,) = listed["sweeps"]
    assert row["id"] == sweep["id"] and row["counts"]["complete"] == 5
    assert row["counts"]["pruned"] == 1 and row["done"] == 6
    assert row["best"]["number"] == 0 and row["best"]["value"] == pytest.approx(0.25)
    assert app.test_client().get("/api/v1/sweeps?project=other", headers=ADMIN).get_json() == {
        "sweeps": []
    }

    doc = app.test_client().get(f"/api/v1/sweeps/{sweep['id']}", headers=ADMIN).get_json()
    trials = doc["trials"]
    assert [t["number"] for t in trials[:6]] == [0, 1, 2, 3, 4, 5]
    assert [t["state"] for t in trials[:6]] == ["complete"] * 5 + ["pruned"]
    pruned = trials[5]
    assert pruned["pruned_step"] == 0 and pruned["job_status"] == "pruned"
    assert get_job(store, pruned["job_id"]).status == "pruned"
    assert {"lr", "width"} <= set(trials[0]["params"]) and trials[0]["run_id"] is not None
    assert set(doc["importance"]) == {"lr", "width"}
    assert sum(doc["importance"].values()) == pytest.approx(1.0)
    curves = {c["number"]: c for c in doc["curves"]}
    assert set(curves) == {0, 1, 2, 3, 4, 5}  # every trial that logged the metric
    assert curves[0]["last"] == pytest.approx([1.0, 0.5, 1 / 3, 0.25])
    assert curves[0]["first_step"] == [0, 1, 2, 3] and curves[0]["key"] == "val/loss"
    assert curves[5]["last"] == [50.0, 50.0, 50.0]
    assert doc["curves_left_out"] == 0


def test_a_sweep_from_a_run_copies_the_job_that_ran_it(app: Flask) -> None:
    store = _store(app)
    job = get_job(store, _source_job(store))
    made = _post(app, "/api/v1/sweeps", {**BODY, "run_id": job.run_id, "config": {"lr": 0.5,
                                         "width": 32, "depth": 2}, "priority": 7})  # fmt: skip
    assert made.status_code == 201, made.get_json()
    sweep = made.get_json()
    assert sweep["spec"]["config"] == {"lr": 0.5, "width": 32, "depth": 2}
    assert sweep["spec"]["priority"] == 7
    sweeps.control_once(store)
    (trial,) = sweeps.trials(store, sweep["id"])
    trial_job = get_job(store, trial.job_id)
    assert trial_job.config["depth"] == 2 and trial_job.priority == 7
    assert trial_job.argv == SPEC.argv and trial_job.parent_job_id == job.id
    assert f"sweep-{sweep['id']}" in get_run(store, trial_job.run_id).tags
    # a run no job ran is shown, never launched
    loose = create_run(store, "sw", "by hand")
    refused = _post(app, "/api/v1/sweeps", {**BODY, "run_id": loose.id})
    assert refused.status_code == 409 and envelope(refused)["field"] == "run"
    missing = _post(app, "/api/v1/sweeps", {**BODY, "job_id": 987654})
    assert missing.status_code == 404


def test_a_log_token_reads_sweeps_but_changes_none(app: Flask) -> None:
    store = _store(app)
    job_id = _source_job(store)
    made = _post(app, "/api/v1/sweeps", {**BODY, "job_id": job_id}).get_json()
    log = _log_headers(store)
    client = app.test_client()
    assert client.get("/api/v1/sweeps", headers=log).status_code == 200
    assert client.get(f"/api/v1/sweeps/{made['id']}", headers=log).status_code == 200
    for url, body in [
        ("/api/v1/sweeps", {**BODY, "job_id": job_id}),
        (f"/api/v1/sweeps/{made['id']}/stop", {"kill": True}),
        (f"/api/v1/sweeps/{made['id']}/resume", {}),
    ]:
        response = _post(app, url, body, log)
        assert response.status_code == 403, url
        assert envelope(response)["code"] == "forbidden_scope"
    assert len(sweeps.list_sweeps(store)) == 1
    assert sweeps.get_sweep(store, made["id"]).status == "running"
    assert client.get("/api/v1/sweeps").status_code == 401  # no token at all


BAD = [  # (what the body changes, the field the 400 names)
    ({"metric": None}, "metric"),
    ({"metric": 3}, "metric"),
    ({"method": "bayes"}, "method"),
    ({"prune": "sometimes"}, "prune"),
    ({"goal": "up"}, "goal"),
    ({"objective": "mean"}, "objective"),
    ({"trials": 0}, "trials"),
    ({"trials": "5"}, "trials"),
    ({"trials": True}, "trials"),
    ({"parallel": 0}, "parallel"),
    ({"seed": -1}, "seed"),
    ({"overrides": []}, "overrides"),
    ({"overrides": "lr=0.1,0.2"}, "overrides"),
    ({"overrides": [1]}, "overrides"),
    ({"overrides": None}, "overrides"),
    ({"overrides": ["epochs=3"]}, "overrides"),  # nothing searched
    ({"overrides": ["lr=logunifrom(1e-4,1e-1)"]}, "config"),  # the -c rule names config
    ({"method": "grid"}, "lr"),  # a grid takes comma lists, not lr's distribution
    ({"name": ""}, "name"),
    ({"name": 5}, "name"),
    ({"argv": ["rm", "-rf", "/"]}, "argv"),
    ({"env": {"A": "b"}}, "env"),
    ({"grid": {"lr": [1]}}, "grid"),
    ({"command": "x"}, "command"),
    ({"colour": "blue"}, "colour"),
    ({"config": [1]}, "config"),
    ({"priority": "high"}, "priority"),
    ({"fail_on": "sometimes"}, "fail_on"),
    ({"name": "a\x00b"}, "name"),
    ({"run_id": 1}, "job_id"),  # both sources
]


@pytest.mark.parametrize(("change", "field"), BAD, ids=[f for _, f in BAD])
def test_bad_input_is_a_400_naming_the_field(app: Flask, change: dict[str, Any],
                                             field: str) -> None:  # fmt: skip
    store = _store(app)
    body = {**BODY, "job_id": _source_job(store), **change}
    body = {k: v for k, v in body.items() if not (v is None and k != "overrides")}
    if change.get("overrides", 0) is None:
        del body["overrides"]
    response = _post(app, "/api/v1/sweeps", body)
    assert response.status_code == 400, response.get_json()
    assert envelope(response)["field"] == field, response.get_json()
    assert sweeps.list_sweeps(store) == []  # nothing stored


def test_no_source_is_a_400_naming_job_id(app: Flask) -> None:
    response = _post(app, "/api/v1/sweeps", BODY)
    assert response.status_code == 400 and envelope(response)["field"] == "job_id"


def test_stop_then_resume(app: Flask) -> None:
    store = _store(app)
    made = _post(app, "/api/v1/sweeps", {**BODY, "job_id": _source_job(store),
                                         "parallel": 2}).get_json()  # fmt: skip
    sweeps.control_once(store)
    running = queue.claim(store, "w1", lease_s=60)
    assert running is not None
    stopped = _post(app, f"/api/v1/sweeps/{made['id']}/stop", {"kill": False})
    assert stopped.status_code == 200 and stopped.get_json()["status"] == "stopped"
    statuses = {t.number: get_job(store, t.job_id).status for t in sweeps.trials(store, made["id"])}
    assert statuses == {0: "running", 1: "cancelled"}  # kill false: the running one goes on
    assert not queue.poll(store, [running[0]])[running[0].job.id].cancel_requested
    killed = _post(app, f"/api/v1/sweeps/{made['id']}/stop", {"kill": True})
    assert killed.status_code == 200
    assert queue.poll(store, [running[0]])[running[0].job.id].cancel_requested
    bad = _post(app, f"/api/v1/sweeps/{made['id']}/stop", {"kill": "yes"})
    assert bad.status_code == 400 and envelope(bad)["field"] == "kill"
    resumed = _post(app, f"/api/v1/sweeps/{made['id']}/resume", {})
    assert resumed.status_code == 200 and resumed.get_json()["status"] == "running"
    again = _post(app, f"/api/v1/sweeps/{made['id']}/resume", {})
    assert again.status_code == 409 and envelope(again)["code"] == "conflict"
    for url in ("/api/v1/sweeps/987654", "/api/v1/sweeps/987654/stop"):
        response = (app.test_client().get(url, headers=ADMIN) if url.endswith("4")
                    else _post(app, url, {}))  # fmt: skip
        assert response.status_code == 404 and envelope(response)["code"] == "not_found"


def test_list_filters_are_checked(app: Flask) -> None:
    client = app.test_client()
    bad = client.get("/api/v1/sweeps?status=paused", headers=ADMIN)
    assert bad.status_code == 400 and envelope(bad)["field"] == "status"
    bad = client.get("/api/v1/sweeps?limit=0", headers=ADMIN)
    assert bad.status_code == 400 and envelope(bad)["field"] == "limit"


# Untrusted bodies: any JSON value in any field is a 201 or a 4xx envelope naming a field,
# never a 500, and a refused body stores nothing.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=8,
)  # fmt: skip
FIELDS = ["overrides", "method", "metric", "goal", "trials", "parallel", "prune", "seed",
          "objective", "name", "config", "priority", "fail_on", "job_id"]  # fmt: skip
override_texts = st.lists(
    st.one_of(
        st.sampled_from(["lr=loguniform(1e-4,1e-1)", "w=1,2", "x=uniform(1,0)", "d=randint(1,3)",
                         "lr=", "=3", "a..b=1,2", "k=choice()", "m=loguniform(0,1)"]),
        st.text(max_size=25),
    ),
    max_size=4,
)  # fmt: skip


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(change=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=3),
       overrides=st.none() | override_texts)  # fmt: skip
def test_untrusted_bodies_never_answer_500(app: Flask, change: dict[str, Any],
                                           overrides: list[str] | None) -> None:  # fmt: skip
    store = _store(app)
    if not hasattr(app, "_source_job"):
        app._source_job = _source_job(store)  # type: ignore[attr-defined]
    body = {**BODY, "job_id": app._source_job, **change}  # type: ignore[attr-defined]
    if overrides is not None:
        body["overrides"] = overrides
    before = len(sweeps.list_sweeps(store, limit=1000))
    response = _post(app, "/api/v1/sweeps", body)
    assert response.status_code in (201, 400, 404, 409), response.get_data(as_text=True)
    if response.status_code == 201:
        assert len(sweeps.list_sweeps(store, limit=1000)) == before + 1
        return
    error = envelope(response)
    assert error.get("field"), error
    assert len(sweeps.list_sweeps(store, limit=1000)) == before


# ------------------------------------------------ a sweep of a job spec (a submitter's)

JOB = {"argv": ["python", "train.py"], "project": "sw", "cwd": ".", "project_root": "/p",
       "config": {"lr": 0.1, "width": 32}, "env": {"WANDB_KEY": "do-not-show"}, "gpus": 0,
       "priority": 4, "tags": ["laptop"]}  # fmt: skip


def _snapshot(app: Flask) -> int:
    """A code snapshot stored through the API, as ``tracker sweep --uri http://`` makes."""
    data = b"print('train')\n"
    sha = hashlib.sha256(data).hexdigest()
    client = app.test_client()
    assert client.put(f"/api/v1/snapshots/blobs/{sha}", data=data, headers=ADMIN).status_code in (
        200, 201,
    )  # fmt: skip
    files = [{"path": "train.py", "sha256": sha, "size": len(data), "executable": False}]
    made = _post(app, "/api/v1/snapshots", {"files": files})
    assert made.status_code == 201, made.get_json()
    return int(made.get_json()["id"])


def test_a_sweep_of_a_job_spec_runs_that_job_from_its_snapshot(
    make_app: Callable[..., Flask], tmp_path: Path
) -> None:
    app = make_app(TOKEN=TOKEN, ARTIFACT_ROOT=str(tmp_path / "blobs"))
    store = _store(app)
    snapshot_id = _snapshot(app)
    made = _post(app, "/api/v1/sweeps", {**BODY, "job": {**JOB, "snapshot_id": snapshot_id},
                                         "parallel": 2, "name": "from a laptop"})  # fmt: skip
    assert made.status_code == 201, made.get_json()
    sweep = made.get_json()
    assert sweep["name"] == "from a laptop" and sweep["project"] == "sw"
    assert sweep["spec"]["argv"] == JOB["argv"] and sweep["spec"]["snapshot_id"] == snapshot_id
    assert sweep["spec"]["env_keys"] == ["WANDB_KEY"] and "env" not in sweep["spec"]
    assert "do-not-show" not in made.get_data(as_text=True)
    sweeps.control_once(store)
    # read while its trials are queued: no run of the store has logged the metric yet
    doc = app.test_client().get(f"/api/v1/sweeps/{sweep['id']}", headers=ADMIN)
    assert doc.status_code == 200, doc.get_json()
    assert len(doc.get_json()["trials"]) == 2 and doc.get_json()["curves"] == []
    found = sweeps.trials(store, sweep["id"])
    assert [t.number for t in found] == [0, 1]
    for trial in found:
        assert trial.job_id is not None
        job = get_job(store, trial.job_id)
        assert job.run_id is not None and job.argv == JOB["argv"]
        assert job.cwd == "." and job.project_root == "/p"
        assert job.snapshot_id == snapshot_id and job.priority == 4
        assert job.env == {"WANDB_KEY": "do-not-show"} and job.parent_job_id is None
        assert job.config["lr"] == trial.params["lr"] and job.config["width"] in (32, 64)
        assert f"sweep-{sweep['id']}" in get_run(store, job.run_id).tags
    # a log token may not make one
    refused = _post(app, "/api/v1/sweeps", {**BODY, "job": JOB}, _log_headers(store))
    assert refused.status_code == 403 and envelope(refused)["code"] == "forbidden_scope"
    assert "'admin' scope" in envelope(refused)["message"]
    assert len(sweeps.list_sweeps(store)) == 1


JOB_BAD = [  # (what the body changes, the field the 400 names)
    ({"job_id": 1}, "job"),  # two sources
    ({"run_id": 1}, "job"),
    ({"job": ["python", "train.py"]}, "job"),
    ({"job": {**JOB, "argv": None}}, "argv"),
    ({"job": {**JOB, "gpus": "2"}}, "gpus"),
    ({"job": {**JOB, "command": "rm -rf /"}}, "command"),
    ({"job": {**JOB, "schedule_id": 1}}, "schedule_id"),
    ({"job": {**JOB, "env": {"TRACKER_URI": "x"}}}, "env"),
    ({"job": {**JOB, "snapshot_id": 42}}, "snapshot_id"),
    ({"job": {**JOB, "configs": [{"lr": 1}]}}, "configs"),
    ({"job": {**JOB, "name": "a\x00b"}}, "name"),
    ({"config": {"lr": 0.2}}, "config"),  # a clone's edit beside a job
    ({"priority": 2}, "priority"),
    ({"argv": ["python", "x.py"]}, "argv"),  # a launch field outside the job
    ({"method": "grid"}, "lr"),  # the sweep's own rules still apply
]


@pytest.mark.parametrize(("change", "field"), JOB_BAD, ids=[f for _, f in JOB_BAD])
def test_a_bad_job_source_is_a_400_naming_the_field(app: Flask, change: dict[str, Any],
                                                    field: str) -> None:  # fmt: skip
    store = _store(app)
    body = {**BODY, "job": JOB, **change}
    body["job"] = {k: v for k, v in body["job"].items() if v is not None} if isinstance(
        body["job"], dict) else body["job"]  # fmt: skip
    response = _post(app, "/api/v1/sweeps", body)
    assert response.status_code == 400, response.get_json()
    assert envelope(response)["field"] == field, response.get_json()
    assert sweeps.list_sweeps(store) == []  # nothing stored
