"""Real Lightning and real transformers training through their MLflow integrations, with
artifacts, against a real server (``web/views/mlflow_artifacts.py``): Lightning's
``MLFlowLogger(log_model=True | "all")`` and HF ``report_to=["mlflow"]`` with
``HF_MLFLOW_LOG_ARTIFACTS=1`` complete training on tiny CPU models (built from configs, no
downloads), the run ends ``finished``, and the checkpoints arrive byte-exact."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlflow
import pytest
import torch
from flask import Flask
from mlflow.tracking._tracking_service import utils as tracking_utils

from tests.web.test_mlflow_compat import mlflow_server, only_run, store_of
from tracker.store import artifacts as astore
from tracker.store.metrics import metric_history

__all__ = ["mlflow_server"]  # the fixture, shared with test_mlflow_compat

pytestmark = pytest.mark.slow
Start = Callable[..., Flask]


@pytest.fixture
def start(mlflow_server: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Start:
    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", str(tmp_path / "blobs"))
    monkeypatch.setattr(tracking_utils, "_artifact_repos_cache", type(_cache())())
    monkeypatch.setattr(tracking_utils, "_tracking_uri", None)  # set by MLFlowLogger
    monkeypatch.chdir(tmp_path)
    return mlflow_server


def _cache() -> Any:
    return tracking_utils._artifact_repos_cache


def stored_bytes(app: Flask, run_id: int, path: str) -> bytes:
    with astore.open_artifact(store_of(app), run_id, path) as handle:
        return handle.read()


@pytest.mark.parametrize("log_model", [True, "all"], ids=["log_model", "all"])
def test_lightning_mlflow_logger_logs_checkpoints(
    start: Start, tmp_path: Path, log_model: Any
) -> None:
    lightning = pytest.importorskip("lightning.pytorch", reason="lightning not installed")
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import MLFlowLogger

    app = start()

    class Tiny(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.save_hyperparameters({"width": 4})
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, _: int) -> torch.Tensor:
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    logger = MLFlowLogger(
        experiment_name="lit",
        tracking_uri=os.environ["MLFLOW_TRACKING_URI"],
        log_model=log_model,
    )
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_top_k=-1, every_n_epochs=1)
    trainer = lightning.Trainer(
        max_epochs=2,
        logger=logger,
        callbacks=[checkpoints],
        accelerator="cpu",
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
    )
    trainer.fit(Tiny(), loader)

    run = only_run(store_of(app), "lit")
    assert run.status == "finished"
    assert run.config["width"] == "4"
    stored = {a.path for a in astore.list_artifacts(store_of(app), run.id)}
    local = sorted((tmp_path / "ckpt").glob("*.ckpt"))
    assert len(local) == 2
    for ckpt in local:
        (path,) = [p for p in stored if p.endswith(f"/{ckpt.name}")]
        assert stored_bytes(app, run.id, path) == ckpt.read_bytes()


def test_hf_trainer_with_mlflow_artifacts(
    start: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_MLFLOW_LOG_ARTIFACTS", "1")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "hf")
    app = start()

    config = transformers.BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    rows = [
        {"input_ids": torch.randint(1, 50, (8,)), "labels": torch.tensor(i % 2)} for i in range(16)
    ]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        report_to=["mlflow"],
        max_steps=4,
        per_device_train_batch_size=4,
        save_strategy="steps",
        save_steps=4,
        logging_steps=1,
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=rows)
    trainer.train()
    if mlflow.active_run() is not None:  # the callback ends the run it started
        pytest.fail("the HF MLflow callback left its run active")

    run = only_run(store_of(app), "hf")
    assert run.status == "finished"
    history = metric_history(store_of(app), run.id, "loss")
    assert [p.step for p in history] == [1, 2, 3, 4]
    weights = tmp_path / "out" / "checkpoint-4" / "model.safetensors"
    stored = {a.path for a in astore.list_artifacts(store_of(app), run.id)}
    (path,) = [p for p in stored if p.endswith("checkpoint-4/model.safetensors")]
    assert stored_bytes(app, run.id, path) == weights.read_bytes()
