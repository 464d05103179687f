"""``config_types`` (issue 14): JSON loses the difference between 0.0 and 0 once a browser
parses it, so the run and job details carry each config leaf's Python type; the clone editor
keeps a float a float with it, and a clone that writes ``0.0`` stores a float."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tracker.entities import JobSpec
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.web.core.fields import config_types

CASES = [
    ({"lr": 0.0}, {"lr": "float"}),
    ({"epochs": 3, "lr": 1.0}, {"epochs": "int", "lr": "float"}),
    ({"on": True, "name": "x", "none": None}, {"on": "boolean", "name": "string", "none": "null"}),
    ({"dims": [1, 2], "empty": {}}, {"dims": "list", "empty": "object"}),
    ({"model": {"width": 64, "dropout": 0.0}}, {"model": {"width": "int", "dropout": "float"}}),
    ({"a.b": 1.5}, {"a.b": "float"}),  # a key with a dot stays one key
]  # fmt: skip


@pytest.mark.parametrize(("config", "expected"), CASES)
def test_config_types(config: dict[str, Any], expected: dict[str, Any]) -> None:
    assert config_types(config) == expected


def test_run_and_job_details_carry_config_types(client: FlaskClient, store: Store) -> None:
    config = {"wd": 0.0, "epochs": 3, "model": {"scale": 2.0}}
    job = queue.enqueue(store, JobSpec(["python", "train.py"], "digits", config=config))
    expected = {"wd": "float", "epochs": "int", "model": {"scale": "float"}}
    assert client.get(f"/api/v1/jobs/{job.id}").json["config_types"] == expected
    assert client.get("/api/v1/jobs").json["jobs"][0]["config_types"] == expected
    run = client.get(f"/api/v1/runs/{job.run_id}").json
    assert run["config_types"] == expected and run["config"] == config


def test_a_clone_written_with_0_0_stores_a_float(client: FlaskClient, store: Store) -> None:
    job = queue.enqueue(store, JobSpec(["python", "train.py"], "digits", config={"wd": 0.0}))
    body = '{"config": {"wd": 0.0, "n": 0}, "grid": {"lr": [1.0, 0.5]}}'
    answer = client.post(
        f"/api/v1/jobs/{job.id}/clone", data=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 201, answer.json
    for new_id in answer.json["job_ids"]:
        stored = store_jobs.get_job(store, new_id).config
        assert isinstance(stored["wd"], float) and isinstance(stored["lr"], float)
        assert isinstance(stored["n"], int)
