"""Loss divergence: at step 150 a schedule bug sets Adam's learning rate from 1e-2 to 3.0;
the loss climbs far above its best level and stays there (finite). Expected: ``divergence``
near step 150."""

from __future__ import annotations

import torch
from _train import data, loop, mlp

x, y = data()
model = mlp()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)


def step(i: int) -> dict[str, float]:
    if i == 150:
        for group in opt.param_groups:
            group["lr"] = 3.0  # the bug
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return {"loss": loss.item()}


loop(220, step)
