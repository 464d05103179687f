"""torch.compile recompiling: the batch size changes every 10 steps, and each new shape
recompiles (torch.compile is too slow on CPU for a test, so the script counts the shapes it
would have compiled and logs ``compile/recompiles`` as ``tracker.watch`` does). Expected:
``recompiles`` when the count reaches 7 (the 8th compile: torch's recompile limit), at step
70."""

from __future__ import annotations

import torch
from _train import data, loop, mlp

x, y = data()
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
shapes: set[int] = set()


def step(i: int) -> dict[str, float]:
    n = 64 + i // 10  # the bug: a batch size that keeps changing
    shapes.add(n)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x[:n]), y[:n])
    loss.backward()
    opt.step()
    return {"loss": loss.item(), "compile/recompiles": float(len(shapes) - 1)}


loop(120, step)
