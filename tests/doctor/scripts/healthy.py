"""A healthy run of a chosen shape: ``cosine`` (warmup then cosine decay), ``step`` (step
schedule, eval pause every 25 steps, checkpoint saves), ``plateau`` (a constant lr that
stops improving). Expected: no diagnosis at all."""

from __future__ import annotations

import math
import sys
import time

import psutil
import torch
from _train import data, grad_norm, mlp

import tracker

shape = sys.argv[1]
x, y = data()
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
proc = psutil.Process()
steps = 150
with tracker.init(project="doctor", config={"shape": shape}, system_interval=None) as run:
    for i in range(steps):
        t0 = time.perf_counter()
        if shape == "cosine":
            lr = 0.05 * min(1.0, (i + 1) / 20) * 0.5 * (1 + math.cos(math.pi * i / steps))
        elif shape == "step":
            lr = 0.05 * 0.1 ** (i // 60)
        else:
            lr = 1e-4
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        idx = torch.randint(0, len(x), (32,), generator=torch.Generator().manual_seed(i))
        loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
        loss.backward()
        norm = grad_norm(model)
        opt.step()
        metrics = {"loss": loss.item(), "lr": lr, "grad/global_norm": norm}
        if shape == "step" and i % 25 == 24:
            with torch.no_grad():
                metrics["val/loss"] = torch.nn.functional.mse_loss(model(x), y).item()
            time.sleep(0.02)  # the evaluation pause
            run.save_checkpoint({"model": model.state_dict()}, step=i)
        metrics["sys/step_time_s"] = time.perf_counter() - t0
        metrics["sys/rss_bytes"] = float(proc.memory_info().rss)
        tracker.log(metrics, step=i)
