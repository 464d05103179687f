"""A data-loading stall: from step 100 the "loader" waits 50 ms per batch (a slow mount).
Expected: ``throughput_drop`` at step 100."""

from __future__ import annotations

import time

import torch
from _train import data, loop, mlp

x, y = data()
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def step(i: int) -> dict[str, float]:
    if i >= 100:
        time.sleep(0.05)  # the bug: the input pipeline cannot keep up
    else:
        time.sleep(0.003)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return {"loss": loss.item()}


loop(160, step)
