"""The MLflow-compatible REST subset (``web/views/mlflow.py``): the real ``mlflow`` client logs
into a real server (a thread on a free port) on a real SQLite file and a real PostgreSQL
database, and what it logged is checked through the tracker's own Store. Plus the pure
mapping (``web/core/mlflow_compat.py``) without I/O."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import mlflow
import pytest
from flask import Flask
from flask.testing import FlaskClient
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from tests.support.servers import ServerThread
from tests.support.web import TOKEN
from tracker.entities import RunInfo, RunMeta
from tracker.errors import InvalidMetricKey
from tracker.store import Store
from tracker.store.metrics import count_points, log_metrics, metric_history
from tracker.store.projects import list_project_names
from tracker.store.runs import create_run, get_run, list_runs
from tracker.web.core import mlflow_compat as compat

PREFIX = "/api/2.0/mlflow"
LOSS = [2.5, 1.25, math.nan, math.inf, -math.inf, 0.5]


@pytest.fixture
def mlflow_server(
    make_app: Callable[..., Flask],
    serve: Callable[[Flask], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[..., Flask]]:
    """Start a server (``start(**app_config)``) and point the mlflow client at it through
    ``MLFLOW_TRACKING_URI``, exactly as unchanged user code would be."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # a 5xx fails fast, no backoff
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    for var in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        monkeypatch.delenv(var, raising=False)
    # The client remembers the last set_experiment() in a module global: start clean.
    monkeypatch.setattr(mlflow.tracking.fluent, "_active_experiment_id", None)
    # ... and a tracking URI set by set_tracking_uri() (MLFlowLogger, other tests) wins over
    # the environment: start clean.
    from mlflow.tracking._tracking_service import utils as tracking_utils

    monkeypatch.setattr(tracking_utils, "_tracking_uri", None)

    def start(**config: Any) -> Flask:
        app = make_app(**config)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", serve(app).url)
        return app

    yield start
    while mlflow.active_run() is not None:  # a failed test must not leak its active run
        mlflow.end_run("KILLED")


def store_of(app: Flask) -> Store:
    return app.extensions["tracker"].store


def only_run(store: Store, project: str) -> RunInfo:
    runs = list_runs(store, project=project)
    assert len(runs) == 1, runs
    return runs[0]


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# ------------------------------------------------------------- the real client


def test_fluent_logging_lands_in_the_store(mlflow_server: Callable[..., Flask]) -> None:
    store = store_of(mlflow_server())
    experiment = mlflow.set_experiment("digits")
    with mlflow.start_run(run_name="r1") as active:
        mlflow.log_params({"lr": 0.001, "optimizer": "adam", "layers": [64, 32]})
        for step, value in enumerate(LOSS):
            mlflow.log_metric("loss", value, step=step)
        mlflow.log_metrics({"val/acc": 0.75, "val/loss": math.nan}, step=3)
        mlflow.log_metrics({"val/acc": 0.875, "val/loss": 0.25}, step=5)
        mlflow.set_tag("team", "vision")
    run_id = active.info.run_id

    run = only_run(store, "digits")
    assert str(run.id) == run_id
    assert experiment.experiment_id == str(store_project_id(store, "digits"))
    assert (run.name, run.status) == ("r1", "finished")
    assert run.ended_at is not None and run.ended_at >= run.started_at
    assert {k: run.config[k] for k in ("lr", "optimizer", "layers")} == {
        "lr": "0.001",
        "optimizer": "adam",
        "layers": "[64, 32]",
    }
    assert "team=vision" in run.tags
    assert run.config[compat.SYSTEM_TAGS_KEY]["mlflow.source.type"] == "LOCAL"
    history = metric_history(store, run.id, "loss")
    assert [p.step for p in history] == list(range(len(LOSS)))
    assert all(same(p.value, v) for p, v in zip(history, LOSS, strict=True))
    acc = metric_history(store, run.id, "val/acc")
    assert [(p.step, p.value) for p in acc] == [(3, 0.75), (5, 0.875)]
    assert math.isnan(metric_history(store, run.id, "val/loss")[0].value)

    client = MlflowClient()
    got = client.get_metric_history(run_id, "loss")
    assert [m.step for m in got] == list(range(len(LOSS)))
    assert all(same(m.value, v) for m, v in zip(got, LOSS, strict=True))
    fetched = client.get_run(run_id)
    assert fetched.info.status == "FINISHED" and fetched.info.run_name == "r1"
    assert fetched.info.experiment_id == experiment.experiment_id
    assert fetched.data.params == {"lr": "0.001", "optimizer": "adam", "layers": "[64, 32]"}
    assert fetched.data.tags["team"] == "vision"
    assert fetched.data.tags["mlflow.runName"] == "r1"
    assert fetched.data.metrics["val/acc"] == 0.875 and fetched.data.metrics["loss"] == 0.5


def store_project_id(store: Store, name: str) -> int:
    from tracker.store.projects import find_project

    project = find_project(store, name)
    assert project is not None
    return project.id


def test_an_exception_in_the_run_ends_it_failed(mlflow_server: Callable[..., Flask]) -> None:
    store = store_of(mlflow_server())
    mlflow.set_experiment("crashy")
    with pytest.raises(ZeroDivisionError), mlflow.start_run():
        mlflow.log_metric("loss", 1.0, step=0)
        _ = 1 / 0
    run = only_run(store, "crashy")
    assert run.status == "failed" and run.ended_at is not None
    assert [p.value for p in metric_history(store, run.id, "loss")] == [1.0]
    with mlflow.start_run():
        pass
    mlflow.start_run()
    mlflow.end_run("KILLED")
    statuses = sorted(r.status for r in list_runs(store, project="crashy"))
    assert statuses == ["failed", "finished", "killed"]


def test_token_is_required_when_the_dashboard_has_one(
    mlflow_server: Callable[..., Flask], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_of(mlflow_server(TOKEN=TOKEN))
    with pytest.raises(MlflowException) as refused:
        mlflow.set_experiment("secret")
    assert refused.value.error_code == "UNAUTHENTICATED"
    assert list_project_names(store) == []
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "wrong-" + TOKEN)
    with pytest.raises(MlflowException) as wrong:
        mlflow.set_experiment("secret")
    assert wrong.value.error_code == "UNAUTHENTICATED"
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    mlflow.set_experiment("secret")
    with mlflow.start_run():
        mlflow.log_metric("loss", 0.5, step=1)
    run = only_run(store, "secret")
    assert run.status == "finished" and count_points(store, run.id) == 1


def test_every_logged_value_is_kept_in_order(mlflow_server: Callable[..., Flask]) -> None:
    from mlflow.entities import Metric

    from tracker.store.series import read_series

    store = store_of(mlflow_server())
    client = MlflowClient()
    experiment_id = client.create_experiment("relog")
    run_id = client.create_run(experiment_id).info.run_id
    for value in [5.0, 3.0, 9.0, 1.0, 4.0]:  # no step: MLflow logs each at step 0
        client.log_metric(run_id, "acc", value)
    history = client.get_metric_history(run_id, "acc")
    assert [(m.step, m.value) for m in history] == [(0, v) for v in [5.0, 3.0, 9.0, 1.0, 4.0]]
    assert client.get_run(run_id).data.metrics["acc"] == 4.0  # the last logged
    chart = read_series(store, int(run_id), "acc").series.buckets
    assert [b.last for b in chart] == [5.0, 3.0, 9.0, 1.0, 4.0]  # full resolution: each value
    client.log_metric(run_id, "loss", 1.0, step=7)
    client.log_metric(run_id, "loss", 2.0, step=7)
    batch = [Metric("loss", 3.0, 1, 8), Metric("loss", 4.0, 2, 8), Metric("acc", 0.5, 3, 8)]
    client.log_batch(run_id, metrics=batch)
    client.log_metric(run_id, "loss", 0.5, step=2)  # an earlier step: not the latest
    expected = [(2, 0.5), (7, 1.0), (7, 2.0), (8, 3.0), (8, 4.0)]
    assert [(p.step, p.value) for p in metric_history(store, int(run_id), "loss")] == expected
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "loss")] == expected
    assert client.get_run(run_id).data.metrics == {"loss": 4.0, "acc": 0.5}
    assert get_run(store, int(run_id)).last_metrics == {"loss": 4.0, "acc": 0.5}
    assert client.get_metric_history(run_id, "never-logged") == []
    # The tracker's own writes keep their semantics: the same step again overwrites.
    log_metrics(store, int(run_id), 30, {"loss": 1.5})
    log_metrics(store, int(run_id), 30, {"loss": 2.5})
    assert [(p.step, p.value) for p in metric_history(store, int(run_id), "loss")][-1:] == [
        (30, 2.5)
    ]
    assert count_points(store, int(run_id)) == 5 + 1 + 5 + 1


def test_rollups_and_pages_over_many_values_at_one_step(client: FlaskClient, app: Flask) -> None:
    """Chart buckets (min/max/last) and history pages count every value of a step."""
    from tracker.store.series import read_series

    store = store_of(app)
    experiment = post(client, "/experiments/create", {"name": "many"}).get_json()
    created = post(client, "/runs/create", {"experiment_id": experiment["experiment_id"]})
    run_id = created.get_json()["run"]["info"]["run_id"]
    values = [float((i * 37) % 101) for i in range(1200)]
    for start in range(0, 1200, 400):
        metrics = [
            {"key": "m", "value": v, "timestamp": 1000 + start + i, "step": (start + i) // 300}
            for i, v in enumerate(values[start : start + 400])
        ]
        assert post(client, "/runs/log-batch", {"run_id": run_id, "metrics": metrics}).json == {}
    series = read_series(store, int(run_id), "m", max_buckets=2)
    assert sum(b.count for b in series.series.buckets) == 1200
    assert series.series.buckets[0].min == min(values[:600])
    assert series.series.buckets[-1].max == max(values[600:])
    assert series.series.buckets[-1].last == values[-1]
    got: list[float] = []
    token = ""
    while True:
        page = client.get(
            f"{PREFIX}/metrics/get-history?run_id={run_id}&metric_key=m&max_results=250"
            + (f"&page_token={token}" if token else "")
        ).get_json()
        got += [m["value"] for m in page["metrics"]]
        token = page.get("next_page_token", "")
        if not token:
            break
    assert got == values


def test_a_retried_log_batch_stores_nothing_twice(client: FlaskClient, app: Flask) -> None:
    store = store_of(app)
    experiment = post(client, "/experiments/create", {"name": "retry"}).get_json()
    created = post(client, "/runs/create", {"experiment_id": experiment["experiment_id"]})
    run_id = created.get_json()["run"]["info"]["run_id"]
    metrics = [
        {"key": "m", "value": 1.0, "timestamp": 10, "step": 0},
        {"key": "m", "value": 2.0, "timestamp": 11, "step": 0},
        {"key": "m", "value": "NaN", "timestamp": 12, "step": 1},
        {"key": "n", "value": -0.5, "timestamp": 12, "step": 1},
    ]
    body = {"run_id": run_id, "metrics": metrics}
    for _ in range(2):  # a client retrying after a lost response
        assert post(client, "/runs/log-batch", body).get_json() == {}
    assert count_points(store, int(run_id)) == 4
    again = {"run_id": run_id, "key": "m", "value": 2.0, "timestamp": 11, "step": 0}
    assert post(client, "/runs/log-metric", again).get_json() == {}
    twice = [metrics[0], metrics[0]]  # the same entry twice in one request: stored once
    assert post(client, "/runs/log-batch", {"run_id": run_id, "metrics": twice}).json == {}
    assert count_points(store, int(run_id)) == 4
    # Equal value at another wall time, or another value at that wall time: a new value.
    later = {"run_id": run_id, "key": "m", "value": 1.0, "timestamp": 13, "step": 0}
    other = {"run_id": run_id, "key": "m", "value": 7.0, "timestamp": 10, "step": 0}
    for entry in (later, other):
        assert post(client, "/runs/log-metric", entry).get_json() == {}
    history = client.get(f"{PREFIX}/metrics/get-history?run_id={run_id}&metric_key=m").json
    assert [(m["step"], m["value"], m["timestamp"]) for m in history["metrics"]] == [
        (0, 1.0, 10),
        (0, 2.0, 11),
        (0, 1.0, 13),
        (0, 7.0, 10),
        (1, "NaN", 12),
    ]
    assert get_run(store, int(run_id)).last_metrics["n"] == -0.5


def test_bad_input_gets_mlflow_errors_and_stores_nothing(
    mlflow_server: Callable[..., Flask],
) -> None:
    store = store_of(mlflow_server())
    client = MlflowClient()
    run_id = client.create_run(client.create_experiment("strict")).info.run_id
    with pytest.raises(MlflowException) as bad_key:
        client.log_metric(run_id, "train,loss", 1.0, step=0)  # MLflow refuses commas too
    assert bad_key.value.error_code == "INVALID_PARAMETER_VALUE"
    assert "train,loss" in bad_key.value.message and "not allowed: ','" in bad_key.value.message
    other = client.create_run(client.get_run(run_id).info.experiment_id).info.run_id
    client.log_metric(other, "val loss", 0.5, step=0)  # spaces and colons as in MLflow
    client.log_metric(other, "val:acc", 0.75, step=0)
    assert client.get_run(other).data.metrics == {"val loss": 0.5, "val:acc": 0.75}
    client.log_param(run_id, "lr", "0.1")
    client.log_param(run_id, "lr", "0.1")  # the same value again is fine (as in MLflow)
    from mlflow.entities import Metric, Param

    with pytest.raises(MlflowException) as changed:
        client.log_batch(run_id, metrics=[Metric("ok", 1.0, 0, 0)], params=[Param("lr", "0.2")])
    assert changed.value.error_code == "INVALID_PARAMETER_VALUE"
    assert "write-once" in changed.value.message
    assert count_points(store, int(run_id)) == 0  # the refused batch stored no metric either
    assert get_run(store, int(run_id)).config["lr"] == "0.1"
    with pytest.raises(MlflowException) as missing:
        client.get_run("987654")
    assert missing.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    assert mlflow.get_experiment_by_name("no-such-experiment") is None
    with pytest.raises(MlflowException) as exists:
        client.create_experiment("strict")
    assert exists.value.error_code == "RESOURCE_ALREADY_EXISTS"


def test_default_experiment_is_project_default(mlflow_server: Callable[..., Flask]) -> None:
    store = store_of(mlflow_server())
    with mlflow.start_run() as active:  # no set_experiment(): MLflow's experiment "0"
        mlflow.log_metric("loss", 1.0)
    run = only_run(store, "default")
    assert str(run.id) == active.info.run_id and active.info.experiment_id == "0"
    client = MlflowClient()
    assert client.get_experiment("0").name == "Default"
    assert client.get_experiment_by_name("Default").experiment_id == "0"
    names = {e.name: e.experiment_id for e in client.search_experiments()}
    assert names == {"Default": "0"}


def test_names_tags_search_and_runs_logged_without_mlflow(
    mlflow_server: Callable[..., Flask],
) -> None:
    store = store_of(mlflow_server())
    client = MlflowClient()
    experiment_id = client.create_experiment("mixed")
    run_id = client.create_run(experiment_id, run_name="first").info.run_id
    client.update_run(run_id, name="renamed")
    client.set_tag(run_id, "stage", "a")
    client.set_tag(run_id, "stage", "b")  # a tag is replaced, not duplicated
    client.set_tag(run_id, "mlflow.note.content", "notes")
    client.delete_tag(run_id, "mlflow.note.content")
    client.set_terminated(run_id, "KILLED")
    run = get_run(store, int(run_id))
    assert (run.name, run.status, run.tags) == ("renamed", "killed", ["stage=b"])
    ours = create_run(store, "mixed", "by-tracker", {"model": {"width": 64}, "lr": 0.1}, ["base"])
    log_metrics(store, ours.id, 3, {"loss": 0.5})

    found = client.search_runs([experiment_id])
    assert [r.info.run_id for r in found] == [str(ours.id), run_id]
    assert found[0].data.params == {"model.width": "64", "lr": "0.1"}
    assert found[0].data.tags["base"] == "" and found[0].data.metrics == {"loss": 0.5}
    assert found[0].info.status == "RUNNING" and found[1].info.status == "KILLED"
    page = client.search_runs([experiment_id], max_results=1)
    assert len(page) == 1 and page.token
    assert [r.info.run_id for r in client.search_runs([experiment_id], page_token=page.token)] == [
        run_id
    ]
    client.create_experiment("other")
    hits = client.search_experiments(filter_string="name LIKE 'mix%'")
    assert [e.name for e in hits] == ["mixed"]
    assert [e.name for e in client.search_experiments(filter_string="name = 'other'")] == ["other"]
    with pytest.raises(MlflowException):
        client.search_experiments(filter_string="tags.x = 'y'")


def test_async_logging_is_flushed_when_the_run_ends(mlflow_server: Callable[..., Flask]) -> None:
    store = store_of(mlflow_server())
    mlflow.set_experiment("async")
    with mlflow.start_run():
        for step in range(50):
            mlflow.log_metric("loss", 1.0 / (step + 1), step=step, synchronous=False)
        mlflow.log_params({"lr": "0.1"}, synchronous=False)
    run = only_run(store, "async")
    assert run.status == "finished" and run.config["lr"] == "0.1"
    assert [p.step for p in metric_history(store, run.id, "loss")] == list(range(50))


def test_lightning_mlflow_logger(mlflow_server: Callable[..., Flask], tmp_path: Any) -> None:
    loggers = pytest.importorskip("lightning.pytorch.loggers", reason="lightning not installed")
    store = store_of(mlflow_server())
    uri = os.environ["MLFLOW_TRACKING_URI"]  # Lightning reads the variable at import time
    logger = loggers.MLFlowLogger(experiment_name="lit", run_name="lit-1", tracking_uri=uri)
    logger.log_hyperparams({"lr": 0.01, "net": {"width": 8}})
    for step in range(3):
        logger.log_metrics({"train_loss": 1.0 / (step + 1)}, step=step)
    logger.finalize("success")
    run = only_run(store, "lit")
    assert run.status == "finished" and len(metric_history(store, run.id, "train_loss")) == 3


# ------------------------------------------------------------- raw HTTP shape


def post(client: FlaskClient, path: str, body: Any) -> Any:
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(PREFIX + path, data=data, content_type="application/json")


def mlflow_error(response: Any) -> dict[str, str]:
    body = response.get_json()
    assert set(body) == {"error_code", "message"}, body
    assert isinstance(body["message"], str) and body["message"]
    return body


def test_http_shapes_nan_tokens_and_pages(client: FlaskClient, app: Flask) -> None:
    experiment = post(client, "/experiments/create", {"name": "raw"}).get_json()
    created = post(client, "/runs/create", {"experiment_id": experiment["experiment_id"]})
    run_id = created.get_json()["run"]["info"]["run_id"]
    # Older clients and hand-written JSON send bare NaN/Infinity tokens and int64 as strings.
    metrics = [
        {"key": "m", "value": "<NaN>", "timestamp": "5", "step": "0"},
        {"key": "m", "value": "<Infinity>", "timestamp": 6, "step": 1},
        {"key": "m", "value": "-Infinity", "timestamp": 7, "step": 2},
        {"key": "m", "value": 1.5, "timestamp": 8, "step": 3},
    ]
    raw = json.dumps({"run_id": run_id, "metrics": metrics})
    raw = raw.replace('"<NaN>"', "NaN").replace('"<Infinity>"', "Infinity")
    assert post(client, "/runs/log-batch", raw).get_json() == {}
    page = client.get(f"{PREFIX}/metrics/get-history?run_id={run_id}&metric_key=m&max_results=3")
    body = page.get_json()
    assert [m["value"] for m in body["metrics"]] == ["NaN", "Infinity", "-Infinity"]
    assert [m["timestamp"] for m in body["metrics"]] == [5, 6, 7]
    token = body["next_page_token"]
    rest = client.get(
        f"{PREFIX}/metrics/get-history?run_id={run_id}&metric_key=m&max_results=3"
        f"&page_token={token}"
    ).get_json()
    assert rest == {"metrics": [{"key": "m", "value": 1.5, "timestamp": 8, "step": 3}]}

    bad = post(client, "/runs/log-metric", {"run_id": run_id, "key": "a,b", "value": 1})
    assert bad.status_code == 400 and mlflow_error(bad)["error_code"] == "INVALID_PARAMETER_VALUE"
    negative = post(
        client, "/runs/log-metric", {"run_id": run_id, "key": "a", "value": 1, "step": -1}
    )
    assert negative.status_code == 400 and "step" in mlflow_error(negative)["message"]
    unknown = post(client, "/runs/log-metric", {"run_id": "abc", "key": "a", "value": 1})
    assert unknown.status_code == 404
    assert mlflow_error(unknown)["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    missing = client.get(f"{PREFIX}/runs/get?run_id=987654")
    assert missing.status_code == 404 and mlflow_error(missing)["error_code"] == (
        "RESOURCE_DOES_NOT_EXIST"
    )
    nowhere = client.get(f"{PREFIX}/artifacts/list?run_id={run_id}")
    assert nowhere.status_code == 404 and mlflow_error(nowhere)["error_code"] == (
        "ENDPOINT_NOT_FOUND"
    )
    not_json = client.post(f"{PREFIX}/runs/log-metric", data="x", content_type="text/plain")
    assert not_json.status_code == 415 and mlflow_error(not_json)["error_code"] == "BAD_REQUEST"
    assert count_points(store_of(app), int(run_id)) == 4


def test_too_large_bodies_get_the_mlflow_shape(make_app: Callable[..., Flask]) -> None:
    client = make_app(MAX_CONTENT_LENGTH=100).test_client()
    response = post(client, "/runs/log-batch", {"run_id": "1", "metrics": [], "x": "y" * 200})
    assert response.status_code == 413 and mlflow_error(response)["error_code"] == "BAD_REQUEST"


# ------------------------------------------------------------------- pure parts


def test_apply_meta_maps_params_and_tags() -> None:
    meta = RunMeta(name="run-1", config={"lr": 0.1}, tags=["base"])
    tags = {"mlflow.runName": "r", "mlflow.source.git.commit": "abc123", "team": "x", "k": ""}
    after = compat.apply_meta(meta, params={"lr": "0.1", "bs": "32"}, tags=tags)
    assert after.name == "r" and after.git_commit == "abc123"
    assert after.config == {
        "lr": 0.1,
        "bs": "32",
        compat.SYSTEM_TAGS_KEY: {"mlflow.source.git.commit": "abc123"},
    }
    assert after.tags == ["base", "team=x", "k="]
    with pytest.raises(compat.MlflowError) as changed:
        compat.apply_meta(after, params={"bs": "64"})
    assert changed.value.mlflow_code == "INVALID_PARAMETER_VALUE"
    gone = compat.apply_meta(after, deleted_tags=["team", "mlflow.source.git.commit"])
    assert gone.tags == ["base", "k="] and compat.SYSTEM_TAGS_KEY not in gone.config
    with pytest.raises(compat.MlflowError) as absent:
        compat.apply_meta(after, deleted_tags=["nope"])
    assert absent.value.mlflow_code == "RESOURCE_DOES_NOT_EXIST"
    with pytest.raises(compat.MlflowError):
        compat.params_of([{"key": compat.SYSTEM_TAGS_KEY, "value": "x"}])
    with pytest.raises(compat.MlflowError):
        compat.tags_of([{"key": "a=b", "value": "x"}])


def test_metric_records_and_statuses() -> None:
    records = compat.metric_records(
        [
            {"key": "a", "value": "NaN", "timestamp": 5, "step": 2},
            {"key": "a", "value": math.inf},
            {"key": "b", "value": "-Infinity", "step": "3"},
        ],
        now_ms=99,
    )
    assert records == [[2, 5, {"a": None}], [0, 99, {"a": "Infinity"}], [3, 99, {"b": "-Infinity"}]]
    with pytest.raises(InvalidMetricKey):
        compat.metric_records([{"key": "has,comma", "value": 1}], now_ms=0)
    for value in (True, "abc", None):
        with pytest.raises(compat.MlflowError):
            compat.metric_records([{"key": "a", "value": value}], now_ms=0)
    assert [compat.tracker_status(s) for s in ("FINISHED", "FAILED", "KILLED", 1)] == [
        "finished",
        "failed",
        "killed",
        "running",
    ]
    with pytest.raises(compat.MlflowError):
        compat.tracker_status("DONE")
    assert compat.mlflow_status("crashed") == "FAILED"
    assert compat.experiment_id_of("0") is None and compat.experiment_id_of("12") == 12
    with pytest.raises(compat.MlflowError):
        compat.experiment_id_of("abc")
    assert compat.project_name_of("Default") == "default"
    assert compat.experiment_filter("name = 'Default'") == ("default", None)
    assert compat.experiment_filter('name ILIKE "a%"') == (None, "a%")


def test_error_body_mapping() -> None:
    cases = {
        ("unauthorized", 401): "UNAUTHENTICATED",
        ("forbidden", 403): "PERMISSION_DENIED",
        ("not_found", 404): "RESOURCE_DOES_NOT_EXIST",
        ("invalid_metric_key", 400): "INVALID_PARAMETER_VALUE",
        ("store_unavailable", 503): "TEMPORARILY_UNAVAILABLE",
        ("unsupported_media_type", 415): "BAD_REQUEST",
        ("schema_error", 500): "INTERNAL_ERROR",
        ("RESOURCE_ALREADY_EXISTS", 400): "RESOURCE_ALREADY_EXISTS",
    }
    for (code, status), expected in cases.items():
        body, out_status = compat.error_body(code, "msg", status)
        assert body == {"error_code": expected, "message": "msg"} and out_status == status
