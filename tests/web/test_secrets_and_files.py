"""Secrets and files (issue 9): a job's env values never leave the store through any API or
the CLI's JSON; the store's own files are never under a served root; a checkpoint path
outside the checkpoint roots is refused when written and when read; downloads are
``no-store``; and no GET creates or changes a row. On a real SQLite file and a real
PostgreSQL database."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from flask import Flask
from werkzeug.routing import IntegerConverter, Rule

from tests.support.web import envelope
from tracker.cli import main
from tracker.entities import JobSpec
from tracker.store import Store, queue
from tracker.store import models as m
from tracker.store import schedules as store_schedules
from tracker.store.checkpoints import add_checkpoint
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run
from tracker.web.app import create_app
from tracker.web.plumbing.files import StoreUnderRoot

SECRET = "s3cr3t-value"


def _url(rule: Rule, ids: dict[str, int]) -> str:
    values = {arg: ids.get(arg, 1) if isinstance(c, IntegerConverter) else "x"
              for arg, c in rule._converters.items()}  # fmt: skip
    return rule.build(values, append_unknown=False)[1]


def get_urls(app: Flask, ids: dict[str, int], query: str) -> Iterator[str]:
    """Every GET route of the app with the given ids, and a query string that satisfies the
    routes that need one (others ignore it)."""
    for rule in app.url_map.iter_rules():
        if "GET" in rule.methods and rule.endpoint != "static":
            yield f"{_url(rule, ids)}?{query}"


@pytest.fixture
def with_secret(app: Flask, store: Store, tmp_path: Path) -> dict[str, int]:
    """A job with a secret env value, its run (with metrics and a checkpoint), a schedule
    and a clone made from it."""
    spec = JobSpec(["python", "train.py"], "p", config={"lr": 0.1}, env={"SECRET": SECRET})
    job = queue.enqueue(store, spec)
    log_metrics(store, job.run_id, 0, {"loss": 1.0})
    ckpt = add_checkpoint(store, job.run_id, 0, str(tmp_path / "c.pt"), 1, "0" * 64)
    schedule = store_schedules.add_schedule_from(store, ("job", job.id), "0 3 * * *")
    return {"run_id": job.run_id, "job_id": job.id, "schedule_id": schedule.id,
            "checkpoint_id": ckpt.id}  # fmt: skip


def test_env_values_appear_in_no_api_response(app: Flask, with_secret: dict[str, int]) -> None:
    client = app.test_client()
    run, job, schedule = with_secret["run_id"], with_secret["job_id"], with_secret["schedule_id"]
    project = client.get("/api/2.0/mlflow/experiments/get-by-name?experiment_name=p").json
    experiment = project["experiment"]["experiment_id"]
    query = f"runs={run}&key=loss&run_id={run}&metric_key=loss&experiment_id={experiment}"
    bodies = {url: client.get(url) for url in get_urls(app, with_secret, query)}
    writes = [
        ("POST", f"/api/v1/runs/{run}/clone", {}),
        ("POST", f"/api/v1/jobs/{job}/clone", {"priority": 1}),
        ("POST", "/api/v1/schedules", {"job_id": job, "cron": "0 4 * * *"}),
        ("POST", "/api/v1/schedules", {"run_id": run, "cron": "0 5 * * *"}),
        ("PATCH", f"/api/v1/schedules/{schedule}", {"paused": True}),
        ("POST", f"/api/v1/runs/{run}/start", {}),
        ("POST", "/api/2.0/mlflow/runs/search", {"experiment_ids": [experiment]}),
        ("POST", f"/api/v1/jobs/{job}/cancel", {}),
    ]
    for method, url, body in writes:
        bodies[f"{method} {url}"] = client.open(url, method=method, json=body)
    for clone_id in bodies[f"POST /api/v1/jobs/{job}/clone"].json["job_ids"]:
        bodies[f"clone {clone_id}"] = client.get(f"/api/v1/jobs/{clone_id}")
    assert bodies[f"/api/v1/jobs/{job}?{query}"].json["env_keys"] == ["SECRET"]
    listed = bodies[f"/api/v1/schedules?{query}"].json["schedules"]
    assert listed[0]["spec"]["env_keys"] == ["SECRET"] and "env" not in listed[0]["spec"]
    assert listed[0]["spec"]["argv"] == ["python", "train.py"]  # the page shows the command
    for name, response in bodies.items():
        assert response.status_code < 500, (name, response.data[:300])
        assert SECRET.encode() not in response.data, name


def test_env_values_appear_in_no_cli_json(store_url: str, with_secret: dict[str, int]) -> None:
    job = str(with_secret["job_id"])
    for args in (["jobs", "show", job], ["jobs", "ls"], ["schedule", "ls"]):
        result = CliRunner().invoke(main, [*args, "--uri", store_url, "--json"])
        assert result.exit_code == 0, result.output
        assert "SECRET" in result.output and SECRET not in result.output, args
    shown = json.loads(CliRunner().invoke(main, ["jobs", "show", job, "--uri", store_url,
                                                 "--json"]).output)  # fmt: skip
    assert shown["job"]["env_keys"] == ["SECRET"] and "env" not in shown["job"]


def row_counts(store: Store) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {
            table.name: conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            for table in m.Base.metadata.sorted_tables
        }


def test_no_get_creates_or_changes_anything(app: Flask, store: Store) -> None:
    """A cross-site GET (an <img src>) must not write: MLflow's experiments/get and
    get-by-name used to create the Default project."""
    client = app.test_client()
    job = queue.enqueue(store, JobSpec(["python", "train.py"], "p"))
    ids = {"run_id": job.run_id, "job_id": job.id}
    with store.engine.connect() as conn:
        before_runs = conn.execute(sa.select(m.RunRow.__table__)).all()
    before = row_counts(store)
    queries = ["", "experiment_name=Default", "experiment_id=0", "experiment_name=p",
               f"runs={job.run_id}&key=loss&run_id={job.run_id}&metric_key=loss"]  # fmt: skip
    for query in queries:
        for url in get_urls(app, ids, query):
            response = client.get(url)
            assert response.status_code < 500, (url, response.data[:300])
    default = client.get("/api/2.0/mlflow/experiments/get-by-name?experiment_name=Default")
    assert default.json["experiment"]["experiment_id"] == "0"  # shown, though not stored
    assert client.get("/api/2.0/mlflow/experiments/get?experiment_id=0").status_code == 200
    assert row_counts(store) == before
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(m.RunRow.__table__)).all() == before_runs


# -------------------------------------------------------------------------- files


def test_the_default_roots_do_not_serve_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default store is ./.tracker/tracker.db: it used to be downloadable as
    /api/v1/files/checkpoints/tracker.db (and -wal), the default checkpoint root being
    ./.tracker."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRACKER_URI", raising=False)
    app = create_app({"TESTING": True, "NO_AUTH": True})  # the roots are the subject here
    store = app.extensions["tracker"].store
    try:
        db = store.database_file()
        assert db == tmp_path / ".tracker" / "tracker.db" and db.is_file()
        run = create_run(store, "p")
        row = add_checkpoint(store, run.id, 0, str(db), db.stat().st_size, "0" * 64)
        client = app.test_client()
        for url in ("/api/v1/files/checkpoints/tracker.db",
                    "/api/v1/files/checkpoints/tracker.db-wal",
                    "/api/v1/files/logs/../tracker.db",
                    f"/api/v1/checkpoints/{row.id}/download"):  # fmt: skip
            response = client.get(url)
            assert response.status_code in (400, 404), url
            assert b"SQLite format" not in response.data, url
        written = client.post(
            f"/api/v1/runs/{run.id}/checkpoints",
            json={"step": 1, "path": str(db), "bytes": 1, "sha256": "0" * 64},
        )
        assert written.status_code == 400 and envelope(written)["field"] == "path"
    finally:
        store.close()


@pytest.mark.parametrize("key", ["CHECKPOINT_ROOTS", "LOG_ROOT"])
def test_a_root_that_contains_the_store_is_refused_at_start(
    store_url: str, tmp_path: Path, key: str
) -> None:
    db = Store(store_url).database_file()
    if db is None:
        pytest.skip("PostgreSQL keeps no file a root could contain")
    for root in (db.parent, db.parent.parent, Path("/")):
        value = [str(root)] if key == "CHECKPOINT_ROOTS" else str(root)
        with pytest.raises(StoreUnderRoot, match="contains the store"):
            create_app({"STORE_URI": store_url, key: value})
    create_app({"STORE_URI": store_url, key: str(db.parent / "files")})  # beside it is fine


def test_checkpoint_paths_outside_the_roots_are_refused_when_written(
    make_app: Callable[..., Flask], tmp_path: Path
) -> None:
    root = tmp_path / "ckpts"
    (root / "sub").mkdir(parents=True)
    (root / "escape").symlink_to(tmp_path)
    app = make_app(CHECKPOINT_ROOTS=[str(root)])
    client = app.test_client()
    run = client.post("/api/v1/runs", json={"project": "p"}).json
    url = f"/api/v1/runs/{run['id']}/checkpoints"

    def write(path: str) -> Any:
        return client.post(url, json={"step": 1, "path": path, "bytes": 1, "sha256": "0" * 64})

    assert write(str(root / "sub" / "not-yet-saved.pt")).status_code == 201
    for bad in (str(tmp_path / "other.pt"), str(root / ".." / "other.pt"),
                str(root / "escape" / "other.pt"), "relative.pt", "/etc/passwd",
                str(root) + "\x00/x.pt"):  # fmt: skip
        response = write(bad)
        assert response.status_code == 400, bad
        assert envelope(response)["field"] == "path"
    assert len(client.get(f"/api/v1/runs/{run['id']}/checkpoints").json["checkpoints"]) == 1


def test_every_download_is_no_store(make_app: Callable[..., Flask], tmp_path: Path) -> None:
    (tmp_path / "ckpts").mkdir()
    (tmp_path / "logs").mkdir()
    (tmp_path / "ckpts" / "w.pt").write_bytes(b"weights")
    (tmp_path / "logs" / "out.txt").write_text("log")
    app = make_app(CHECKPOINT_ROOTS=[str(tmp_path / "ckpts")], LOG_ROOT=str(tmp_path / "logs"))
    store = app.extensions["tracker"].store
    run = create_run(store, "p")
    row = add_checkpoint(store, run.id, 1, str(tmp_path / "ckpts" / "w.pt"), 7, "0" * 64)
    client = app.test_client()
    for url in (f"/api/v1/checkpoints/{row.id}/download",
                "/api/v1/files/checkpoints/w.pt", "/api/v1/files/logs/out.txt"):  # fmt: skip
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["Cache-Control"] == "no-store", url
        assert "attachment" in response.headers["Content-Disposition"]
