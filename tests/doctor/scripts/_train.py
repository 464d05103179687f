"""Shared pieces of the failing training scripts: a tiny CPU model, data, and the loop
driver. Each script in this folder has exactly one thing wrong with it (see its docstring)
and logs what ``tracker.watch`` / the system sampler would log (``grad/global_norm``,
``sys/step_time_s``, ``sys/rss_bytes``, ``amp/loss_scale``) directly, so the doctor's
verdict does not depend on those samplers (``recompiles.py`` runs a real ``torch.compile``
under ``tracker.watch``: torch's own reason is what it checks)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

import tracker

torch.set_num_threads(1)


def data(n: int = 256, d: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    y = x @ torch.randn(d, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    return x, y


def mlp(d: int = 16, hidden: int = 32, out_bias: bool = True) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, 1, bias=out_bias))


def grad_norm(model: nn.Module) -> float:
    norms = [p.grad.norm() for p in model.parameters() if p.grad is not None]
    return float(torch.stack(norms).norm()) if norms else 0.0


def loop(
    steps: int,
    step_fn: Callable[[int], dict[str, Any]],
    project: str = "doctor",
    on_start: Callable[[], Any] | None = None,
    **init: Any,
) -> None:
    """Run ``step_fn(step)`` for each step, logging its metrics and the step time
    (``on_start()`` first, once the run is active: ``tracker.watch``)."""
    with tracker.init(project=project, system_interval=None, **init):
        if on_start is not None:
            on_start()
        for step in range(steps):
            t0 = time.perf_counter()
            metrics = step_fn(step)
            metrics["sys/step_time_s"] = time.perf_counter() - t0
            tracker.log(metrics, step=step)
