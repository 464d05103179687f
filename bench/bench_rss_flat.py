"""The tracker's own memory stays flat over a long run: RSS growth of the same loop with the
tracker and without it.

Workload: ``--steps`` steps (100,000) of a small torch loop (a 64x64 linear layer, SGD, a
batch of 32) that logs 4 metrics per step -- the loss as a 0-d tensor, the learning rate, the
step time and a running accuracy -- into a fresh SQLite store with the tracker's defaults
(automatic signals, the system sampler), every ``--eval-every`` steps 3 more keys; ``none``
runs the same loop and only computes the values. Each variant runs in its own child process;
RSS is read from ``/proc/self/statm`` after ``--warmup`` steps (caches, allocator arenas and
the store's first pages in place) and at the end, after ``flush()``.

Reported per variant: RSS at the warm-up mark and at the end, the growth between them, and
for ``tracker`` the growth beyond ``none``'s (the tracker's own). Target (issue 26): within
5 MiB at 100,000 steps.

    python bench/bench_rss_flat.py [--steps 100000] [--warmup 5000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MIB = 1024.0 * 1024.0
VARIANTS = ("none", "tracker")


def _rss() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB


def child(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 64)
    log = None
    if args.child == "tracker":
        import tracker

        work = Path(args.child_dir)
        tracker.init(project="bench", name="rss-flat", uri=f"sqlite:///{work / 'rss.db'}",
                     quiet=True)  # fmt: skip
        log = tracker.log
    acc = 0.0
    warm = end = 0.0
    started = time.perf_counter()
    last = started
    for step in range(args.steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        now = time.perf_counter()
        acc = 0.99 * acc + 0.01 * (step % 7) / 7
        items: dict[str, Any] = {"train/loss": loss.detach(), "lr": 0.01, "time/step_s": now - last,
                                 "train/acc": acc}  # fmt: skip
        if step % args.eval_every == 0:
            items.update(
                {"val/loss": float(loss), "val/acc": acc, "epoch": step // args.eval_every}
            )
        last = now
        if log is not None:
            log(items, step=step)
        if step + 1 == args.warmup:
            if log is not None:
                import tracker

                tracker.flush()
            warm = _rss()
    if log is not None:
        import tracker

        tracker.flush()
        end = _rss()
        tracker.finish()
    else:
        end = _rss()
    return {"variant": args.child, "steps": args.steps, "rss_warm_mib": warm, "rss_end_mib": end,
            "growth_mib": end - warm, "loop_s": time.perf_counter() - started}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=5_000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", choices=VARIANTS, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warmup >= args.steps:
        parser.error(f"--warmup ({args.warmup}) must be below --steps ({args.steps})")
    if args.child:
        print(json.dumps(child(args)))
        return 0
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in VARIANTS:
            print(f"running {variant} ({args.steps:,} steps)...", file=sys.stderr, flush=True)
            done = subprocess.run(
                [sys.executable, __file__, "--child", variant, "--child-dir", tmp,
                 "--steps", str(args.steps), "--warmup", str(args.warmup),
                 "--eval-every", str(args.eval_every)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    base = results[0]["growth_mib"]
    print(f"{'variant':10} {'RSS warm':>10} {'RSS end':>10} {'growth':>8} {'loop':>8}")
    for r in results:
        print(f"{r['variant']:10} {r['rss_warm_mib']:9.1f}M {r['rss_end_mib']:9.1f}M "
              f"{r['growth_mib']:7.1f}M {r['loop_s']:7.1f}s")  # fmt: skip
    own = results[1]["growth_mib"] - base
    print(f"the tracker's own growth over {args.steps:,} steps: {own:+.1f} MiB (target: within 5)")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "own_growth_mib": own}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
