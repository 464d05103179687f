"""The README's ``tracker.log()`` example, run by an installed venv's python (not by pytest).

    python smoke_client.py STORE_URI

Logs metrics (0-d tensors where torch is installed), an image and a histogram of a tensor
(with torch) and of a numpy array (with numpy), a YAML file and, with torch, a checkpoint;
prints the run id. It imports torch and numpy only where they are installed, so a tensor
that the tracker cannot store without numpy shows up as the tracker's failure, not the
script's. Exits non-zero on any error, including an upload the tracker reports failed.
"""

from __future__ import annotations

import importlib.util
import sys

import tracker

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_NUMPY = importlib.util.find_spec("numpy") is not None


def main(uri: str) -> int:
    run = tracker.init(
        project="smoke",
        name="readme-example",
        config={"lr": 3e-4, "model": {"layers": 4, "width": 64}},
        tags=["baseline"],
        uri=uri,
    )
    for step in range(20):
        loss = 1.0 / (step + 1)
        if HAS_TORCH:
            import torch

            tracker.log({"train/loss": torch.tensor(loss), "lr": 3e-4}, step=step)
        else:
            tracker.log({"train/loss": loss, "lr": 3e-4}, step=step)
    if HAS_TORCH:
        import torch

        tracker.log_image("samples/tensor", torch.rand(4, 1, 8, 8), caption="NCHW tensor")
        tracker.log_histogram("weights/tensor", torch.nn.Linear(8, 8).weight, bins=16)
        tracker.save_checkpoint({"w": torch.zeros(2)}, step=19, metrics={"val/acc": 0.5})
    if HAS_NUMPY:
        import numpy as np

        rng = np.random.default_rng(0)
        tracker.log_image("samples/array", rng.random((8, 8, 3)), caption="numpy HWC")
        tracker.log_histogram("weights/array", rng.standard_normal(256), bins=16)
    tracker.log_dict("config.yaml", {"lr": 3e-4, "model": {"layers": 4}})
    tracker.flush()
    tracker.finish()
    print(run.id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
