"""A clone runs the code its source ran (issue 28): "Clone & edit" of a job, or of a run
through the job that ran it, queues copies that name the same code snapshot, and a worker
that claims a copy writes that snapshot's files; the request cannot swap the code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.support.code_snapshots import store_snapshot
from tracker.entities import JobSpec, SnapshotInfo
from tracker.store import Store, queue, snapshots
from tracker.store import jobs as store_jobs
from tracker.store.clone import spec_from_job, spec_from_run
from tracker.store.runs import get_run

COMMIT = "9b1e4c7d2a0f3e5b6c8d9e0f1a2b3c4d5e6f7a8b"
TRAIN = b"import sys\nprint('lr', sys.argv[1:])\n"


@pytest.fixture
def app(make_app: Callable[..., Flask], tmp_path: Path) -> Flask:
    # an artifact root of its own: a PostgreSQL store has none by default
    return make_app(ARTIFACT_ROOT=str(tmp_path / "artifact-root"))


@pytest.fixture
def snapshot(store: Store, tmp_path: Path) -> SnapshotInfo:
    return store_snapshot(
        store,
        tmp_path / "tree",
        {"train.py": TRAIN, "run.sh": b"#!/bin/sh\nexec python train.py\n"},
        executable={"run.sh"},
        git_commit=COMMIT,
        git_diff="--- a/train.py\n+++ b/train.py\n@@ -1 +1,2 @@\n import sys\n+print(1)\n",
    )


def snapshot_job(store: Store, snapshot_id: int | None, **kw: Any) -> Any:
    spec = JobSpec(["python", "train.py"], "digits", config={"lr": 0.1},
                   snapshot_id=snapshot_id, **kw)  # fmt: skip
    return queue.enqueue(store, spec)


def test_clones_of_a_job_and_of_its_run_keep_its_code_snapshot(
    client: FlaskClient, store: Store, snapshot: SnapshotInfo, tmp_path: Path
) -> None:
    source = snapshot_job(store, snapshot.id)
    assert source.snapshot_id == snapshot.id
    # what the run page reads: its job, with the snapshot it runs
    assert client.get(f"/api/v1/runs/{source.run_id}").json["job"]["snapshot_id"] == snapshot.id
    assert spec_from_job(store, source.id).snapshot_id == snapshot.id
    assert spec_from_run(store, source.run_id).snapshot_id == snapshot.id

    by_job = client.post(f"/api/v1/jobs/{source.id}/clone", json={"config": {"lr": 0.01}})
    by_run = client.post(f"/api/v1/runs/{source.run_id}/clone", json={"grid": {"lr": [1, 2]}})
    assert (by_job.status_code, by_run.status_code) == (201, 201), (by_job.json, by_run.json)
    copies = [store_jobs.get_job(store, i) for i in by_job.json["job_ids"] + by_run.json["job_ids"]]
    assert [j.snapshot_id for j in copies] == [snapshot.id] * 3
    assert [j.config["lr"] for j in copies] == [0.01, 1, 2]
    for copy in copies:  # the copy's run records the commit its code was taken at
        assert get_run(store, copy.run_id).git_commit == COMMIT

    # a worker claims the source, then the first copy, and writes the copy's snapshot
    claimed = [queue.claim(store, "w1", lease_s=30) for _ in range(2)]
    assert [c[0].job.id for c in claimed if c] == [source.id, copies[0].id]
    job = claimed[1][0].job if claimed[1] else None
    assert job is not None and job.snapshot_id == snapshot.id
    dest = snapshots.materialize(store, job.snapshot_id, tmp_path / "attempt-1")
    assert (dest / "train.py").read_bytes() == TRAIN
    assert (dest / "run.sh").stat().st_mode & 0o111


def test_a_clone_request_cannot_swap_the_code(
    client: FlaskClient, store: Store, snapshot: SnapshotInfo, tmp_path: Path
) -> None:
    other = store_snapshot(store, tmp_path / "other", {"evil.py": b"print('other code')\n"})
    source = snapshot_job(store, snapshot.id)
    for path in (f"/api/v1/jobs/{source.id}/clone", f"/api/v1/runs/{source.run_id}/clone"):
        for swap in (other.id, None):
            response = client.post(path, json={"snapshot_id": swap})
            # refused, or the field is not one a clone reads: never the other code
            assert response.status_code in (201, 400), response.json
            for job_id in response.json.get("job_ids", []):
                assert store_jobs.get_job(store, job_id).snapshot_id == snapshot.id


def test_a_clone_of_a_job_without_a_snapshot_has_none(client: FlaskClient, store: Store) -> None:
    source = snapshot_job(store, None)
    assert client.get(f"/api/v1/runs/{source.run_id}").json["job"]["snapshot_id"] is None
    (new_id,) = client.post(f"/api/v1/jobs/{source.id}/clone", json={}).json["job_ids"]
    assert store_jobs.get_job(store, new_id).snapshot_id is None
