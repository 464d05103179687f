"""Cost of the doctor: the pure detectors over a run's series, a final stored pass (read
every series of the run, diagnose, record) and a live pass (the newest 5,000 points per
metric), on SQLite.

    python bench/bench_doctor.py [--steps 20000] [--keys 12] [--json out.json]

The run has ``--keys`` metrics logged at every step (a loss, grad norm, step time, RSS, GPU
allocated, lr, and extra accuracy-like keys), so this is the worst case of a run that logs
everything every step. Prints the median of 5 timings of each.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracker.rules.health import diagnose
from tracker.store import Store
from tracker.store.diagnoses import diagnose_run, read_run_series
from tracker.store.metrics import intern_keys, write_points
from tracker.store.runs import create_run


def series(steps: int, keys: int) -> dict[str, list[tuple[int, float | None]]]:
    rng = random.Random(0)
    out: dict[str, list[tuple[int, float | None]]] = {
        "loss": [
            (s, 0.3 + 2 * math.exp(-s / (steps / 5)) + rng.gauss(0, 0.02)) for s in range(steps)
        ],
        "grad/global_norm": [(s, 1 + rng.random()) for s in range(steps)],
        "sys/step_time_s": [(s, 0.05 * (1 + 0.1 * rng.random())) for s in range(steps)],
        "sys/rss_bytes": [(s, 2e9 + rng.uniform(-1e6, 1e6)) for s in range(steps)],
        "sys/gpu0/allocated_bytes": [(s, 8e9 + (s % 50) * 1e6) for s in range(steps)],
        "lr": [(s, 1e-3) for s in range(steps)],
    }
    for i in range(keys - len(out)):
        out[f"val/acc{i}"] = [(s, min(0.99, s / steps)) for s in range(steps)]
    return out


def timed(fn: object, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=12)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(f"command: python bench/bench_doctor.py --steps {args.steps} --keys {args.keys}")
    data = series(args.steps, args.keys)
    pure = timed(lambda: diagnose(data, final=True))
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'tracker.db'}")
        run = create_run(store, "bench")
        rows = [(run.id, k, s, 0.0, v) for k, pts in data.items() for s, v in pts]
        write_points(store, _rows(store, rows))
        read = timed(lambda: read_run_series(store, run.id))
        full = timed(lambda: diagnose_run(store, run.id, final=True))
        live = timed(lambda: diagnose_run(store, run.id, final=False))
        store.close()
    points = args.steps * args.keys
    result = {"steps": args.steps, "keys": args.keys, "points": points, "pure_s": pure,
              "read_s": read, "full_pass_s": full, "live_pass_s": live}  # fmt: skip
    for k, v in result.items():
        print(f"{k:>12}: {v:.3f}" if isinstance(v, float) else f"{k:>12}: {v}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


def _rows(store: Store, rows: list[tuple[int, str, int, float, float]]) -> list[tuple]:
    ids = intern_keys(store, {k for _, k, _, _, _ in rows})
    return [(r, ids[k], s, int(w), v) for r, k, s, w, v in rows]


if __name__ == "__main__":
    main()
