"""torch.compile recompiling: the batch size changes every 10 steps, and each new shape
recompiles the compiled model (``dynamic=False``; ``backend="eager"`` keeps each compile a
fraction of a second on CPU). ``tracker.watch`` counts them and records the frame at torch's
recompile limit with its guard failure. Expected: ``recompiles`` when the frame is compiled
for the 8th time (7 recompiles: torch's recompile limit), at step 70, the hint naming the
frame and the size mismatch."""

from __future__ import annotations

import torch
from _train import data, loop, mlp

import tracker

x, y = data()
model = mlp()
compiled = torch.compile(model, backend="eager", dynamic=False)
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def step(i: int) -> dict[str, float]:
    n = 64 + i // 10  # the bug: a batch size that keeps changing
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(compiled(x[:n]), y[:n])
    loss.backward()
    opt.step()
    return {"loss": loss.item()}


loop(120, step, on_start=lambda: tracker.watch(compiled, opt, every=10))
