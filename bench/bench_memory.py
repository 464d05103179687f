"""Peak memory of a burst of ``log()`` calls, with the memory cap and without it.

Workload: ``--points`` points (10,000,000) as 5-key float steps, one ``tracker.log()`` per
step in a tight loop, into a fresh SQLite file, then ``flush()``; every stored point is
counted afterwards (a lost or duplicated point makes the benchmark exit non-zero). Each
variant runs in its own child process, so its peak RSS (``ru_maxrss``) is its own:

* ``capped``: ``max_memory_mb=--cap-mb`` (256, the default cap): past it, points go to
  overflow files and are stored from there;
* ``capped-keys-per-call``: the same cap, the keys built per call (``f"k{j}"``), as code
  that formats its metric names does: a new string object per key and call;
* ``capped-torch``: the same cap with torch imported first (a training process's baseline);
* ``uncapped``: ``max_memory_mb=1e9``, i.e. no cap (what the client did before the cap).

The cap promises the growth: peak RSS minus RSS before the loop stays within the cap.

Reported per variant: peak RSS, RSS before the loop (interpreter, SQLAlchemy, the store),
their difference, the writer's own estimate of the memory it held at its peak (sampled
every 10,000 calls), the points that went through the disk, the loop time per call and the
time until everything was stored.

    python bench/bench_memory.py [--points 10000000] [--cap-mb 256] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import common

# name -> (cap: None for --cap-mb, keys built per call, torch imported)
VARIANTS: dict[str, tuple[float | None, bool, bool]] = {
    "capped": (None, False, False),
    "capped-keys-per-call": (None, True, False),
    "capped-torch": (None, False, True),
    "uncapped": (1e9, False, False),
}
MIB = 1024.0 * 1024.0


def child(args: argparse.Namespace) -> int:
    """One variant, in this process: the burst, then the numbers as JSON on stdout."""
    cap, per_call, with_torch = VARIANTS[args.child]
    cap = cap or args.cap_mb
    if with_torch:
        import torch  # noqa: F401

    import tracker

    work = Path(args.child_dir)
    uri = f"sqlite:///{work / f'{args.child}.db'}"
    run = tracker.init(
        project="bench", name=f"memory-{args.child}", uri=uri, system_interval=None,
        spill_dir=str(work / f"spill-{args.child}"), max_memory_mb=cap,
    )  # fmt: skip
    writer = run._writer
    rss_before = _rss_bytes()
    keys, values, log = common.KEYS, common.metric_values, tracker.log
    steps = max(1, args.points // len(keys))
    peak_held = 0
    t0 = time.perf_counter()
    for i in range(steps):
        if per_call:
            log({f"k{j}": v for j, v in enumerate(values(i))}, step=i)
        else:
            log(dict(zip(keys, values(i), strict=True)), step=i)
        if i % 10_000 == 0:
            peak_held = max(peak_held, writer.memory_held())
    t1 = time.perf_counter()
    tracker.flush()
    t2 = time.perf_counter()
    diverted = writer._overflow.points_diverted
    segments = writer._overflow.segments_opened
    # The writer refreshes the chart rollups once idle; let it end before finish() writes
    # the final status (on a busy machine the two would contend for SQLite's write lock).
    writer.close(timeout=None)
    writer._thread.join()
    t3 = time.perf_counter()
    tracker.finish()
    points = steps * len(keys)
    common.check_stored(uri, run.id, points)
    left = sorted(p.name for p in (work / f"spill-{args.child}").glob("*"))
    if left:
        raise RuntimeError(f"files left in the spill folder after the run: {left}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(
        json.dumps(
            {
                "points": points,
                "max_memory_mb": cap,
                "peak_rss_mib": peak / MIB,
                "rss_before_loop_mib": rss_before / MIB,
                "peak_over_start_mib": (peak - rss_before) / MIB,
                "peak_held_estimate_mib": peak_held / MIB,
                "points_through_disk": diverted,
                "overflow_segments": segments,
                "loop_us_per_call": (t1 - t0) / steps * 1e6,
                "flush_after_loop_s": t2 - t1,
                "seconds_to_stored": t2 - t0,
                "rollup_refresh_s": t3 - t2,
                "points_per_s": points / (t2 - t0),
            }
        )
    )
    return 0


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as fh:
        pages = int(fh.read().split()[1])
    return pages * resource.getpagesize()


def run_variant(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    common.progress(f"{name}: {args.points:,} points in a child process")
    argv = [
        sys.executable, __file__, "--child", name, "--child-dir", str(work),
        "--points", str(args.points), "--cap-mb", str(args.cap_mb),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"variant {name} exited {done.returncode}:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000_000, help="points per variant")
    parser.add_argument("--cap-mb", type=float, default=256.0, help="the capped variant's cap")
    parser.add_argument("--child", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--child-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick and not args.child:
        args.points, args.cap_mb = 200_000, 4.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child(args)
    cmd = common.print_header(
        f"peak RSS of a {args.points:,}-point log() burst: cap {args.cap_mb:g} MiB vs no cap"
    )
    results: dict[str, Any] = {}
    with common.workdir(args.workdir, args.keep) as work:
        for name in VARIANTS:
            results[name] = run_variant(name, args, work)
    headers = ("variant", "cap MiB", "peak RSS MiB", "before loop", "peak - before",
               "held est. peak", "via disk", "loop us/call", "flush s", "pts/s e2e")  # fmt: skip
    fields = ("peak_rss_mib", "rss_before_loop_mib", "peak_over_start_mib",
              "peak_held_estimate_mib", "points_through_disk", "loop_us_per_call",
              "flush_after_loop_s", "points_per_s")  # fmt: skip
    rows = [
        (name, "none" if VARIANTS[name][0] else r["max_memory_mb"], *(r[f] for f in fields))
        for name, r in results.items()
    ]
    common.print_table(f"{args.points:,} points, 5 keys per log() call, SQLite", headers, rows)
    saved = common.ratio(results["uncapped"]["peak_rss_mib"], results["capped"]["peak_rss_mib"])
    print(f"ratio uncapped/capped peak RSS: {common.fmt(saved)}")
    over = {
        name: r["peak_over_start_mib"] - r["max_memory_mb"]
        for name, r in results.items()
        if VARIANTS[name][0] is None
    }
    for name, excess in over.items():
        verdict = "within the cap" if excess <= 0 else f"{excess:.1f} MiB OVER the cap"
        print(f"{name}: peak - before is {verdict}")
    doc = {
        "benchmark": "memory",
        "command": cmd,
        "env": common.environment(),
        "params": {"points": args.points, "cap_mb": args.cap_mb, "quick": args.quick},
        "results": results,
        "ratios": {"uncapped_over_capped_peak_rss": saved},
        "over_cap_mib": over,
    }
    common.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
