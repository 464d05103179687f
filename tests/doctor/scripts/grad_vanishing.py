"""Vanishing gradients: at step 100 a bad update drives the hidden layer's bias to -1e4, so
every ReLU is dead and no gradient reaches any weight. Expected: ``grad_vanishing`` at 100."""

from __future__ import annotations

import torch
from _train import data, grad_norm, loop, mlp

x, y = data()
model = mlp(out_bias=False)
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def step(i: int) -> dict[str, float]:
    if i == 100:
        with torch.no_grad():
            model[0].bias.fill_(-1e4)  # the bug: one huge update killed every unit
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return {"loss": loss.item(), "grad/global_norm": grad_norm(model)}


loop(140, step)
