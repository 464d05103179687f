"""MLflow's artifact proxy (``web/views/mlflow_artifacts.py``), logged models and run inputs
(``web/views/mlflow_models.py``) with the real ``mlflow`` client against a real server (a
thread on a free port) on a real SQLite file and a real PostgreSQL database: every kind of
artifact logged, listed and downloaded byte-exact, a > 100 MB multipart upload, deletes,
MLflow-shaped errors, ``log_input``, and ``mlflow.pytorch.log_model`` / ``load_model``."""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pytest
import requests
from flask import Flask
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.tracking._tracking_service import utils as tracking_utils

from tests.web.test_mlflow_compat import mlflow_server, only_run, store_of
from tracker.store import artifacts as astore
from tracker.web.core import mlflow_artifacts as artcore

__all__ = ["mlflow_server"]  # the fixture, shared with test_mlflow_compat

Start = Callable[..., Flask]


@pytest.fixture
def start(mlflow_server: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Start:
    """``mlflow_server`` with an artifact root (PostgreSQL stores need one). The client caches
    a run's artifact repository (and so the server's URL) by run id, and every test's store
    starts at run 1: start with an empty cache."""
    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", str(tmp_path / "blobs"))
    monkeypatch.setattr(tracking_utils, "_artifact_repos_cache", type(_cache())())
    monkeypatch.setattr(tracking_utils, "_tracking_uri", None)  # set by MLFlowLogger
    return mlflow_server


def _cache() -> Any:
    return tracking_utils._artifact_repos_cache


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_every_kind_of_artifact_round_trips_byte_exact(start: Start, tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import plotly.graph_objects as go
    from PIL import Image

    store = store_of(start())
    src = tmp_path / "src"
    (src / "deep" / "er").mkdir(parents=True)
    blob = os.urandom(300_000)
    (src / "weights.bin").write_bytes(blob)
    (src / "deep" / "notes.txt").write_text("héllo\n")
    (src / "deep" / "er" / "empty.dat").write_bytes(b"")
    figure, axes = plt.subplots()
    axes.plot([1, 2, 3], [3, 1, 2])
    scatter = go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2]))
    pixels = np.arange(32 * 32 * 3, dtype=np.uint8).reshape(32, 32, 3)

    mlflow.set_experiment("arts")
    with mlflow.start_run() as active:
        mlflow.log_artifact(str(src / "weights.bin"))
        mlflow.log_artifact(str(src / "weights.bin"), artifact_path="copies/a")
        mlflow.log_artifacts(str(src / "deep"), artifact_path="tree")
        mlflow.log_dict({"lr": 0.1, "layers": [1, 2]}, "conf/config.json")
        mlflow.log_dict({"lr": 0.1}, "conf/config.yaml")
        mlflow.log_text("plain text ✓", "notes/readme.txt")
        mlflow.log_figure(figure, "plots/curve.png")
        mlflow.log_figure(scatter, "plots/scatter.html")
        mlflow.log_image(pixels, "images/array.png")
        mlflow.log_image(Image.fromarray(pixels), "images/pil.png")
    run_id = active.info.run_id
    assert active.info.artifact_uri.startswith(f"mlflow-artifacts:/{active.info.experiment_id}/")

    client = MlflowClient()
    top = client.list_artifacts(run_id)
    assert [(f.path, f.is_dir) for f in top] == [
        ("conf", True),
        ("copies", True),
        ("images", True),
        ("notes", True),
        ("plots", True),
        ("tree", True),
        ("weights.bin", False),
    ]
    assert next(f for f in top if f.path == "weights.bin").file_size == len(blob)
    assert [f.path for f in client.list_artifacts(run_id, "tree")] == ["tree/er", "tree/notes.txt"]
    assert client.list_artifacts(run_id, "weights.bin") == []  # a file lists as nothing

    out = Path(mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(tmp_path / "dl")))
    got = tree(out)
    assert got["weights.bin"] == blob and got["copies/a/weights.bin"] == blob
    assert got["tree/notes.txt"] == "héllo\n".encode() and got["tree/er/empty.dat"] == b""
    assert json.loads(got["conf/config.json"]) == {"lr": 0.1, "layers": [1, 2]}
    assert got["conf/config.yaml"].decode().strip() == "lr: 0.1"
    assert got["notes/readme.txt"].decode() == "plain text ✓"
    assert got["plots/curve.png"].startswith(b"\x89PNG")
    assert b"plotly" in got["plots/scatter.html"] and b"[3,1,2]" in got["plots/scatter.html"]
    assert np.array_equal(np.asarray(Image.open(out / "images/array.png")), pixels)
    assert np.array_equal(np.asarray(Image.open(out / "images/pil.png")), pixels)
    one = mlflow.artifacts.download_artifacts(
        run_id=run_id, artifact_path="tree/notes.txt", dst_path=str(tmp_path / "one")
    )
    assert filecmp.cmp(one, src / "deep" / "notes.txt", shallow=False)

    # the same files are the run's artifacts in the tracker, blobs content addressed
    run = only_run(store, "arts")
    stored = {a.path: a for a in astore.list_artifacts(store, run.id)}
    assert set(stored) == set(got)
    assert stored["weights.bin"].sha256 == hashlib.sha256(blob).hexdigest()
    assert stored["weights.bin"].sha256 == stored["copies/a/weights.bin"].sha256
    with astore.open_artifact(store, run.id, "notes/readme.txt") as handle:
        assert handle.read() == "plain text ✓".encode()


def test_delete_a_file_and_a_folder(start: Start, tmp_path: Path) -> None:
    store = store_of(start())
    mlflow.set_experiment("dels")
    with mlflow.start_run() as active:
        mlflow.log_text("a", "keep.txt")
        mlflow.log_text("b", "sub/one.txt")
        mlflow.log_text("c", "sub/deeper/two.txt")
        mlflow.log_text("d", "subway.txt")  # shares a prefix with "sub", not the folder
    repo = get_artifact_repository(active.info.artifact_uri)
    repo.delete_artifacts("sub/one.txt")
    run = only_run(store, "dels")
    assert sorted(a.path for a in astore.list_artifacts(store, run.id)) == [
        "keep.txt",
        "sub/deeper/two.txt",
        "subway.txt",
    ]
    repo.delete_artifacts("sub")
    assert sorted(a.path for a in astore.list_artifacts(store, run.id)) == [
        "keep.txt",
        "subway.txt",
    ]
    repo.delete_artifacts("sub")  # nothing there: no error, as in MLflow
    with pytest.raises(MlflowException, match=r"one\.txt"):
        mlflow.artifacts.download_artifacts(
            run_id=active.info.run_id, artifact_path="sub/one.txt", dst_path=str(tmp_path)
        )


def test_errors_are_mlflow_shaped(start: Start) -> None:
    start()
    base = os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow-artifacts/artifacts"
    with mlflow.start_run() as active:
        pass
    root = f"{active.info.experiment_id}/{active.info.run_id}/artifacts"
    cases = [
        ("GET", f"{base}/{root}/missing.txt", 404, "RESOURCE_DOES_NOT_EXIST"),
        ("GET", f"{base}/0/999999/artifacts/x.txt", 404, "RESOURCE_DOES_NOT_EXIST"),
        ("GET", f"{base}/{root}/a/%2e%2e/b.txt", 400, "INVALID_PARAMETER_VALUE"),
        ("PUT", f"{base}/{root}/a\\b.txt", 400, "INVALID_PARAMETER_VALUE"),
        ("PUT", f"{base}/nothing/here.txt", 404, "RESOURCE_DOES_NOT_EXIST"),
        ("PUT", f"{base}/{root}", 400, "INVALID_PARAMETER_VALUE"),
    ]
    for method, url, status, code in cases:
        response = requests.request(method, url, data=b"x", timeout=30)
        assert response.status_code == status, (url, response.text)
        assert set(response.json()) == {"error_code", "message"}
        assert response.json()["error_code"] == code, (url, response.text)


def test_artifacts_need_the_token(start: Start, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.web import TOKEN

    start(TOKEN=TOKEN)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    with mlflow.start_run() as active:
        mlflow.log_text("secret", "s.txt")
    url = (
        os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow-artifacts/artifacts/"
        f"{active.info.experiment_id}/{active.info.run_id}/artifacts/s.txt"
    )
    assert requests.get(url, timeout=30).status_code == 401
    assert requests.put(url, data=b"overwrite", timeout=30).json()["error_code"] == (
        "UNAUTHENTICATED"
    )
    got = requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert got.content == b"secret"


@pytest.mark.slow
@pytest.mark.parametrize("multipart", [True, False], ids=["multipart", "single-put"])
def test_a_file_over_100_mb(
    start: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, multipart: bool
) -> None:
    """The client switches to multipart at MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE (500 MB
    by default; lowered here to keep the test's disk use sane) in 10 MB parts; below it, one
    streamed PUT, which the server spools to disk (no 8 MiB request limit)."""
    monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE", str(100 * 1024**2))
    if not multipart:
        monkeypatch.setenv("MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD", "false")
    store = store_of(start())
    big = tmp_path / "big.bin"
    digest = hashlib.sha256()
    with big.open("wb") as out:
        for _ in range(105):
            chunk = os.urandom(1024**2)
            digest.update(chunk)
            out.write(chunk)
    mlflow.set_experiment("big")
    with mlflow.start_run() as active:
        mlflow.log_artifact(str(big), artifact_path="data")
    run = only_run(store, "big")
    info = astore.get_artifact(store, run.id, "data/big.bin")
    assert (info.size, info.sha256) == (105 * 1024**2, digest.hexdigest())
    got = mlflow.artifacts.download_artifacts(
        run_id=active.info.run_id, artifact_path="data/big.bin", dst_path=str(tmp_path / "dl")
    )
    assert filecmp.cmp(got, big, shallow=False)


def test_multipart_abort_and_bad_parts(start: Start) -> None:
    start()
    uri = os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow-artifacts/mpu"
    with mlflow.start_run() as active:
        pass
    root = f"{active.info.experiment_id}/{active.info.run_id}/artifacts/d"
    created = requests.post(
        f"{uri}/create/{root}", json={"path": "/tmp/x.bin", "num_parts": 2}, timeout=30
    ).json()
    assert [c["part_number"] for c in created["credentials"]] == [1, 2]
    put = requests.put(created["credentials"][0]["url"], data=b"part one", timeout=30)
    assert put.status_code == 200 and put.headers["ETag"]
    parts = [{"part_number": 1, "etag": put.headers["ETag"]}]
    incomplete = requests.post(
        f"{uri}/complete/{root}",
        json={"path": "/tmp/x.bin", "upload_id": created["upload_id"], "parts": parts},
        timeout=30,
    )
    assert incomplete.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    aborted = requests.post(
        f"{uri}/abort/{root}",
        json={"path": "/tmp/x.bin", "upload_id": created["upload_id"]},
        timeout=30,
    )
    assert aborted.status_code == 200
    late = requests.put(created["credentials"][1]["url"], data=b"two", timeout=30)
    assert late.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    assert MlflowClient().list_artifacts(active.info.run_id) == []


# ------------------------------------------------------------------ inputs, models


def test_log_input_is_kept_with_the_run(start: Start) -> None:
    import pandas as pd

    store = store_of(start())
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [0, 1, 0]})
    dataset = mlflow.data.from_pandas(frame, source="s3://bucket/train.csv", name="train")
    mlflow.set_experiment("inputs")
    with mlflow.start_run() as active:
        mlflow.log_input(dataset, context="training", tags={"split": "a"})
        mlflow.log_input(dataset, context="training", tags={"split": "a"})  # kept once
        mlflow.log_params({"lr": "0.1"})
    fetched = MlflowClient().get_run(active.info.run_id)
    inputs = fetched.inputs.dataset_inputs
    assert len(inputs) == 1
    assert (inputs[0].dataset.name, inputs[0].dataset.digest) == ("train", dataset.digest)
    assert inputs[0].dataset.source_type == "s3"
    assert json.loads(inputs[0].dataset.source)["uri"] == "s3://bucket/train.csv"
    assert {t.key: t.value for t in inputs[0].tags} == {
        "mlflow.data.context": "training",
        "split": "a",
    }
    assert fetched.data.params == {"lr": "0.1"}  # the inputs are not params
    run = only_run(store, "inputs")
    assert run.config["_mlflow_inputs"][0]["name"] == "train"


def test_pytorch_log_model_and_load_model(start: Start, tmp_path: Path) -> None:
    import torch

    store = store_of(start())
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    x = torch.randn(5, 4)
    mlflow.set_experiment("models")
    with mlflow.start_run() as active:
        mlflow.log_text("not a model", "model-notes.txt")
        info = mlflow.pytorch.log_model(
            net, name="net", params={"hidden": 3}, input_example=x.numpy()
        )
    run_id = active.info.run_id
    assert info.model_uri == f"models:/{info.model_id}"

    by_id = mlflow.pytorch.load_model(info.model_uri)
    by_run = mlflow.pytorch.load_model(f"runs:/{run_id}/net")
    with torch.no_grad():
        for loaded in (by_id, by_run):
            assert torch.equal(loaded(x), net(x))

    client = MlflowClient()
    model = client.get_logged_model(info.model_id)
    assert (model.name, model.source_run_id, model.status.to_int()) == ("net", run_id, 2)
    assert model.params == {"hidden": "3"}
    found = client.search_logged_models([active.info.experiment_id], filter_string="name = 'net'")
    assert [m.model_id for m in found] == [info.model_id]
    # the run's own artifacts do not list the model folder; the tracker shows its files
    assert [f.path for f in client.list_artifacts(run_id)] == ["model-notes.txt"]
    run = only_run(store, "models")
    paths = {a.path for a in astore.list_artifacts(store, run.id)}
    assert f"{artcore.MODELS_PREFIX}/{info.model_id}/MLmodel" in paths

    client.set_logged_model_tags(info.model_id, {"stage": "dev"})
    assert client.get_logged_model(info.model_id).tags["stage"] == "dev"
    client.delete_logged_model(info.model_id)
    with pytest.raises(MlflowException, match="does not exist"):
        client.get_logged_model(info.model_id)
    assert {a.path for a in astore.list_artifacts(store, run.id)} == {"model-notes.txt"}


def test_log_model_without_a_run(start: Start) -> None:
    import torch

    store = store_of(start())
    mlflow.set_experiment("loose")
    example = torch.zeros(1, 2).numpy()
    info = mlflow.pytorch.log_model(
        torch.nn.Linear(2, 1), name="loose-model", input_example=example
    )
    loaded = mlflow.pytorch.load_model(info.model_uri)
    assert loaded(torch.ones(1, 2)).shape == (1, 1)
    run = only_run(store, "loose")  # the model's own run holds its files
    assert (run.name, run.status) == ("loose-model", "finished")
