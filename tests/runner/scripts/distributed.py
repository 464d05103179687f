"""Two CPU processes with the gloo backend: every rank logs, only rank 0's values are stored."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

import tracker


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    tracker.init(project="dist", config={"world": dist.get_world_size()}, system_interval=None)
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    for step in range(3):
        tracker.log({"rank": float(rank), "sum": total.item()}, step=step)
    print(f"rank {rank} of {os.environ['WORLD_SIZE']} done", flush=True)
    tracker.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
