"""A training run that diverges: the loss becomes NaN and the script stops with a clear error.

    python examples/train_diverge.py                  # lr 1e4: blows up within a few steps
    tracker submit examples/train_diverge.py -c lr=0.01   # a stable run, for comparison

A linear classifier trained with plain SGD at a far too high learning rate: its weights and
logits grow geometrically until the logits overflow to ±inf, and the cross-entropy of
infinite logits is NaN (inf - inf inside log-softmax). The loop checks the loss every step
and raises ``NonFiniteLossError`` ("loss is nan at step N"), so the runner classifies the
failure as ``nonfinite_loss`` and the dashboard's health check points at the step. Every
step is logged first, so the stored series ends with the non-finite value.
"""

from __future__ import annotations

import argparse
import math

import torch
from torch import nn

import tracker


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, default=1e4)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (a small model needs one)"
    )
    args = parser.parse_args()
    torch.set_num_threads(max(1, args.threads))
    defaults = {"lr": args.lr, "steps": args.steps, "seed": args.seed, "features": 32}
    with tracker.init(project="examples", config=defaults, system_interval=None):
        config = tracker.config
        torch.manual_seed(config["seed"])
        features = config["features"]
        inputs = torch.randn(512, features) * 10.0
        targets = torch.randint(0, 10, (512,))
        model = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, 10))
        optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
        for step in range(config["steps"]):
            loss = nn.functional.cross_entropy(model(inputs), targets)
            value = loss.item()
            tracker.log({"train/loss": value}, step=step)
            if not math.isfinite(value):
                raise NonFiniteLossError(f"loss is {value} at step {step}")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"finished {config['steps']} steps, final loss {value:.4f}", flush=True)


if __name__ == "__main__":
    main()
