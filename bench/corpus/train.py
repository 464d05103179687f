"""Run one healthy configuration of the doctor's corpus (``bench/corpus/__init__.py``).

    python bench/corpus/train.py CONFIG.json [--stop-at STEP] [--resume CHECKPOINT]

Logs into the store of ``TRACKER_URI`` like a person's training script would: ``train/loss``
and ``lr`` every step, ``val/loss`` (and ``val/acc``) at the eval cadence and at the end,
gradient norms through ``tracker.watch`` or by hand, checkpoints through
``tracker.save_checkpoint``. ``--stop-at K`` trains steps 0..K, saves a checkpoint at K and
ends (a preempted job); ``--resume`` loads that checkpoint (model, optimizer, schedule,
scaler, random state) and trains steps K+1.. to the end as a second run. CPU only, one thread.
Exits non-zero on a bad configuration (an unknown data set, model, optimizer or schedule).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
from pathlib import Path
from typing import Any

import torch
from torch import nn

import tracker

torch.set_num_threads(1)
SEQ_LEN = 16


# ---------------------------------------------------------------- data


class Data:
    """Batches drawn with a torch generator (its state goes into checkpoints), a fixed
    evaluation set, and the shape of the task."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.name = cfg["data"]
        self.g = torch.Generator().manual_seed(cfg["seed"])
        self.classes = 0  # 0: regression
        self.vocab = 0
        self.stream = self.name.startswith("synth_")
        self.train_x: torch.Tensor | None = None
        self.train_y: torch.Tensor | None = None
        fixed = torch.Generator().manual_seed(cfg["seed"] + 7)
        getattr(self, "_setup_" + self.name)(fixed)

    # streams: a fresh batch each step from a fixed teacher
    def _setup_synth_regression(self, g: torch.Generator) -> None:
        self.in_dim, self.out_dim = 16, 1
        self.w = torch.randn(16, 1, generator=g) / 4
        self.eval_x, self.eval_y = self._regression(512, g)

    def _regression(self, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 16, generator=g)
        return x, torch.tanh(x @ self.w) + 0.1 * torch.randn(n, 1, generator=g)

    def _setup_synth_classification(self, g: torch.Generator) -> None:
        self.in_dim, self.classes = 20, 4
        self.out_dim = 4
        self.centers = torch.randn(4, 20, generator=g) * 0.8
        self.eval_x, self.eval_y = self._blobs(512, g)

    def _blobs(self, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 4, (n,), generator=g)
        return self.centers[y] + torch.randn(n, 20, generator=g), y

    def _setup_synth_image(self, g: torch.Generator) -> None:
        self.in_dim, self.classes, self.out_dim, self.image = 64, 4, 4, True
        bars = torch.zeros(4, 8, 8)
        bars[0, 2:6, :] = 1  # a horizontal band
        bars[1, :, 2:6] = 1  # a vertical band
        bars[2] = torch.eye(8) + torch.eye(8).flip(1)  # a cross
        bars[3, 1:7, 1:7] = 1
        bars[3, 2:6, 2:6] = 0  # a ring
        self.patterns = bars
        self.eval_x, self.eval_y = self._images(512, g)

    def _images(self, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 4, (n,), generator=g)
        x = self.patterns[y] + 0.7 * torch.randn(n, 8, 8, generator=g)
        return x.unsqueeze(1), y

    def _setup_synth_sequence(self, g: torch.Generator) -> None:
        self.in_dim, self.classes, self.out_dim = 4, 4, 4
        self.eval_x, self.eval_y = self._sequences(512, g)

    def _sequences(self, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, SEQ_LEN, 4, generator=g)
        return x, x[:, : SEQ_LEN // 2].mean(1).argmax(1)  # which channel led the first half

    # fixed data sets: shuffled batches from a training part, evaluation on the rest
    def _fixed(self, x: torch.Tensor, y: torch.Tensor, g: torch.Generator) -> None:
        order = torch.randperm(len(x), generator=g)
        x, y = x[order], y[order]
        cut = int(len(x) * 0.8)
        self.train_x, self.train_y, self.eval_x, self.eval_y = x[:cut], y[:cut], x[cut:], y[cut:]

    def _sklearn(self, loader: str, g: torch.Generator) -> None:
        from sklearn import datasets

        bunch = getattr(datasets, loader)()
        x = torch.tensor(bunch.data, dtype=torch.float32)
        x = (x - x.mean(0)) / (x.std(0) + 1e-6)
        y = torch.tensor(bunch.target, dtype=torch.long)
        self.in_dim, self.classes = x.shape[1], int(y.max()) + 1
        self.out_dim = self.classes
        self._fixed(x, y, g)

    def _setup_iris(self, g: torch.Generator) -> None:
        self._sklearn("load_iris", g)

    def _setup_wine(self, g: torch.Generator) -> None:
        self._sklearn("load_wine", g)

    def _setup_breast_cancer(self, g: torch.Generator) -> None:
        self._sklearn("load_breast_cancer", g)

    def _setup_digits(self, g: torch.Generator) -> None:
        self._sklearn("load_digits", g)

    def _setup_digits_image(self, g: torch.Generator) -> None:
        self._setup_digits(g)
        self.image = True
        assert self.train_x is not None and self.eval_x is not None
        self.train_x = self.train_x.reshape(-1, 1, 8, 8)
        self.eval_x = self.eval_x.reshape(-1, 1, 8, 8)

    def _setup_char_text(self, g: torch.Generator) -> None:
        import textwrap

        text = "".join(c for c in inspect.getsource(textwrap) if c.isascii())
        chars = sorted(set(text))
        self.vocab = len(chars)
        self.classes = self.out_dim = self.vocab
        ids = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
        cut = int(len(ids) * 0.9)
        self.text_train, text_eval = ids[:cut], ids[cut:]
        starts = torch.arange(0, len(text_eval) - SEQ_LEN - 1, SEQ_LEN)[:256]
        self.eval_x = torch.stack([text_eval[s : s + SEQ_LEN] for s in starts])
        self.eval_y = torch.stack([text_eval[s + 1 : s + SEQ_LEN + 1] for s in starts])

    def batch(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.name == "char_text":
            starts = torch.randint(0, len(self.text_train) - SEQ_LEN - 1, (size,), generator=self.g)
            x = torch.stack([self.text_train[s : s + SEQ_LEN] for s in starts])
            y = torch.stack([self.text_train[s + 1 : s + SEQ_LEN + 1] for s in starts])
            return x, y
        if self.stream:
            make = {
                "synth_regression": self._regression,
                "synth_classification": self._blobs,
                "synth_image": self._images,
                "synth_sequence": self._sequences,
            }[self.name]
            return make(size, self.g)
        assert self.train_x is not None and self.train_y is not None
        idx = torch.randint(0, len(self.train_x), (size,), generator=self.g)
        return self.train_x[idx], self.train_y[idx]


# ---------------------------------------------------------------- models


class Recurrent(nn.Module):
    def __init__(self, kind: str, data: Data, hidden: int) -> None:
        super().__init__()
        self.per_position = data.vocab > 0
        self.embed: nn.Module = (
            nn.Embedding(data.vocab, hidden) if data.vocab else nn.Linear(data.in_dim, hidden)
        )
        self.rnn = (nn.GRU if kind == "gru" else nn.LSTM)(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, data.out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.embed(x))
        return self.head(out if self.per_position else out[:, -1])


class TinyTransformer(nn.Module):
    def __init__(self, data: Data, hidden: int) -> None:
        super().__init__()
        self.per_position = data.vocab > 0
        self.embed: nn.Module = (
            nn.Embedding(data.vocab, hidden) if data.vocab else nn.Linear(data.in_dim, hidden)
        )
        self.pos = nn.Parameter(torch.zeros(1, SEQ_LEN, hidden))
        layer = nn.TransformerEncoderLayer(
            hidden, nhead=4, dim_feedforward=2 * hidden, dropout=0.0, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(hidden, data.out_dim)
        mask = torch.triu(torch.full((SEQ_LEN, SEQ_LEN), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask if self.per_position else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.embed(x) + self.pos, mask=self.mask)
        return self.head(h if self.per_position else h.mean(1))


def build_model(cfg: dict[str, Any], data: Data) -> nn.Module:
    torch.manual_seed(cfg["seed"])
    hidden, kind = cfg["hidden"], cfg["model"]
    if kind == "linear":
        return nn.Sequential(nn.Flatten(), nn.Linear(data.in_dim, data.out_dim))
    if kind == "mlp":
        return nn.Sequential(
            nn.Flatten(), nn.Linear(data.in_dim, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, data.out_dim),
        )  # fmt: skip
    if kind == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(64, data.out_dim),
        )  # fmt: skip
    if kind in ("gru", "lstm"):
        return Recurrent(kind, data, hidden)
    if kind == "transformer":
        return TinyTransformer(data, max(hidden, 32))
    raise SystemExit(f"unknown model {kind!r}")


def build_optimizer(cfg: dict[str, Any], model: nn.Module) -> torch.optim.Optimizer:
    params, lr, wd = model.parameters(), cfg["lr"], cfg["weight_decay"]
    kind = cfg["optimizer"]
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=wd)
    if kind == "sgd_momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True, weight_decay=wd)
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=wd)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd or 1e-2)
    if kind == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, weight_decay=wd)
    raise SystemExit(f"unknown optimizer {kind!r}")


def build_scheduler(cfg: dict[str, Any], opt: torch.optim.Optimizer) -> Any:
    steps, kind = cfg["steps"], cfg["scheduler"]
    sched = torch.optim.lr_scheduler
    if kind == "none":
        return None
    if kind == "warmup_cosine":
        warm = max(1, steps // 20)

        def factor(i: int) -> float:
            if i < warm:
                return (i + 1) / warm
            return 0.5 * (1 + math.cos(math.pi * min(1.0, (i - warm) / max(1, steps - warm))))

        return sched.LambdaLR(opt, factor)
    if kind == "step":
        return sched.StepLR(opt, step_size=max(1, steps // 3), gamma=0.3)
    if kind == "cosine_restarts":
        return sched.CosineAnnealingWarmRestarts(opt, T_0=max(1, steps // 4))
    if kind == "onecycle":
        return sched.OneCycleLR(opt, max_lr=cfg["lr"], total_steps=steps + 1)
    if kind == "plateau":
        return sched.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=5)
    if kind == "linear_warmup":
        return sched.LinearLR(opt, start_factor=0.1, total_iters=max(1, steps // 10))
    raise SystemExit(f"unknown scheduler {kind!r}")


# ---------------------------------------------------------------- the loop


def loss_of(out: torch.Tensor, y: torch.Tensor, data: Data) -> torch.Tensor:
    out = out.float()
    if not data.classes:
        return nn.functional.mse_loss(out, y)
    return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def evaluate(model: nn.Module, data: Data, autocast: Any) -> dict[str, float]:
    model.eval()
    with torch.no_grad(), autocast():
        out = model(data.eval_x)
    model.train()
    metrics = {"val/loss": loss_of(out, data.eval_y, data).item()}
    if data.classes:
        metrics["val/acc"] = (out.argmax(-1) == data.eval_y).float().mean().item()
    return metrics


def train(cfg: dict[str, Any], stop_at: int | None, resume: str | None) -> None:
    data = Data(cfg)
    model = build_model(cfg, data)
    opt = build_optimizer(cfg, model)
    scheduler = build_scheduler(cfg, opt)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg["amp"])
    scaler = torch.amp.GradScaler("cpu") if cfg["amp"] == "fp16" else None

    def autocast() -> Any:
        return torch.autocast("cpu", dtype=dtype) if dtype else contextlib.nullcontext()

    first = 0
    if resume:
        state = torch.load(resume, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(state["scheduler"])
        if scaler is not None:
            scaler.load_state_dict(state["scaler"])
        data.g.set_state(state["data_rng"])
        first = state["step"] + 1
    last = stop_at if stop_at is not None else cfg["steps"] - 1
    name = cfg["id"] + ("-resumed" if resume else "")
    options: dict[str, Any] = {} if cfg["system_metrics"] else {"system_interval": None}
    running = None  # a smoothed train loss for ReduceLROnPlateau without an eval cadence
    with tracker.init(project="doctor-corpus", name=name, config=cfg, quiet=True, **options):
        if cfg["watch"] == "watch":
            tracker.watch(model, opt, scaler=scaler, every=cfg["watch_every"])
        for i in range(first, last + 1):
            x, y = data.batch(cfg["batch_size"])
            opt.zero_grad(set_to_none=True)
            with autocast():
                out = model(x)
            loss = loss_of(out, y, data)
            metrics: dict[str, float] = {"train/loss": loss.item(), "lr": opt.param_groups[0]["lr"]}
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
            else:
                loss.backward()
            norm = None
            if cfg["clip"]:
                norm = float(nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"]))
            if cfg["watch"] == "manual" and i % cfg["watch_every"] == 0:
                if norm is None:
                    grads = [p.grad.norm() for p in model.parameters() if p.grad is not None]
                    norm = float(torch.stack(grads).norm())
                metrics["grad/global_norm"] = norm
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
                if cfg["watch"] == "manual":
                    metrics["amp/loss_scale"] = scaler.get_scale()
            else:
                opt.step()
            running = loss.item() if running is None else 0.9 * running + 0.1 * loss.item()
            at_eval = cfg["eval_every"] and (i + 1) % cfg["eval_every"] == 0
            if at_eval or i == cfg["steps"] - 1:
                metrics.update(evaluate(model, data, autocast))
            if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                if "val/loss" in metrics:
                    scheduler.step(metrics["val/loss"])
                elif not cfg["eval_every"] and i % 10 == 9:
                    scheduler.step(running)
            elif scheduler is not None:
                scheduler.step()
            tracker.log(metrics, step=i)
            every = cfg["checkpoint_every"]
            if (every and (i + 1) % every == 0) or i == stop_at:
                tracker.save_checkpoint(_state(model, opt, scheduler, scaler, data, i), step=i)


def _state(model: nn.Module, opt: Any, scheduler: Any, scaler: Any, data: Data, step: int) -> dict:
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "data_rng": data.g.get_state(),
        "step": step,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path, help="one configuration, as JSON")
    parser.add_argument("--stop-at", type=int, help="train to this step, checkpoint, end")
    parser.add_argument("--resume", help="a checkpoint of --stop-at to continue from")
    args = parser.parse_args()
    train(json.loads(args.config.read_text(encoding="utf-8")), args.stop_at, args.resume)


if __name__ == "__main__":
    main()
