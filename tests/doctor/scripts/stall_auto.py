"""A CPU-bound loop that stalls: from step 200 each batch also waits 100 ms for its input (a
slow mount). Nothing is logged by hand but the loss: step times and the run-queue wait are the
client's own signals (system metrics on). Expected: ``throughput_drop`` at step 200, whether
or not other processes share the CPU."""

from __future__ import annotations

import sys
import time

import torch

import tracker

torch.set_num_threads(1)
STALL_AT = 200
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
x = torch.randn(256, 256)
w = torch.randn(256, 256, requires_grad=True)
with tracker.init(project="doctor"):
    for step in range(steps):
        if step >= STALL_AT:
            time.sleep(0.1)  # the bug: the input pipeline cannot keep up
        loss = (x @ w).tanh().pow(2).mean()
        for _ in range(4):  # about 5 ms of work on one core
            loss = loss + (x @ w).relu().mean() * 1e-3
        loss.backward()
        tracker.log({"loss": loss.item()}, step=step)
