"""Cost of one ``tracker.log()`` call in a tight training loop, next to MLflow's ``log_metric``.

Workload: ``tracker.log({5 keys}, step=i)`` for ``--calls`` steps, each call timed with
``time.perf_counter_ns``, while the writer thread flushes to a SQLite file. Values are
Python floats, numpy float64 / float32 scalars, or 0-d CPU torch tensors (all five keys the
same kind). A second, untimed pass gives the amortized cost: (loop time - the same loop
calling a no-op) / calls. Garbage-collector pauses during the timed loop are recorded,
because a full collection is the usual cause of a multi-millisecond outlier.

Then the same in MLflow (SQLite backend): ``log_metric`` (one key) and ``log_metrics``
(the 5-key dict), synchronous and ``synchronous=False``, and the ratios.

``--signals both`` measures every variant twice in the same sitting: with the
automatic signals (``auto_signals=True``: ``sys/step_time_s`` on every call, RSS once a
second, the default of ``tracker.init``) and with ``auto_signals=False``; the rows say which.
The default, ``--signals on``, measures the first only.

    python bench/bench_log.py [--calls 300000] [--quick] [--json out.json] [--no-mlflow]
                              [--signals both|on|off]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common

import tracker

TARGET_MEDIAN_US = 3.0
TARGET_P999_US = 50.0
VARIANTS = ("float", "numpy_f64", "numpy_f32", "torch_0d")
HEADERS = (
    *("call", "keys", "calls", "median", "p99", "p99.9", "max"),
    *("amortized", "gc max", "stored in loop %"),
)


class GcPauses:
    """Collects the duration of every garbage collection while active (all threads)."""

    def __init__(self) -> None:
        self.pauses_ns: list[tuple[int, int]] = []  # (generation, ns)
        self._start = 0

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter_ns()
        else:
            self.pauses_ns.append((info["generation"], time.perf_counter_ns() - self._start))

    def summary(self) -> dict[str, float]:
        full = [ns for gen, ns in self.pauses_ns if gen == 2]
        return {
            "gc_collections": len(self.pauses_ns),
            "gc_full_collections": len(full),
            "gc_max_pause_us": max((ns for _, ns in self.pauses_ns), default=0) / 1000.0,
        }


def converter(variant: str) -> Callable[[float], Any] | None:
    """How a float becomes the value kind of ``variant`` (None: keep the float)."""
    if variant == "float":
        return None
    if variant.startswith("numpy"):
        import numpy as np

        return np.float64 if variant == "numpy_f64" else np.float32
    import torch

    return torch.tensor


def step_metrics(i: int, conv: Callable[[float], Any] | None) -> dict[str, Any]:
    values = common.metric_values(i)
    if conv is not None:
        values = tuple(conv(v) for v in values)  # type: ignore[assignment]
    return dict(zip(common.KEYS, values, strict=True))


def _noop(metrics: dict[str, Any], step: int | None = None) -> None:
    return None


def _untimed_loop(
    log: Callable[..., None], calls: int, conv: Callable[[float], Any] | None
) -> float:
    t0 = time.perf_counter()
    for i in range(calls):
        log(step_metrics(i, conv), step=i)
    return time.perf_counter() - t0


def noise_floor(calls: int) -> dict[str, Any]:
    """The same timed loop around a no-op call, no writer running: the machine's own jitter.

    A p99.9 or max of the tracker close to this one is the machine (scheduler, other
    processes), not the tracker.
    """
    clock = time.perf_counter_ns
    samples = common.new_samples(calls)
    with GcPauses() as pauses:
        for i in range(calls):
            metrics = step_metrics(i, None)
            s = clock()
            _noop(metrics, step=i)
            samples[i] = clock() - s
    return {**common.call_stats(samples), **pauses.summary()}


def measure_variant(work: Path, variant: str, calls: int, signals: bool = True) -> dict[str, Any]:
    """One fresh SQLite file; a timed pass (distribution) and an untimed pass (amortized)."""
    conv = converter(variant)
    uri = f"sqlite:///{work / f'log-{variant}-{signals}.db'}"
    opts: dict[str, Any] = {"uri": uri, "system_interval": None, "spill_dir": str(work / "spill")}
    opts["auto_signals"] = signals
    clock = time.perf_counter_ns
    log = tracker.log
    run = tracker.init(project="bench", name=f"log-{variant}-timed", **opts)
    writer = getattr(run, "_writer", None)  # only to report that the writer was busy
    samples = common.new_samples(calls)
    with GcPauses() as pauses:
        t0 = time.perf_counter()
        for i in range(calls):
            metrics = step_metrics(i, conv)
            s = clock()
            log(metrics, step=i)
            samples[i] = clock() - s
        t1 = time.perf_counter()
    stored_in_loop = getattr(writer, "points_written", None)
    tracker.flush()
    t2 = time.perf_counter()
    tracker.finish()
    run.sink.close()
    points = calls * len(common.KEYS)
    common.check_stored(uri, run.id, points + (calls - 1 if signals else 0), at_least=signals)
    result: dict[str, Any] = {**common.call_stats(samples), **pauses.summary()}
    result["timed_loop_s"] = t1 - t0
    result["flush_after_loop_s"] = t2 - t1
    result["stored_during_loop"] = (stored_in_loop or 0) / points if writer else None

    run = tracker.init(project="bench", name=f"log-{variant}-untimed", **opts)
    loop_s = _untimed_loop(tracker.log, calls, conv)
    tracker.finish()
    run.sink.close()
    common.check_stored(uri, run.id, points, at_least=signals)
    baseline_s = _untimed_loop(_noop, calls, conv)
    result["loop_us_per_call"] = loop_s / calls * 1e6
    result["baseline_us_per_call"] = baseline_s / calls * 1e6
    result["amortized_us"] = (loop_s - baseline_s) / calls * 1e6
    return result


def tracker_side(
    work: Path, variants: list[str], calls: int, signals: tuple[bool, ...] = (True,)
) -> tuple[dict[str, Any], dict[str, Any]]:
    out: dict[str, Any] = {}
    common.progress(f"noise floor: {calls:,} timed no-op calls")
    floor = noise_floor(calls)
    for variant in variants:
        if variant == "torch_0d":
            try:
                import torch  # noqa: F401 - the variant needs it imported before logging
            except ImportError:
                common.progress("torch is not installed: skipping the torch_0d variant")
                continue
        for on in signals:
            name = variant if on else f"{variant} (signals off)"
            common.progress(f"tracker {name}: {calls:,} calls, timed then untimed")
            out[name] = measure_variant(work, variant, calls, on)
    return out, floor


def ratios(ours: dict[str, Any], theirs: dict[str, Any] | None) -> dict[str, Any]:
    """How many times cheaper a tracker.log() of 5 keys is than each MLflow call (medians)."""
    if not theirs or "float" not in ours:
        return {}
    base = ours["float"]
    out: dict[str, Any] = {}
    for name, r in theirs.items():
        out[f"{name}_median_over_tracker"] = common.ratio(r["median_us"], base["median_us"])
        out[f"{name}_mean_over_tracker"] = common.ratio(r["mean_us"], base["amortized_us"])
    return out


def report(
    ours: dict[str, Any], floor: dict[str, Any], theirs: dict[str, Any] | None, rat: dict[str, Any]
) -> None:
    cols = ("calls", "median_us", "p99_us", "p999_us", "max_us")
    rows: list[list[Any]] = [["no-op (noise floor)", 5, *(floor[c] for c in cols), None]]
    rows[0] += [floor["gc_max_pause_us"]]
    for v, r in ours.items():
        in_loop = None if r["stored_during_loop"] is None else r["stored_during_loop"] * 100
        stats = [r[c] for c in cols]
        rows.append(
            [f"tracker.log {v}", 5, *stats, r["amortized_us"], r["gc_max_pause_us"], in_loop]
        )
    for name, r in (theirs or {}).items():
        rows.append([f"mlflow {name}", r["keys_per_call"], *(r[c] for c in cols), r["mean_us"]])
    common.print_table(
        "per-call cost in µs (amortized: tracker = (loop - no-op loop) / calls; mlflow = mean)",
        HEADERS,
        [row + [None] * (len(HEADERS) - len(row)) for row in rows],
    )
    print("(gc max: longest garbage collection during the timed loop, any thread, µs)")
    if "float" in ours:
        f = ours["float"]
        print(
            f"\ntargets (float): median {f['median_us']:.2f} µs <= {TARGET_MEDIAN_US} "
            f"[{'met' if f['median_us'] <= TARGET_MEDIAN_US else 'MISSED'}], "
            f"p99.9 {f['p999_us']:.1f} µs <= {TARGET_P999_US} "
            f"[{'met' if f['p999_us'] <= TARGET_P999_US else 'MISSED'}]; writer had stored "
            f"{(f['stored_during_loop'] or 0) * 100:.0f}% of the points when the loop ended"
        )
    if theirs:
        common.print_table(
            "MLflow async drain (flush_async_logging) and ratios",
            ["call", "loop s", "drain s", "pts/s e2e", "median ×", "mean ×"],
            [
                [
                    n,
                    r["loop_s"],
                    r["drain_s"],
                    r["points_per_s"],
                    rat.get(f"{n}_median_over_tracker"),
                    rat.get(f"{n}_mean_over_tracker"),
                ]
                for n, r in theirs.items()
            ],
        )
        print("(×: MLflow's cost per call / tracker.log()'s for a 5-key float dict)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300_000, help="log() calls per variant")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {VARIANTS}"
    )
    parser.add_argument(
        "--signals",
        choices=("both", "on", "off"),
        default="on",
        help="automatic signals (step time, RSS) on (default), off, or both side by side",
    )
    parser.add_argument("--mlflow-sync-calls", type=int, default=2_000)
    parser.add_argument("--mlflow-async-calls", type=int, default=20_000)
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.mlflow_sync_calls, args.mlflow_async_calls = 20_000, 30, 300
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; choose from {VARIANTS}")
    args.variant_list = variants
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cmd = common.print_header("tracker.log() per-call cost vs MLflow log_metric")
    timer_ns = common.timer_overhead_ns(time.perf_counter_ns)
    with common.workdir(args.workdir, args.keep) as work:
        signals = {"both": (True, False), "on": (True,), "off": (False,)}[args.signals]
        ours, floor = tracker_side(work, args.variant_list, args.calls, signals)
        theirs = None
        if not args.no_mlflow:
            import bench_mlflow

            theirs = bench_mlflow.log_call_costs(
                work,
                args.mlflow_sync_calls,
                args.mlflow_async_calls,
                args.mlflow_async_calls // 5,
            )
    rat = ratios(ours, theirs)
    report(ours, floor, theirs, rat)
    print(f"\ntimer overhead (two perf_counter_ns reads): {timer_ns:.0f} ns, not subtracted")
    f = ours.get("float", {})
    doc = {
        "benchmark": "log",
        "command": cmd,
        "env": common.environment(),
        "params": {
            "calls": args.calls,
            "keys": len(common.KEYS),
            "mlflow_sync_calls": args.mlflow_sync_calls,
            "mlflow_async_calls": args.mlflow_async_calls,
            "mlflow_async_dict_calls": args.mlflow_async_calls // 5,
            "quick": args.quick,
            "signals": args.signals,
        },
        "timer_overhead_ns": timer_ns,
        "noise_floor": floor,
        "tracker": ours,
        "mlflow": theirs,
        "ratios": rat,
        "targets": {
            "median_us": {"target": TARGET_MEDIAN_US, "value": f.get("median_us")},
            "p999_us": {"target": TARGET_P999_US, "value": f.get("p999_us")},
        },
    }
    common.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
