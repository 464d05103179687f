"""What ``tracker.watch(model, optimizer, every=50)`` adds to the step time of a small CNN on CPU.

Workload: a 2-conv CNN on 32x32 RGB batches of 32, SGD, ``tracker.log`` of the loss every
step, on a SQLite store. Blocks of ``--steps`` steps run alternately without and with
``watch(every=50)`` (``--rounds`` of each, interleaved so that machine noise hits both
sides alike); the cost is the difference of the median per-step times, in % of the
unwatched median. Target: <= 2 %.

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


def block(work: Path, steps: int, watched: bool, index: int) -> list[float]:
    """Per-step wall seconds of one block of training steps."""
    import torch
    from torch import nn

    model, optimizer = make_model()
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
    loss_fn = nn.CrossEntropyLoss()
    uri = f"sqlite:///{work / 'watch.db'}"
    tracker.init(project="bench", name=f"watch-{watched}-{index}", uri=uri, system_interval=None)
    if watched:
        tracker.watch(model, optimizer, every=50)
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        tracker.log({"loss": loss.item()}, step=step)
        times.append(time.perf_counter() - t0)
    tracker.finish()
    return times[10:]  # the first steps warm up the allocator


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
    plain: list[float] = []
    watched: list[float] = []
    with common.workdir(args.workdir, args.keep) as work:
        for r in range(args.rounds):
            common.progress(f"round {r + 1}/{args.rounds}: {args.steps} steps without, then with")
            plain += block(work, args.steps, False, r)
            watched += block(work, args.steps, True, r)
    base, with_watch = statistics.median(plain), statistics.median(watched)
    mean_base, mean_watch = statistics.fmean(plain), statistics.fmean(watched)
    pct = (with_watch - base) / base * 100
    mean_pct = (mean_watch - mean_base) / mean_base * 100
    common.print_table(
        "per-step wall time, ms",
        ["side", "steps", "median", "mean"],
        [
            ["without watch()", len(plain), base * 1e3, mean_base * 1e3],
            ["watch(every=50)", len(watched), with_watch * 1e3, mean_watch * 1e3],
        ],
    )
    verdict = "met" if mean_pct <= TARGET_PCT else "MISSED"
    print(
        f"\noverhead: median {pct:+.2f} %, mean {mean_pct:+.2f} % (the mean includes the "
        f"watched steps) <= {TARGET_PCT} % [{verdict}]"
    )
    common.write_json(
        args.json,
        {
            "benchmark": "watch",
            "command": cmd,
            "env": common.environment(),
            "params": {"steps": args.steps, "rounds": args.rounds, "every": 50},
            "median_ms": {"plain": base * 1e3, "watched": with_watch * 1e3},
            "mean_ms": {"plain": mean_base * 1e3, "watched": mean_watch * 1e3},
            "overhead_pct": {"median": pct, "mean": mean_pct, "target": TARGET_PCT},
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
