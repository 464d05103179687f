"""AMP loss-scale collapse: a real ``torch.amp.GradScaler`` whose gradients overflow at
every step from step 60 (an input row becomes Inf), so it skips every step and halves its
scale each time. Expected: ``amp_scale_collapse`` at step 60."""

from __future__ import annotations

import torch
from _train import data, loop, mlp

x, y = data()
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
skipped = 0


def step(i: int) -> dict[str, float]:
    global skipped
    inputs = x.clone()
    if i >= 60:
        inputs[0, 0] = float("inf")  # the bug: a corrupt sample in every batch
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs), y)
    scaler.scale(loss).backward()
    before = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    skipped += int(scaler.get_scale() < before)
    return {"amp/loss_scale": scaler.get_scale(), "amp/skipped_steps": float(skipped)}


loop(100, step)
