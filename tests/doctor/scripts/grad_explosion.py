"""Gradient explosion: from step 100 the loss is summed over the batch instead of averaged
(a gradient-accumulation bug), so the gradient norm jumps ~256x and stays; clipping keeps
the weights finite. Expected: ``grad_explosion`` at step 100."""

from __future__ import annotations

import torch
from _train import data, grad_norm, loop, mlp

x, y = data()
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def step(i: int) -> dict[str, float]:
    opt.zero_grad()
    reduction = "sum" if i >= 100 else "mean"  # the bug
    loss = torch.nn.functional.mse_loss(model(x), y, reduction=reduction)
    loss.backward()
    norm = grad_norm(model)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return {"loss": loss.item() / (len(x) if i >= 100 else 1), "grad/global_norm": norm}


loop(140, step)
