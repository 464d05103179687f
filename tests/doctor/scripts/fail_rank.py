"""A torchrun job whose rank 1 fails first (a bad data shard); rank 0 then dies in its
barrier ("Connection closed by peer") and torchrun ends with ChildFailedError. Expected:
the job's failure names rank 1's ValueError."""

from __future__ import annotations

import time

import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise ValueError("rank 1 could not read shard 7: bad header")
time.sleep(2)
dist.barrier()
