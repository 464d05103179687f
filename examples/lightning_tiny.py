"""A tiny Lightning run recorded by ``TrackerLogger`` (CPU, random data, seconds).

    python examples/lightning_tiny.py --epochs 3
    python examples/lightning_tiny.py --mlflow      # the same run through Lightning's MLFlowLogger

The module's hyperparameters become the run's config, ``train/loss`` is logged every step and
``val/loss`` / ``val/acc`` every epoch, and every
epoch's checkpoint is recorded with its sha256. As a queued job that is retried
(``tracker submit --max-retries 1 -- python examples/lightning_tiny.py``), the second attempt
resumes from the last verified checkpoint. ``--fail-after-epoch N`` kills the first attempt
(SIGKILL, like a preemption) after epoch N's checkpoint, to show exactly that.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tracker.integrations.lightning import TrackerLogger


class TinyClassifier(L.LightningModule):
    def __init__(self, hidden: int = 16, lr: float = 0.05, features: int = 8) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self.net(x)
        self.log("val/loss", nn.functional.cross_entropy(logits, y))
        self.log("val/acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def data(n: int, features: int = 8, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return TensorDataset(x, y)


class FailAfterEpoch(Callback):
    """Kill the first attempt of a queued job after epoch N's checkpoint was recorded."""

    def __init__(self, epoch: int, logger: TrackerLogger) -> None:
        self.epoch = epoch
        self.logger = logger

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # the next epoch starts: epoch N's checkpoint is saved and recorded by now
        if trainer.current_epoch == self.epoch + 1 and os.environ.get("TRACKER_ATTEMPT") == "1":
            if self.logger.run is not None:
                self.logger.run.flush()
            os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--project", default="lightning-tiny")
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--strategy", default="auto")
    parser.add_argument("--fail-after-epoch", type=int, default=None)
    parser.add_argument("--mlflow", action="store_true", help="log through MLFlowLogger instead")
    args = parser.parse_args(argv)

    L.seed_everything(0, workers=True)
    model = TinyClassifier(hidden=args.hidden, lr=args.lr)
    train = DataLoader(data(64), batch_size=16, shuffle=True)
    val = DataLoader(data(32, seed=1), batch_size=16)
    checkpoints = ModelCheckpoint(dirpath=args.checkpoint_dir, save_top_k=-1)
    callbacks: list[Callback] = [checkpoints]
    logger: Any
    if args.mlflow:
        from lightning.pytorch.loggers import MLFlowLogger

        # MLFlowLogger reads MLFLOW_TRACKING_URI when Lightning is imported: pass it now
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        logger = MLFlowLogger(experiment_name=args.project, tracking_uri=uri, log_model=False)
        resume = None
    else:
        logger = TrackerLogger(project=args.project)
        resume = logger.resume_checkpoint()
        if args.fail_after_epoch is not None:
            callbacks.append(FailAfterEpoch(args.fail_after_epoch, logger))
    trainer = L.Trainer(
        max_epochs=args.epochs,
        accelerator="cpu",
        devices=args.devices,
        strategy=args.strategy,
        logger=logger,
        callbacks=callbacks,
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
    )
    trainer.fit(model, train, val, ckpt_path=resume)
    if trainer.is_global_zero:
        print(f"run {logger.version}: resumed from {resume}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
