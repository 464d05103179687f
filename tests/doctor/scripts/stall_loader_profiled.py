"""A DataLoader that falls behind: from step 100 each sample takes 3 ms to load (a slow
mount), 24 ms a batch against ~2 ms of compute. At step 130 a person asks for a profile of
5 steps (``tracker profile RUN --steps 5``: here the same request, made through the store
while the run trains). Expected: ``throughput_drop`` at step 100 whose hint names the
DataLoader, from the profile."""

from __future__ import annotations

import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

import tracker
from tracker.store import Store, profiles

torch.set_num_threads(1)
SLOW_AT = 100
ASK_AT = 130
STEPS = 220


class Samples(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    slow = False

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.slow:
            time.sleep(0.003)  # the bug: the input pipeline cannot keep up
        g = torch.Generator().manual_seed(i)
        x = torch.randn(64, generator=g)
        return x, x[:1] * 2


data = Samples()
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
# The step time logged by hand, as the other scripts here do, with no system sampler: its
# run-queue wait would take out what a busy test machine (not the loader) cost, which
# tests/doctor/test_contention.py covers.
with tracker.init(
    project="doctor", heartbeat_interval=0.5, capture_console=False, system_interval=None
) as run:
    store = Store(os.environ["TRACKER_URI"])
    asked = None
    step = 0
    last = time.perf_counter()

    def done() -> bool:
        """STEPS trained, and the profile taken (on a busy machine the heartbeat that brings
        it may come late: train on, up to 600 steps more)."""
        if step < STEPS:
            return False
        taken = asked is None or profiles.get_profile(store, run.id, asked.id).state not in (
            profiles.OPEN
        )
        return taken or step >= STEPS + 600

    while not done():
        for x, y in DataLoader(data, batch_size=8, shuffle=True, num_workers=0):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            now = time.perf_counter()
            tracker.log({"loss": loss, "sys/step_time_s": now - last}, step=step)
            last = now
            step += 1
            data.slow = step >= SLOW_AT
            if step == ASK_AT:
                asked = profiles.request_profile(store, run.id, 5)
            if done():
                break
