"""A leak from keeping the graph: the loss tensor of every step is appended to a list
(``losses.append(loss)`` instead of ``loss.item()``) with a monitoring forward pass outside
``no_grad``, so each step's activations stay alive. Expected: ``memory_growth`` on
``sys/rss_bytes`` from the first steps."""

from __future__ import annotations

import psutil
import torch
from _train import loop
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(
    nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 1)
)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(512, 512), torch.randn(512, 1)
held = torch.randn(512, 512)
kept: list[torch.Tensor] = []
proc = psutil.Process()


def step(i: int) -> dict[str, float]:
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    kept.append(model(held).mean())  # the bug: a live graph per step
    return {"loss": loss.item(), "sys/rss_bytes": float(proc.memory_info().rss)}


loop(80, step)
