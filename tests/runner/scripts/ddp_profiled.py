"""A two-rank CPU DDP training job (torchrun, gloo) whose every rank is profiled when asked.

Each rank calls ``tracker.init()`` and ``tracker.log()`` every step: rank 0 is the job's run,
rank 1 a follower. After a few steps rank 0 asks for a profile of every rank with the real
request path (:func:`tracker.store.profiles.request_profile`, what the dashboard's button
calls), trains until it is closed, then asks for a profile of rank 0 only, trains until that
one is closed too (or a deadline passes), and the job ends.

The ranks must take the same number of steps (DDP all-reduces every backward), so rank 0
alone decides whether to go on and tells rank 1 through the rendezvous key-value store (not a
collective: the traces' communication is DDP's all-reduce alone).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import tracker
from tracker.store import Store, profiles

WARMUP = 3  # steps trained before the first request
STEPS = 5  # steps per profile
DEADLINE_S = 45.0  # the job ends by then, profiled or not (the test then says what is missing)
REQUESTS = ("all", "0")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))


class Asker:
    """Rank 0's side: asks for each profile in turn; says when all are closed."""

    def __init__(self, run_id: int) -> None:
        self.store = Store(os.environ["TRACKER_URI"])
        self.run_id = run_id
        self.left = list(REQUESTS)
        self.open: int | None = None

    def done(self, step: int) -> bool:
        if step < WARMUP:
            return False
        if self.open is not None:
            found = profiles.get_profile(self.store, self.run_id, self.open)
            if found.state not in ("stored", "failed"):
                return False
            print(f"profile {found.id} ({found.ranks}): {found.state} {found.message}", flush=True)
            self.open = None
        if not self.left:
            return True
        asked = profiles.request_profile(self.store, self.run_id, STEPS, self.left.pop(0))
        print(f"step {step}: asked for profile {asked.id} of ranks {asked.ranks}", flush=True)
        self.open = asked.id
        return False


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    control = dist.PrefixStore(
        "ddp-profiled/",
        dist.TCPStore(
            os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
            timeout=timedelta(seconds=60),
        ),
    )  # fmt: skip
    run = tracker.init(
        project="ddp-profile", config={"world": dist.get_world_size()},
        heartbeat_interval=0.5, system_interval=None,
    )  # fmt: skip
    model = DistributedDataParallel(_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(rank)
    asker = Asker(run.id) if rank == 0 else None
    deadline = time.monotonic() + DEADLINE_S
    step = 0
    while True:
        if asker is not None:
            stop = asker.done(step) or time.monotonic() > deadline
            control.set(f"step/{step}", "stop" if stop else "go")
        else:
            stop = control.get(f"step/{step}") == b"stop"
        if stop:
            break
        x = torch.randn(32, 64, generator=generator)
        loss = (model(x) - x.mean(dim=1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()  # DDP's gloo all-reduce of the gradients
        optimizer.step()
        tracker.log({"loss": loss.item()}, step=step)
        step += 1
    print(f"rank {rank} trained {step} steps", flush=True)
    tracker.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
