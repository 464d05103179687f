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

Beside it, the floor of the numpy call on this host: the same 196 KiB copy with no
tracker, kept (1,000 copies alive at once, as in the queue: fresh memory every time) and
dropped at once (the memory reused); the difference is the cost of first touching memory.

Then what the images cost a training loop (``--loop-steps``, 0 to skip): a small MLP
trained on the CPU (torch's default threads), a fresh ``3x256x256`` tensor image made every
step, run side by side ``--loop-reps`` times each, interleaved: without logging it, logging
it with the encoder thread at the loop's priority (``TRACKER_ENCODER_NICE=0``), at nice 19
(``TRACKER_ENCODER_NICE=19``) and as shipped (the encoder in the idle scheduling class), and
a ``uint8`` numpy ``256x256x3`` image instead, as shipped. Reported: the median time per
step of each, the time each logging variant adds to a step, the call's own median/p99/mean,
and the wait in ``finish()`` for what was not stored yet.

    python bench/bench_media.py [--images 1000] [--budget-mb 1024] [--loop-steps 200]
                                [--loop-reps 3] [--quick] [--json out.json]
"""

from __future__ import annotations

import gc
import os
import statistics
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


def copy_floor(images: int) -> dict[str, Any]:
    """The numpy call's copy alone (``tobytes``, as ``log_image`` does), kept and dropped."""
    import numpy as np

    make = make_images("numpy_uint8")
    out: dict[str, Any] = {}
    for name, keep in (("fresh memory (copies kept)", True), ("reused memory", False)):
        samples = common.new_samples(images)
        kept: list[Any] = []
        clock = time.perf_counter_ns
        gc.collect()
        for i in range(images):
            image = make(i)
            t0 = clock()
            held = np.frombuffer(image.tobytes(), dtype=image.dtype).reshape(image.shape)
            samples[i] = clock() - t0
            if keep:
                kept.append(held)
        del kept
        out[name] = common.call_stats(samples)
    return out


LOOP_VARIANTS = {  # name -> (TRACKER_ENCODER_NICE, image kind); None: no image logged
    "no image": (None, "tensor"),
    "image, encoder at the loop's priority": ("0", "tensor"),
    "image, encoder at nice 19": ("19", "tensor"),
    "image, encoder in the idle class (default)": ("", "tensor"),
    "numpy image, idle class (default)": ("", "numpy"),
}


def measure_loop(work: Path, steps: int, reps: int) -> dict[str, Any]:
    """Time per training step with and without an image logged each step (see above)."""
    import numpy as np
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)
    )
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 512), torch.randn(64, 512)
    base = np.random.default_rng(0).integers(0, 255, (SIZE, SIZE, 3), dtype=np.uint8)
    chw = torch.from_numpy(base).permute(2, 0, 1).float() / 255.0
    step_s: dict[str, list[float]] = {name: [] for name in LOOP_VARIANTS}
    calls: dict[str, list[int]] = {name: [] for name in LOOP_VARIANTS}
    drains: dict[str, list[float]] = {name: [] for name in LOOP_VARIANTS}
    saved = os.environ.get("TRACKER_ENCODER_NICE")
    try:
        for rep in range(reps):
            for index, (name, (nice, kind)) in enumerate(LOOP_VARIANTS.items()):
                common.progress(f"loop rep {rep + 1}/{reps}: {name}")
                os.environ["TRACKER_ENCODER_NICE"] = nice or ""
                uri = f"sqlite:///{work / f'loop-{rep}-{index}.db'}"
                run = tracker.init(
                    project="bench-media-loop", uri=uri, system_interval=None,
                    capture_console=False, max_media_mb=1024, spill_dir=work / "spill",
                )  # fmt: skip
                log = nice is not None
                samples = calls[name]
                gc.collect()
                start = time.perf_counter()
                for i in range(steps):
                    loss = ((model(x) - y) ** 2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    if kind == "tensor":
                        image = torch.roll(chw, i, dims=1)
                    else:
                        image = np.roll(base, i, axis=0)
                    if log:
                        t0 = time.perf_counter_ns()
                        run.log_image("samples", image, step=i)
                        samples.append(time.perf_counter_ns() - t0)
                step_s[name].append((time.perf_counter() - start) / steps)
                t0 = time.perf_counter()
                run.finish()
                drains[name].append(time.perf_counter() - t0)
                if log:
                    _check_stored(uri, run.id, steps, name)
    finally:
        if saved is None:
            os.environ.pop("TRACKER_ENCODER_NICE", None)
        else:
            os.environ["TRACKER_ENCODER_NICE"] = saved
    baseline = statistics.median(step_s["no image"])
    out: dict[str, Any] = {}
    for name in LOOP_VARIANTS:
        step = statistics.median(step_s[name])
        row: dict[str, Any] = {
            "step_ms": step * 1e3,
            "added_ms_per_step": (step - baseline) * 1e3,
            "step_ms_each_rep": [s * 1e3 for s in step_s[name]],
            "drain_s": statistics.median(drains[name]),
        }
        if calls[name]:
            stats = common.call_stats(calls[name])
            row.update(
                call_median_us=stats["median_us"], call_p99_us=stats["p99_us"],
                call_mean_us=stats["mean_us"],
            )  # fmt: skip
        out[name] = row
    return out


def _check_stored(uri: str, run_id: int, steps: int, name: str) -> None:
    from tracker.store import Store, artifacts

    store = Store(uri)
    try:
        got = artifacts.media_keys(store, run_id).get("images", {}).get("samples", [])
    finally:
        store.close()
    if got != list(range(steps)):
        raise SystemExit(f"loop, {name}: {len(got)} of {steps} images stored")


def main(argv: list[str] | None = None) -> int:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000, help="images per variant")
    parser.add_argument("--budget-mb", type=float, default=1024.0, help="max_media_mb")
    parser.add_argument("--loop-steps", type=int, default=200, help="training steps (0: skip)")
    parser.add_argument("--loop-reps", type=int, default=3, help="runs of each loop variant")
    args = parser.parse_args(argv)
    if args.quick:
        args.images = 100
        args.loop_steps, args.loop_reps = min(args.loop_steps, 30), 1
    cmd = common.print_header("tracker.log_image() per-call cost, 256x256 images")
    results: dict[str, Any] = {}
    with common.workdir(args.workdir, args.keep) as work:
        for variant in VARIANTS:
            common.progress(f"{variant}: {args.images} images")
            results[variant] = measure(work, variant, args.images, args.budget_mb)
        common.progress(f"the copy alone: {args.images} images")
        floor = copy_floor(args.images)
        loop = measure_loop(work, args.loop_steps, args.loop_reps) if args.loop_steps else {}
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
    common.print_table(
        "the numpy call's copy alone (no tracker), µs",
        ["memory", "median", "p99", "mean"],
        [[name, r["median_us"], r["p99_us"], r["mean_us"]] for name, r in floor.items()],
    )
    if loop:
        common.print_table(
            f"a training loop, an image each step ({args.loop_steps} steps x "
            f"{args.loop_reps} runs, medians)",
            ["variant", "ms/step", "added ms/step", "call median µs", "call p99 µs",
             "call mean µs", "finish() s"],
            [
                [name, r["step_ms"], r["added_ms_per_step"], r.get("call_median_us", "-"),
                 r.get("call_p99_us", "-"), r.get("call_mean_us", "-"), r["drain_s"]]
                for name, r in loop.items()
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
                "loop_steps": args.loop_steps,
                "loop_reps": args.loop_reps,
            },
            "tracker": results,
            "copy_floor": floor,
            "loop": loop,
            "target_us": TARGET_US,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
