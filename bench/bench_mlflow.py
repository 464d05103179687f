"""The MLflow side of the comparison: the same workloads through the real ``mlflow`` client.

``bench_log.py`` and ``bench_ingest.py`` call these functions in their own process, after
the tracker's measurements, so the ratios they print come from one run on one machine.
Run alone (``python bench/bench_mlflow.py``) it measures MLflow only.

Backend: a SQLite file via ``mlflow.set_tracking_uri("sqlite:///...")``, MLflow's default
settings otherwise. ``mlflow`` is imported on first use, never at module import.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import common

# Log batches larger than this are rejected by MLflow (MAX_METRICS_PER_BATCH).
MLFLOW_BATCH_LIMIT = 1000


def _mlflow(db_path: Path, experiment: str) -> tuple[Any, str]:
    """Import mlflow quietly, point it at a SQLite file, return (mlflow, experiment_id)."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    warnings.filterwarnings("ignore", module="mlflow")
    warnings.filterwarnings("ignore", category=FutureWarning)
    import mlflow

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    mlflow.set_tracking_uri(f"sqlite:///{db_path}")
    client = mlflow.MlflowClient()
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        return mlflow, found.experiment_id
    artifacts = (db_path.parent / "mlflow-artifacts").resolve().as_uri()
    return mlflow, client.create_experiment(experiment, artifact_location=artifacts)


def log_call_costs(
    workdir: Path, sync_calls: int, async_calls: int, async_dict_calls: int
) -> dict[str, Any]:
    """Per-call cost of ``log_metric``/``log_metrics``, synchronous and ``synchronous=False``.

    ``log_metric`` logs one key per call; ``log_metrics`` a 5-key dict per call (the
    tracker workload). For the async modes the time to drain MLflow's queue
    (``flush_async_logging``) is measured too, giving its end-to-end points/s.
    """
    mlflow, exp = _mlflow(workdir / "mlflow-log.db", "bench-log")
    clock = time.perf_counter_ns
    out: dict[str, Any] = {}
    with mlflow.start_run(experiment_id=exp):
        for name, calls, one_key, sync in (
            ("log_metric_sync", sync_calls, True, True),
            ("log_metrics_sync", sync_calls, False, True),
            ("log_metric_async", async_calls, True, False),
            ("log_metrics_async", async_dict_calls, False, False),
        ):
            common.progress(f"mlflow {name}: {calls:,} calls")
            samples = common.new_samples(calls)
            t0 = time.perf_counter()
            for i in range(calls):
                vals = common.metric_values(i)
                if one_key:
                    s = clock()
                    mlflow.log_metric(name, vals[0], step=i, synchronous=sync)
                    samples[i] = clock() - s
                else:
                    metrics = dict(zip(common.KEYS, vals, strict=True))
                    s = clock()
                    mlflow.log_metrics(metrics, step=i, synchronous=sync)
                    samples[i] = clock() - s
            t1 = time.perf_counter()
            if not sync:
                mlflow.flush_async_logging()
            t2 = time.perf_counter()
            points = calls * (1 if one_key else len(common.KEYS))
            out[name] = {
                **common.call_stats(samples),
                "keys_per_call": 1 if one_key else len(common.KEYS),
                "loop_s": t1 - t0,
                "drain_s": t2 - t1,
                "points_per_s": points / (t2 - t0),
            }
    return out


def batch_ingest(workdir: Path, points: int) -> dict[str, Any]:
    """``MlflowClient.log_batch`` of 5-key steps in batches of 1,000 metrics: points/s, bytes."""
    from mlflow.entities import Metric

    db_path = workdir / "mlflow-ingest.db"
    mlflow, exp = _mlflow(db_path, "bench-ingest")
    client = mlflow.MlflowClient()
    run = client.create_run(exp)
    run_id = run.info.run_id
    empty_bytes = common.sqlite_file_bytes(db_path)
    steps = max(1, points // len(common.KEYS))
    points = steps * len(common.KEYS)
    per_batch = MLFLOW_BATCH_LIMIT // len(common.KEYS)
    common.progress(f"mlflow log_batch: {points:,} points")
    t0 = time.perf_counter()
    for first in range(0, steps, per_batch):
        wall_ms = int(time.time() * 1000)
        batch = [
            Metric(key, value, wall_ms, step)
            for step in range(first, min(first + per_batch, steps))
            for key, value in zip(common.KEYS, common.metric_values(step), strict=True)
        ]
        client.log_batch(run_id, metrics=batch, synchronous=True)
    seconds = time.perf_counter() - t0
    client.set_terminated(run_id)
    db_bytes = common.sqlite_file_bytes(db_path)
    return {
        "points": points,
        "batch_points": per_batch * len(common.KEYS),
        "seconds": seconds,
        "points_per_s": points / seconds,
        "db_bytes": db_bytes,
        "bytes_per_point": db_bytes / points,
        "bytes_per_point_delta": (db_bytes - empty_bytes) / points,
    }


def main(argv: list[str] | None = None) -> int:
    parser = common.base_parser("MLflow alone: log_metric costs and log_batch ingest (SQLite).")
    parser.add_argument("--points", type=int, default=100_000, help="log_batch points")
    parser.add_argument("--sync-calls", type=int, default=2_000)
    parser.add_argument("--async-calls", type=int, default=20_000)
    args = parser.parse_args(argv)
    if args.quick:
        args.points, args.sync_calls, args.async_calls = 5_000, 30, 300
    cmd = common.print_header("MLflow alone (SQLite backend)")
    with common.workdir(args.workdir, args.keep) as work:
        calls = log_call_costs(work, args.sync_calls, args.async_calls, args.async_calls // 5)
        ingest = batch_ingest(work, args.points)
    rows = [
        [
            name,
            r["keys_per_call"],
            r["calls"],
            r["median_us"],
            r["p99_us"],
            r["max_us"],
            r["points_per_s"],
        ]
        for name, r in calls.items()
    ]
    common.print_table(
        "MLflow per-call cost (µs)",
        ["call", "keys", "calls", "median", "p99", "max", "pts/s e2e"],
        rows,
    )
    common.print_table(
        "MLflow log_batch ingest",
        ["backend", "points", "pts/s", "bytes/pt"],
        [["sqlite", ingest["points"], ingest["points_per_s"], ingest["bytes_per_point"]]],
    )
    doc = {
        "benchmark": "mlflow",
        "command": cmd,
        "env": common.environment(),
        "mlflow": {"calls": calls, "batch": ingest},
    }
    common.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
