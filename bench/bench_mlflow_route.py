"""Ingest through the MLflow API: the real ``mlflow`` client into ``tracker ui`` and into
MLflow's own ``mlflow server``, side by side in one run.

    python bench/bench_mlflow_route.py [--points 100000] [--calls 500] [--json out.json]

Both servers run on this machine on a fresh SQLite file each (``tracker ui`` under gunicorn
with one worker, ``mlflow server`` with one worker, artifacts proxied), and the same client
code runs against each in a child process:

* ``log_batch``: ``--points`` metric points, 1,000 per ``MlflowClient.log_batch`` call (the
  client's limit), 5 keys; points/s from the first call to the last answer; every point is
  then counted through ``get_metric_history``, and a mismatch fails the benchmark;
* ``log_metric``: ``--calls`` synchronous ``MlflowClient.log_metric`` calls, each timed
  (median, p99 in ms).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import common

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; sys.argv[0] = 'tracker'; from tracker.cli import main; main()"

CLIENT = r"""
import json, statistics, sys, time
from mlflow import MlflowClient
from mlflow.entities import Metric
points, calls, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
keys = ["train/loss", "train/acc", "lr", "grad_norm", "tokens_per_s"]
client = MlflowClient()
run_id = client.create_run(client.create_experiment("bench")).info.run_id
t0 = time.perf_counter()
batch, step = [], 0
now = int(time.time() * 1000)
while step * len(keys) < points:
    batch.extend(Metric(k, 1.0 / (step + 1) + i, now, step) for i, k in enumerate(keys))
    step += 1
    if len(batch) >= 1000:
        client.log_batch(run_id, metrics=batch)
        batch = []
if batch:
    client.log_batch(run_id, metrics=batch)
batch_s = time.perf_counter() - t0
stored = sum(len(client.get_metric_history(run_id, k)) for k in keys)
costs = []
for i in range(calls):
    t = time.perf_counter()
    client.log_metric(run_id, "single", float(i), step=i)
    costs.append((time.perf_counter() - t) * 1000)
costs.sort()
json.dump({"points": step * len(keys), "stored": stored, "batch_s": batch_s,
           "points_per_s": step * len(keys) / batch_s,
           "log_metric_median_ms": statistics.median(costs),
           "log_metric_p99_ms": costs[int(0.99 * (len(costs) - 1))]}, open(out, "w"))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}")


def start_ours(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = work / "tracker-ui.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "ui", "--no-auth", "--port", str(port), "--workers", "1",
         "--uri", f"sqlite:///{work / 'tracker.db'}"],
        cwd=work, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_healthy(f"{url}/api/v1/health", log)
    return proc, url


def run_client(url: str, points: int, calls: int, out: Path) -> dict[str, Any]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": url, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, str(points), str(calls), str(out)],
        env=env, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    result: dict[str, Any] = json.loads(out.read_text())
    if result["stored"] != result["points"]:
        raise RuntimeError(f"{url}: {result['stored']} of {result['points']} points stored")
    return result


def main() -> None:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000, help="log_batch points")
    parser.add_argument("--calls", type=int, default=500, help="timed log_metric calls")
    args = parser.parse_args()
    if args.quick:
        args.points, args.calls = min(args.points, 5_000), min(args.calls, 50)
    command = common.print_header("MLflow client ingest: tracker ui vs mlflow server")
    sys.path.insert(0, str(ROOT))
    from tests.support.mlflow_reference import MlflowReference

    results: dict[str, Any] = {}
    with common.workdir(args.workdir, args.keep) as work:
        common.progress("tracker ui")
        ours, url = start_ours(work)
        try:
            results["tracker"] = run_client(url, args.points, args.calls, work / "ours.json")
        finally:
            ours.terminate()
            ours.wait(60)
        if not args.no_mlflow:
            common.progress("mlflow server")
            reference = MlflowReference(work / "mlflow")
            try:
                results["mlflow"] = run_client(
                    reference.url, args.points, args.calls, work / "mlflow.json"
                )
            finally:
                reference.stop()
    rows = [
        (name, r["points"], r["points_per_s"], r["log_metric_median_ms"], r["log_metric_p99_ms"])
        for name, r in results.items()
    ]
    common.print_table(
        "MLflow client -> server (SQLite)",
        ("server", "points", "log_batch points/s", "log_metric median ms", "p99 ms"),
        rows,
    )
    ratios = {}
    if "mlflow" in results:
        ours_r, theirs = results["tracker"], results["mlflow"]
        ratios = {
            "log_batch_speedup": ours_r["points_per_s"] / theirs["points_per_s"],
            "log_metric_median_speedup": theirs["log_metric_median_ms"]
            / ours_r["log_metric_median_ms"],
        }
        print(f"\ntracker / mlflow: log_batch x{ratios['log_batch_speedup']:.1f}, "
              f"log_metric median x{ratios['log_metric_median_speedup']:.1f}")  # fmt: skip
    common.write_json(
        args.json,
        {"benchmark": "mlflow_route", "command": command, "environment": common.environment(),
         "params": vars(args), "results": results, "ratios": ratios},
    )  # fmt: skip


if __name__ == "__main__":
    main()
