"""Saves a checkpoint whose pickling stalls halfway, so a test can SIGKILL it mid-write."""

import sys
import time

import torch

import tracker


class Stall:
    def __reduce__(self):  # called while torch.save is writing the archive
        print("MIDWRITE", flush=True)
        time.sleep(600)
        return (Stall, ())


tracker.init(project="ckpt", uri=sys.argv[1], system_interval=None)
tracker.save_checkpoint(
    {"weights": torch.zeros(1 << 20), "stall": Stall()}, step=1, path=sys.argv[2]
)
