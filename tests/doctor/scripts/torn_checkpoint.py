"""A torn checkpoint: checkpoints are saved at steps 20 and 40, then the step-40 file is cut
short (a crash of a copy tool, a full disk); resuming skips it and falls back to step 20.
Expected: ``checkpoint_corrupt`` at step 40, and a ``checkpoint_skipped`` event."""

from __future__ import annotations

import os

import torch
from _train import data, mlp

import tracker

x, y = data()
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
with tracker.init(project="doctor", system_interval=None) as run:
    saved = {}
    for i in range(60):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        tracker.log({"loss": loss.item()}, step=i)
        if i in (20, 40):
            saved[i] = run.save_checkpoint({"model": model.state_dict()}, step=i).path
    size = os.path.getsize(saved[40])
    with open(saved[40], "r+b") as fh:  # the bug: the file is torn
        fh.truncate(size // 2)
    resumed = run.latest_checkpoint()
    print(f"resumed from step {resumed.step if resumed else None}", flush=True)
