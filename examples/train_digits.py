"""Train a small CNN (or MLP) on 8x8 handwritten digits on CPU, tracked by ``tracker``.

    python examples/train_digits.py                      # defaults, ~10 s on a laptop CPU
    python examples/train_digits.py --lr 1e-3 --epochs 3 --model.width 64
    tracker submit examples/train_digits.py -c lr=3e-4 -c model.width=64

Data: scikit-learn's bundled ``load_digits`` (1,797 images, no download) when scikit-learn
is installed, otherwise procedurally drawn seven-segment digits with random shifts, stroke
intensity and noise. The run config's ``data`` field says which one a run used.

Config precedence: the defaults below < command-line flags < the config submitted with a
queued job (``tracker.config`` has it merged in). Every epoch the script logs validation
metrics, media (sample predictions, a confusion matrix, weight histograms: the dashboard's
Media tab) and saves a checkpoint; started with ``TRACKER_RESUME_CHECKPOINT`` set (the worker
sets it when it retries a job), it loads that checkpoint and continues from its epoch/step.
Seeds are re-applied per epoch, so a resumed run repeats exactly what the uninterrupted run
would have done.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import tracker

DATA_SEED = 1234  # the train/val split and synthetic images do not change with `seed`
VAL_FRACTION = 0.2
SYNTHETIC_SIZE = 1800

CHOICES = {
    "optimizer": ("adam", "sgd"),
    "schedule": ("cosine", "step"),
    "data": ("sklearn", "synthetic"),
    "model.kind": ("cnn", "mlp"),
}


def default_config() -> dict[str, Any]:
    """The script's defaults; ``data`` is scikit-learn's digits when that is installed."""
    has_sklearn = importlib.util.find_spec("sklearn") is not None
    return {
        "lr": 3e-3,
        "batch_size": 64,
        "epochs": 15,
        "optimizer": "adam",
        "momentum": 0.9,
        "weight_decay": 0.0,
        "schedule": "cosine",
        "seed": 0,
        "dropout": 0.1,
        "num_workers": 0,
        "threads": 1,
        "data": "sklearn" if has_sklearn else "synthetic",
        "model": {"kind": "cnn", "width": 32, "layers": 2},
    }


# ----------------------------------------------------------------------- config


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _set_path(config: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for name in parents:
        config = config.setdefault(name, {})
    config[leaf] = value


def parse_args(argv: Sequence[str] | None, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Command-line overrides (``--lr 1e-3 --model.width 64``) as a nested dict."""
    parser = argparse.ArgumentParser(
        description="Train a small digit classifier and track it.",
        argument_default=argparse.SUPPRESS,
    )
    for key, value in _flatten(defaults).items():
        names = [f"--{key}"]
        if "_" in key:
            names.append(f"--{key.replace('_', '-')}")
        parser.add_argument(
            *names,
            dest=key,
            type=type(value),
            choices=CHOICES.get(key),
            metavar=None if key in CHOICES else type(value).__name__.upper(),
            help=f"default: {value}",
        )
    overrides: dict[str, Any] = {}
    for key, value in vars(parser.parse_args(argv)).items():
        _set_path(overrides, key, value)
    return overrides


def merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(out.get(key), Mapping) and isinstance(value, Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def check_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first config value the script cannot use."""
    flat = _flatten(config)
    for key, allowed in CHOICES.items():
        if flat.get(key) not in allowed:
            raise ValueError(f"config {key}={flat.get(key)!r}: must be one of {allowed}")
    for key in ("batch_size", "epochs", "model.width", "model.layers"):
        if not isinstance(flat.get(key), int) or flat[key] < 1:
            raise ValueError(f"config {key}={flat.get(key)!r}: must be an int >= 1")
    for key in ("num_workers", "threads"):
        if not isinstance(flat.get(key), int) or flat[key] < 0:
            raise ValueError(f"config {key}={flat.get(key)!r}: must be an int >= 0")
    if not 0.0 <= float(flat["dropout"]) < 1.0:
        raise ValueError(f"config dropout={flat['dropout']!r}: must be in [0, 1)")
    if float(flat["lr"]) <= 0.0:
        raise ValueError(f"config lr={flat['lr']!r}: must be > 0")


# ------------------------------------------------------------------------- data


def sklearn_digits() -> tuple[torch.Tensor, torch.Tensor]:
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise RuntimeError(
            "data=sklearn needs scikit-learn (pip install scikit-learn); or use data=synthetic"
        ) from exc
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32) / 16.0
    return images.unsqueeze(1), torch.tensor(digits.target, dtype=torch.long)


# Lit segments of 0..9. a: top, b/c: upper/lower right, d: bottom, e/f: lower/upper left, g: middle
_SEGMENTS = (
    "abcdef",
    "bc",
    "abdeg",
    "abcdg",
    "bcfg",
    "acdfg",
    "acdefg",
    "abc",
    "abcdefg",
    "abcdfg",
)
_STROKES = {  # (rows, cols) of each segment in a 7x4 glyph
    "a": (slice(0, 1), slice(0, 4)),
    "b": (slice(0, 4), slice(3, 4)),
    "c": (slice(3, 7), slice(3, 4)),
    "d": (slice(6, 7), slice(0, 4)),
    "e": (slice(3, 7), slice(0, 1)),
    "f": (slice(0, 4), slice(0, 1)),
    "g": (slice(3, 4), slice(0, 4)),
}


def synthetic_digits(n: int = SYNTHETIC_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
    """Seven-segment digits placed at a random offset in 8x8, with dim strokes and noise."""
    gen = torch.Generator().manual_seed(DATA_SEED)
    glyphs = torch.zeros(10, 7, 4)
    for digit, segments in enumerate(_SEGMENTS):
        for segment in segments:
            glyphs[digit][_STROKES[segment]] = 1.0
    labels = torch.randint(0, 10, (n,), generator=gen)
    rows = torch.randint(0, 2, (n,), generator=gen)
    cols = torch.randint(0, 5, (n,), generator=gen)
    images = torch.zeros(n, 8, 8)
    for i in range(n):
        r, c = int(rows[i]), int(cols[i])
        images[i, r : r + 7, c : c + 4] = glyphs[labels[i]]
    keep = torch.rand(n, 8, 8, generator=gen) > 0.05  # broken strokes
    intensity = 0.5 + 0.5 * torch.rand(n, 1, 1, generator=gen)
    noise = 0.15 * torch.randn(n, 8, 8, generator=gen)
    images = (images * keep * intensity + noise).clamp(0.0, 1.0)
    return images.unsqueeze(1), labels


def load_data(source: str) -> tuple[TensorDataset, TensorDataset]:
    """(train, val) datasets of (N, 1, 8, 8) images in [0, 1] and int labels."""
    images, labels = sklearn_digits() if source == "sklearn" else synthetic_digits()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(DATA_SEED))
    n_val = int(len(labels) * VAL_FRACTION)
    val, train = order[:n_val], order[n_val:]
    return TensorDataset(images[train], labels[train]), TensorDataset(images[val], labels[val])


def make_loaders(
    train: TensorDataset, val: TensorDataset, config: Mapping[str, Any]
) -> tuple[DataLoader, DataLoader]:
    common = {"batch_size": config["batch_size"], "num_workers": config["num_workers"]}
    shuffle_gen = torch.Generator().manual_seed(config["seed"])
    return (
        DataLoader(train, shuffle=True, generator=shuffle_gen, **common),
        DataLoader(val, shuffle=False, **common),
    )


# ---------------------------------------------------------------- model & optim


def build_model(config: Mapping[str, Any]) -> nn.Module:
    """``model.layers`` conv (or linear) layers of ``model.width`` units, then a classifier."""
    spec, dropout = config["model"], config["dropout"]
    width, layers = spec["width"], spec["layers"]
    modules: list[nn.Module] = []
    if spec["kind"] == "mlp":
        modules.append(nn.Flatten())
        size = 64
        for _ in range(layers):
            modules += [nn.Linear(size, width), nn.ReLU(), nn.Dropout(dropout)]
            size = width
        modules.append(nn.Linear(size, 10))
    else:
        channels = 1
        for _ in range(layers):
            modules += [nn.Conv2d(channels, width, 3, padding=1), nn.ReLU()]
            channels = width
        modules += [nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(dropout), nn.Linear(width * 16, 10)]
    return nn.Sequential(*modules)


def build_optimizer(model: nn.Module, config: Mapping[str, Any]) -> torch.optim.Optimizer:
    params, lr, wd = model.parameters(), config["lr"], config["weight_decay"]
    if config["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=config["momentum"], weight_decay=wd)
    return torch.optim.Adam(params, lr=lr, weight_decay=wd)


def lr_factor(schedule: str, total_steps: int) -> Callable[[int], float]:
    """Multiplier of the base lr after ``done`` steps: cosine to 0, or x0.1 at 50% and 75%."""

    def factor(done: int) -> float:
        progress = min(done, total_steps) / total_steps
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        return 0.1 ** ((progress >= 0.5) + (progress >= 0.75))

    return factor


# ---------------------------------------------------------------------- training


def train_epoch(
    model: nn.Module,
    loader: DataLoader,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LambdaLR,
    step: int,
) -> tuple[int, torch.Tensor]:
    """One pass over ``loader``; logs every step. Returns (steps done, mean train loss)."""
    model.train()
    total = torch.zeros(())
    for images, labels in loader:
        lr = optimizer.param_groups[0]["lr"]  # the lr this update uses
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        step += 1
        loss = loss.detach()
        acc = (logits.argmax(dim=1) == labels).float().mean()
        tracker.log({"train/loss": loss, "train/acc": acc, "lr": lr}, step=step)
        total += loss
    return step, total / max(len(loader), 1)


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader) -> tuple[torch.Tensor, float]:
    """(mean loss as a 0-d tensor, accuracy in [0, 1]) over ``loader``."""
    model.eval()
    loss_sum, correct, count = torch.zeros(()), 0, 0
    for images, labels in loader:
        logits = model(images)
        loss_sum += F.cross_entropy(logits, labels, reduction="sum")
        correct += int((logits.argmax(dim=1) == labels).sum())
        count += len(labels)
    return loss_sum / count, correct / count


SAMPLES = 16  # validation digits shown per epoch
ZOOM = 4  # 8x8 digits drawn as 32x32 (nearest neighbour)


@torch.no_grad()
def log_media(model: nn.Module, val: TensorDataset, step: int) -> None:
    """What the dashboard's Media tab shows for an epoch: the first validation digits as a
    grid captioned with the predictions, the confusion matrix as an image (rows: the true
    digit, columns: the predicted one, each row scaled to its largest count), and the
    distribution of every weight matrix. Uses no random numbers (a resumed run repeats)."""
    model.eval()
    images, labels = val.tensors
    predicted = model(images).argmax(dim=1)
    grid = images[:SAMPLES].repeat_interleave(ZOOM, dim=2).repeat_interleave(ZOOM, dim=3)
    shown = " ".join(str(int(p)) for p in predicted[:SAMPLES])
    tracker.log_image("val/samples", grid, step=step, caption=f"predicted: {shown}")
    confusion = torch.zeros(10, 10)
    confusion.index_put_((labels, predicted), torch.ones(len(labels)), accumulate=True)
    confusion = confusion / confusion.amax(dim=1, keepdim=True).clamp(min=1.0)
    cells = confusion.repeat_interleave(16, dim=0).repeat_interleave(16, dim=1)
    tracker.log_image("val/confusion", cells, step=step, caption="rows: true, columns: predicted")
    for name, param in model.named_parameters():
        if param.dim() > 1:
            tracker.log_histogram(f"weights/{name}", param, step=step)


def restore(
    path: str,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LambdaLR,
    factor: Callable[[int], float],
) -> tuple[int, int]:
    """Load a checkpoint saved by this script; returns (epochs done, steps done)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    # The lr follows *this* run's schedule (it differs when --epochs changed on resume).
    for group, base in zip(optimizer.param_groups, scheduler.base_lrs, strict=True):
        group["lr"] = base * factor(scheduler.last_epoch)
    return int(state["epoch"]), int(state["step"])


def main(argv: Sequence[str] | None = None) -> None:
    defaults = default_config()
    config = merge(defaults, parse_args(argv, defaults))
    with tracker.init(project="digits", config=config) as run:
        config = tracker.config  # includes the overrides of a submitted job
        check_config(config)
        print(f"run {run.id}: {config}", flush=True)
        if config["threads"]:
            torch.set_num_threads(config["threads"])
        torch.manual_seed(config["seed"])
        train_set, val_set = load_data(config["data"])
        train_loader, val_loader = make_loaders(train_set, val_set, config)
        model = build_model(config)
        optimizer = build_optimizer(model, config)
        factor = lr_factor(config["schedule"], config["epochs"] * len(train_loader))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        epoch, step = 0, 0
        path = tracker.resume_checkpoint()
        if path:
            epoch, step = restore(path, model, optimizer, scheduler, factor)
            print(f"resuming from {path} at epoch {epoch} (step {step})", flush=True)
        fit(model, (train_loader, val_loader), optimizer, scheduler, config, epoch, step)


def fit(
    model: nn.Module,
    loaders: tuple[DataLoader, DataLoader],
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LambdaLR,
    config: Mapping[str, Any],
    start_epoch: int,
    step: int,
) -> None:
    """Train from ``start_epoch``/``step`` to ``config['epochs']``, checkpointing each epoch."""
    started = time.perf_counter()
    val_acc = float("nan")
    for epoch in range(start_epoch, config["epochs"]):
        torch.manual_seed(config["seed"] * 10_007 + epoch)  # dropout: same per epoch on resume
        loaders[0].generator.manual_seed(config["seed"] * 10_007 + epoch)  # shuffling too
        step, train_loss = train_epoch(model, loaders[0], optimizer, scheduler, step)
        val_loss, val_acc = evaluate(model, loaders[1])
        tracker.log({"val/loss": val_loss, "val/acc": val_acc, "epoch": epoch + 1}, step=step)
        val_set = loaders[1].dataset
        assert isinstance(val_set, TensorDataset)
        log_media(model, val_set, step)
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "epoch": epoch + 1,
            "step": step,
            "config": dict(config),
        }
        tracker.save_checkpoint(state, step=step, metrics={"val/acc": val_acc})
        print(
            f"epoch {epoch + 1}/{config['epochs']} step {step} "
            f"train/loss {train_loss.item():.4f} val/loss {val_loss.item():.4f} "
            f"val/acc {val_acc:.4f}",
            flush=True,
        )
    print(f"done: val/acc {val_acc:.4f} in {time.perf_counter() - started:.1f} s", flush=True)


if __name__ == "__main__":
    main()
