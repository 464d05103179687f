"""Two MLflow 3 calls with the real ``mlflow`` client against our server, on a real SQLite
file and a real PostgreSQL database: ``mlflow.log_image(image, key=..., step=...)`` (stored
by MLflow under ``images/<key>+step+<n>+...``) shows among the run's media, step by step;
``search_experiments(order_by=[...])`` orders as a real ``mlflow server`` does (the same
calls against one, side by side), and a bad ``order_by`` is MLflow's
INVALID_PARAMETER_VALUE."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import mlflow
import numpy as np
import pytest
from flask import Flask
from mlflow import MlflowClient
from mlflow.entities import ViewType
from mlflow.exceptions import MlflowException
from PIL import Image

from tests.support.mlflow_reference import MlflowReference
from tests.web.test_mlflow_artifacts import start
from tests.web.test_mlflow_compat import mlflow_server, only_run, store_of
from tracker.store import artifacts as astore

__all__ = ["mlflow_server", "start"]  # fixtures, shared with test_mlflow_compat/_artifacts

Start = Callable[..., Flask]

ORDERS: list[list[str]] = [
    [],
    ["name ASC"],
    ["name DESC"],
    ["name"],
    ["creation_time"],
    ["creation_time DESC"],
    ["last_update_time DESC"],
    ["last_update_time ASC", "name DESC"],
    ["experiment_id DESC"],
    ["attribute.experiment_id ASC"],
]


def test_log_image_with_a_key_is_a_media_image_per_step(start: Start) -> None:
    app = start()
    store = store_of(app)
    mlflow.set_experiment("imgs")
    frames = [np.full((8, 8, 3), 40 * step, dtype=np.uint8) for step in range(3)]
    with mlflow.start_run():
        for step, pixels in enumerate(frames):
            mlflow.log_image(pixels, key="samples/val", step=step)
        mlflow.log_image(Image.fromarray(frames[1]), key="x", step=3)
        mlflow.log_image(frames[0], "images/plain.png")  # a file, not a keyed image
    run = only_run(store, "imgs")
    client = app.test_client()
    media = client.get(f"/api/v1/runs/{run.id}/media").json["media"]
    assert media["images"] == {"samples/val": [0, 1, 2], "x": [3]}
    listed = client.get(f"/api/v1/runs/{run.id}/media/images?key=samples/val").json["files"]
    assert [f["step"] for f in listed] == [0, 1, 2]
    assert all(f["path"].startswith("images/samples~val+step+") for f in listed)
    assert not any("compressed" in f["path"] for f in listed)  # the thumbnails are not listed
    # the file the Media tab shows is the image logged, byte for byte a PNG of those pixels
    one = client.get(listed[2]["download_url"])
    assert one.status_code == 200 and one.data.startswith(b"\x89PNG")
    stored = astore.list_artifacts(store, run.id, "images/")
    assert any(a.path == "images/plain.png" for a in stored)
    assert client.get(f"/api/v1/runs/{run.id}/media/images?key=x").json["files"][0]["step"] == 3
    # MLflow's own listing still sees its layout unchanged
    mlflow_run = mlflow.last_active_run()
    assert mlflow_run is not None
    names = [a.path for a in MlflowClient().list_artifacts(mlflow_run.info.run_id, "images")]
    assert sum(1 for n in names if n.startswith("images/x+step+3+")) == 2  # PNG and thumbnail
    bad = client.get(f"/api/v1/runs/{run.id}/media/sounds?key=x")
    assert bad.status_code == 400 and bad.json["error"]["field"] == "kind"
    assert client.get(f"/api/v1/runs/{run.id}/media/images").json["error"]["field"] == "key"


def ordered_names(client: MlflowClient) -> list[list[str]]:
    """Create, delete, and list the experiments in each order of ORDERS."""
    ids = {name: client.create_experiment(name) for name in ("hotel", "foxtrot", "india", "golf")}
    client.delete_experiment(ids["india"])  # its last_update_time: when it was deleted
    return [
        [e.name for e in client.search_experiments(order_by=order, view_type=ViewType.ALL)]
        for order in ORDERS
    ]


@pytest.fixture(scope="module")
def reference_orders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[list[str]]]:
    server = MlflowReference(tmp_path_factory.mktemp("mlflow-reference") / "server")
    try:
        yield ordered_names(MlflowClient(tracking_uri=server.url))
    finally:
        server.stop()


@pytest.mark.slow
def test_search_experiments_orders_as_mlflow_does(
    mlflow_server: Start, reference_orders: list[list[str]]
) -> None:
    mlflow_server()
    ours = ordered_names(MlflowClient())
    assert ours == reference_orders
    # and what that is, spelled out: Default (id 0) is the oldest
    by = dict(zip(map(tuple, ORDERS), ours, strict=True))
    assert by[("name ASC",)] == ["Default", "foxtrot", "golf", "hotel", "india"]
    assert by[("creation_time DESC",)] == ["golf", "india", "foxtrot", "hotel", "Default"]
    assert by[("last_update_time DESC",)][0] == "india"


def test_a_bad_experiment_order_is_invalid_parameter_value(mlflow_server: Start) -> None:
    mlflow_server()
    client = MlflowClient()
    bad = (
        ["tags.team"],
        ["attributes.name"],
        ["name UPWARDS"],
        ["name", "name DESC"],
        ["start_time"],
    )
    for order in bad:
        with pytest.raises(MlflowException) as caught:
            client.search_experiments(order_by=order)
        assert caught.value.error_code == "INVALID_PARAMETER_VALUE", order


def test_order_by_in_a_get_query_string(mlflow_server: Start) -> None:
    app = mlflow_server()
    for name in ("b", "a", "c"):
        MlflowClient().create_experiment(name)
    answer = app.test_client().get(
        "/api/2.0/mlflow/experiments/search?max_results=10&order_by=name%20DESC"
    )
    assert [e["name"] for e in answer.json["experiments"]] == ["c", "b", "a", "Default"]


def test_metric_keys_with_spaces_and_colons_are_kept_and_searchable(mlflow_server: Start) -> None:
    """What web/API.md says of metric keys: ``val loss`` and ``val:acc`` are stored as they
    are and found by ``search_runs``; a key breaking the rule is refused, naming the part."""
    mlflow_server()
    client = MlflowClient()
    experiment = client.create_experiment("keys")
    runs = []
    for loss, acc in ((0.5, 0.75), (0.9, 0.25)):
        run = client.create_run(experiment).info.run_id
        client.log_metric(run, "val loss", loss, step=1)
        client.log_metric(run, "val:acc", acc, step=1)
        runs.append(run)
    assert client.get_run(runs[0]).data.metrics == {"val loss": 0.5, "val:acc": 0.75}
    for query in ("metrics.`val loss` < 0.6", 'metrics."val:acc" > 0.5'):
        found = client.search_runs([experiment], filter_string=query)
        assert [r.info.run_id for r in found] == [runs[0]], query
    ordered = client.search_runs([experiment], order_by=["metrics.`val:acc` ASC"])
    assert [r.info.run_id for r in ordered] == [runs[1], runs[0]]
    with pytest.raises(MlflowException) as caught:
        client.log_metric(runs[0], "a//b", 1.0)
    assert caught.value.error_code == "INVALID_PARAMETER_VALUE"
    assert "metric key 'a//b' has '//'" in caught.value.message
