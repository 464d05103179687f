"""AMP on the CPU, for real: fp16 autocast and a ``torch.amp.GradScaler`` watched by
``tracker.watch(scaler=...)``, the loop logging its loss and the gradient norm that
``clip_grad_norm_`` returns after ``scaler.unscale_`` (Inf/NaN on a step the scaler skips).

The scaler starts at 2**20: the fp16 backward overflows until it has halved the scale five
times (real calibration, five skipped steps), then training goes on. ``healthy``: nothing
else; expected: no diagnosis, live or final. ``collapse``: from step 60 one input is Inf in
every batch, so the loss is Inf and every step is skipped; expected: ``nonfinite`` of the
loss and ``amp_scale_collapse``, both at step 60."""

from __future__ import annotations

import sys

import torch
from _train import data, loop, mlp

import tracker

mode = sys.argv[1]
x, y = data()
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.02)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**20)
watched = False


def step(i: int) -> dict[str, float]:
    global watched
    if not watched:
        tracker.watch(model, opt, scaler, every=10)
        watched = True
    inputs = x.clone()
    if mode == "collapse" and i >= 60:
        inputs[0, 0] = float("inf")  # a corrupt sample in every batch
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(inputs)
    loss = torch.nn.functional.mse_loss(out.float(), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e6)
    scaler.step(opt)
    scaler.update()
    return {"loss": loss.item(), "grad_norm": norm.item()}


loop(150, step, project="amp")
