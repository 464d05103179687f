"""A training loop that leaks memory the classic way: it keeps live loss tensors in a list.

    python examples/train_leak.py                # RSS (and GPU memory on CUDA) grows per step
    python examples/train_leak.py --fixed        # the fix: keep loss.item() instead

Each step also measures a loss on a held-out batch for monitoring, outside
``torch.no_grad()``, and appends the tensor to a history list. No ``backward()`` ever frees
that graph, so every kept loss holds its step's activations alive: memory grows by about
one forward pass of activations per step. The script logs ``mem/rss_bytes`` (and, on CUDA,
the allocator's ``mem/gpu_allocated_bytes``) each step, with the tracker's own system metrics
off, so the growth is visible on the dashboard and the doctor reads these series too:

    tracker doctor RUN    # [warning] memory_growth at step 0 (mem/rss_bytes) ... exit status 1

(the run's final pass stores the same diagnosis; ``--fixed`` gets "no problems found").
"""

from __future__ import annotations

import argparse

import psutil
import torch
from torch import nn

import tracker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--fixed", action="store_true", help="keep loss.item() (no leak)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (a small model needs one)"
    )
    args = parser.parse_args()
    torch.set_num_threads(max(1, args.threads))
    defaults = {"steps": args.steps, "batch": args.batch, "width": args.width, "fixed": args.fixed}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    process = psutil.Process()
    with tracker.init(project="examples", config=defaults, system_interval=None):
        config = tracker.config
        width = config["width"]
        model = nn.Sequential(
            nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
            nn.Linear(width, 1),
        ).to(device)  # fmt: skip
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        held_out = torch.randn(config["batch"], width, device=device)
        history: list[object] = []
        for step in range(config["steps"]):
            x = torch.randn(config["batch"], width, device=device)
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if config["fixed"]:
                with torch.no_grad():
                    history.append(model(held_out).pow(2).mean().item())
            else:  # the leak: a live tensor whose graph (activations) is never freed
                history.append(model(held_out).pow(2).mean())
            rss = float(process.memory_info().rss)
            metrics = {"train/loss": loss.item(), "mem/rss_bytes": rss}
            if device == "cuda":
                metrics["mem/gpu_allocated_bytes"] = float(torch.cuda.memory_allocated())
            tracker.log(metrics, step=step)
        mib = process.memory_info().rss / 2**20
        print(f"{len(history)} monitoring losses kept; RSS {mib:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
