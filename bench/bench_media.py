"""Cost of ``tracker.log_image()`` to a training loop: 1,000 images of 256x256 in a loop.

Workload, per variant: ``tracker.log_image("samples", image, step=i)`` for ``--images``
steps, each call timed with ``time.perf_counter_ns`` (the image is made before the timer
starts: a fresh array or tensor per step, as a training loop would have). Variants: a
``uint8`` numpy ``256x256x3`` array (copied in the call) and a ``float32`` torch tensor
``3x256x256`` in [0, 1] (detached in the call; converted and encoded in the writer thread).
The calling thread's CPU time in the call is recorded too (``time.thread_time_ns``): the
wall time above it is waiting -- for the GIL held by the writer thread encoding earlier
images, or for a CPU on a busy machine. Then the time until every image is stored
(``finish()``), and a check that all of them are (``media_keys``; the script exits
non-zero otherwise). Store: a SQLite file, artifacts next to it. ``--budget-mb`` is the
media byte budget (``max_media_mb``): past it a call waits for the writer (up to 2 s) and
then encodes to disk itself, so a budget smaller than the loop's whole output shows that
cost in the tail.

    python bench/bench_media.py [--images 1000] [--budget-mb 1024] [--quick] [--json out.json]
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

import common

import tracker

TARGET_US = 50.0
SIZE = 256
VARIANTS = ("numpy_uint8", "torch_float32")


def make_images(variant: str) -> Any:
    """A function step -> a fresh image of the variant (untimed)."""
    import numpy as np

    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (SIZE, SIZE, 3), dtype=np.uint8)
    if variant == "numpy_uint8":
        return lambda i: np.roll(base, i, axis=0)
    import torch

    chw = torch.from_numpy(base).permute(2, 0, 1).float() / 255.0
    return lambda i: torch.roll(chw, i, dims=1)


def measure(work: Path, variant: str, images: int, budget_mb: float) -> dict[str, Any]:
    from tracker.store import Store, artifacts

    uri = f"sqlite:///{work / f'{variant}.db'}"
    make = make_images(variant)
    samples = common.new_samples(images)
    cpu_samples = common.new_samples(images)
    run = tracker.init(
        project="bench-media", uri=uri, system_interval=None, capture_console=False,
        max_media_mb=budget_mb, spill_dir=work / "spill",
    )  # fmt: skip
    log_image = run.log_image
    clock = time.perf_counter_ns
    cpu_clock = time.thread_time_ns
    gc.collect()
    loop_start = time.perf_counter()
    for i in range(images):
        image = make(i)
        c0 = cpu_clock()
        t0 = clock()
        log_image("samples", image, step=i)
        samples[i] = clock() - t0
        cpu_samples[i] = cpu_clock() - c0
    loop_s = time.perf_counter() - loop_start
    spilled = run._writer.uploads.spilled_on_put
    t0 = time.perf_counter()
    run.finish()
    drain_s = time.perf_counter() - t0
    store = Store(uri)
    try:
        steps = artifacts.media_keys(store, run.id).get("images", {}).get("samples", [])
        stored_bytes = sum(a.size for a in artifacts.list_artifacts(store, run.id, "media/"))
    finally:
        store.close()
    if steps != list(range(images)):
        raise SystemExit(f"{variant}: {len(steps)} of {images} images stored")
    cpu = common.call_stats(cpu_samples)
    return {
        **common.call_stats(samples),
        "cpu_median_us": cpu["median_us"],
        "cpu_p99_us": cpu["p99_us"],
        "loop_s": loop_s,
        "drain_after_loop_s": drain_s,
        "images_per_s_end_to_end": images / (loop_s + drain_s),
        "spilled_on_put": spilled,
        "stored_mb": stored_bytes / 2**20,
    }


def main(argv: list[str] | None = None) -> int:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000, help="images per variant")
    parser.add_argument("--budget-mb", type=float, default=1024.0, help="max_media_mb")
    args = parser.parse_args(argv)
    if args.quick:
        args.images = 100
    cmd = common.print_header("tracker.log_image() per-call cost, 256x256 images")
    results: dict[str, Any] = {}
    with common.workdir(args.workdir, args.keep) as work:
        for variant in VARIANTS:
            common.progress(f"{variant}: {args.images} images")
            results[variant] = measure(work, variant, args.images, args.budget_mb)
    common.print_table(
        f"log_image() per call, µs (budget {args.budget_mb:g} MiB)",
        ["image", "calls", "median", "p99", "max", "CPU median", "CPU p99", "loop s",
         "drain s", "img/s", "spilled"],
        [
            [
                name, r["calls"], r["median_us"], r["p99_us"], r["max_us"], r["cpu_median_us"],
                r["cpu_p99_us"], r["loop_s"],
                r["drain_after_loop_s"], r["images_per_s_end_to_end"], r["spilled_on_put"],
            ]
            for name, r in results.items()
        ],
    )  # fmt: skip
    met = all(r["median_us"] <= TARGET_US and r["p99_us"] <= TARGET_US for r in results.values())
    print(f"\nmedian and p99 <= {TARGET_US:g} µs: [{'met' if met else 'MISSED'}]")
    common.write_json(
        args.json,
        {
            "benchmark": "media",
            "command": cmd,
            "env": common.environment(),
            "params": {
                "images": args.images,
                "budget_mb": args.budget_mb,
                "quick": args.quick,
                "size": SIZE,
            },
            "tracker": results,
            "target_us": TARGET_US,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
