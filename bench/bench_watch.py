"""What ``tracker.watch(model, optimizer, every=50)`` adds to the step time of a small CNN on CPU.

Workload: a 2-conv CNN on 32x32 RGB batches of 32, SGD, ``tracker.log`` of the loss every
step, on a SQLite store. Blocks of ``--steps`` steps run alternately without and with
``watch(every=50)`` (``--rounds`` of each, interleaved so that machine noise hits both
sides alike). Each step is timed twice: wall clock and process CPU time
(``time.process_time``: all threads of the process, so the writer's work counts too, but time
spent waiting for a CPU on a busy machine does not). The overhead is the difference of the
**mean** per-step CPU time (the mean includes the one step in 50 that computes the norms),
in % of the unwatched mean; medians and wall times are printed beside it. Target: <= 2 %.

    python bench/bench_watch.py [--steps 500] [--rounds 4] [--json out.json]
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import common

import tracker

TARGET_PCT = 2.0
COLUMNS = ("cpu_mean_ms", "cpu_median_ms", "wall_mean_ms", "wall_median_ms")


def make_model() -> tuple[Any, Any]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10),
    )  # fmt: skip
    return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def block(work: Path, steps: int, watched: bool, index: int) -> tuple[list[float], list[float]]:
    """Per-step (wall seconds, CPU seconds) of one block of training steps."""
    import torch
    from torch import nn

    model, optimizer = make_model()
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
    loss_fn = nn.CrossEntropyLoss()
    uri = f"sqlite:///{work / 'watch.db'}"
    tracker.init(project="bench", name=f"watch-{watched}-{index}", uri=uri, system_interval=None)
    if watched:
        tracker.watch(model, optimizer, every=50)
    wall, cpu = [], []
    for step in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        tracker.log({"loss": loss.item()}, step=step)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    tracker.finish()
    return wall[10:], cpu[10:]  # the first steps warm up the allocator


def main(argv: list[str] | None = None) -> int:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="steps per block")
    parser.add_argument("--rounds", type=int, default=4, help="blocks of each kind")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.rounds = 200, 2
    import torch

    torch.set_num_threads(1)  # steadier timings on a shared machine
    cmd = common.print_header("tracker.watch(every=50) overhead on a small CNN (CPU)")
    sides: dict[str, dict[str, list[float]]] = {
        name: {"wall": [], "cpu": []} for name in ("plain", "watched")
    }
    with common.workdir(args.workdir, args.keep) as work:
        for r in range(args.rounds):
            common.progress(f"round {r + 1}/{args.rounds}: {args.steps} steps without, then with")
            for name in ("plain", "watched"):
                wall, cpu = block(work, args.steps, name == "watched", r)
                sides[name]["wall"] += wall
                sides[name]["cpu"] += cpu
    stats = {
        name: {
            f"{clock}_{kind}_ms": fn(values[clock]) * 1e3
            for clock in ("wall", "cpu")
            for kind, fn in (("median", statistics.median), ("mean", statistics.fmean))
        }
        for name, values in sides.items()
    }
    pct = {
        key.removesuffix("_ms"): (stats["watched"][key] - stats["plain"][key])
        / stats["plain"][key]
        * 100
        for key in stats["plain"]
    }
    common.print_table(
        "per-step time, ms",
        ["side", "steps", "CPU mean", "CPU median", "wall mean", "wall median"],
        [
            [label, len(sides[name]["cpu"]), *(stats[name][k] for k in COLUMNS)]
            for name, label in (("plain", "without watch()"), ("watched", "watch(every=50)"))
        ],
    )
    verdict = "met" if pct["cpu_mean"] <= TARGET_PCT else "MISSED"
    print(
        f"\noverhead (CPU mean): {pct['cpu_mean']:+.2f} % <= {TARGET_PCT} % [{verdict}]; "
        f"CPU median {pct['cpu_median']:+.2f} %, wall mean {pct['wall_mean']:+.2f} %, "
        f"wall median {pct['wall_median']:+.2f} %"
    )
    common.write_json(
        args.json,
        {
            "benchmark": "watch",
            "command": cmd,
            "env": common.environment(),
            "params": {"steps": args.steps, "rounds": args.rounds, "every": 50},
            "step_ms": stats,
            "overhead_pct": {**pct, "target": TARGET_PCT},
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
