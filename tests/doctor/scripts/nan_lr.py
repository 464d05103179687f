"""NaN from a too-high learning rate: SGD at lr=0.6 on a regression overshoots, the loss
grows geometrically to Inf and then NaN. Expected: ``nonfinite`` on ``loss`` at the first
non-finite step."""

from __future__ import annotations

import torch
from _train import data, grad_norm, loop, mlp

x, y = data()
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.6)


def step(i: int) -> dict[str, float]:
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return {"loss": loss.item(), "grad/global_norm": grad_norm(model)}


loop(150, step)
