"""Many training processes logging at once: through one dashboard over HTTP, and straight
into PostgreSQL.

    python bench/bench_fleet.py --pg-url postgresql+psycopg://USER@HOST/DB [--procs 32]
        [--steps 20000] [--ui-workers 4] [--json fleet.json]

``--procs`` training processes (each in its own process group, as on separate hosts) start
together; each makes ``--steps`` ``tracker.log()`` calls of 5 float metrics, timing every
call with ``perf_counter_ns``, then ``finish()`` (everything delivered). Two setups, one after
the other on fresh databases:

* ``http``: ``tracker ui --workers N`` (gunicorn) on a PostgreSQL database, the trainers with
  ``TRACKER_URI=http://...`` and a ``log`` token (the HTTP sink);
* ``postgres``: the same trainers with ``TRACKER_URI`` set to the database (the SQL sink).

Reported per setup: aggregate points/s (every stored point, from the first ``log()`` to the
last ``finish()``), the ``log()`` call's median / p99 / p99.9 over all calls of all processes,
the slowest ``finish()``, and the stored point count, which must equal what was logged (the
benchmark exits non-zero otherwise).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import common

from tracker.store.metrics import count_points

CLI = "import sys; sys.argv[0] = 'tracker'; from tracker.cli import main; main()"
TRACKER = [sys.executable, "-c", CLI]

TRAINER = r"""
import json, sys, time
import tracker
gate, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
run = tracker.init(project="fleet", system_interval=None)
print("READY", flush=True)
while not __import__("os").path.exists(gate):
    time.sleep(0.005)
clock = time.perf_counter_ns
costs = []
start = time.time()
for i in range(steps):
    t0 = clock()
    tracker.log({"train/loss": 1.0 / (i + 1), "train/acc": i * 1e-5, "lr": 3e-4,
                 "grad_norm": 0.5 + i % 7, "tokens_per_s": 1000.0 + i}, step=i)
    costs.append(clock() - t0)
t_fin = time.time()
tracker.finish()
end = time.time()
costs.sort()
json.dump({"run_id": run.id, "start": start, "end": end, "finish_s": end - t_fin,
           "costs_ns": costs[:: max(1, len(costs) // 2000)],
           "median_ns": costs[len(costs) // 2], "p99_ns": costs[int(0.99 * len(costs))],
           "p999_ns": costs[int(0.999 * len(costs))]}, open(out, "w"))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_dashboard(uri: str, workers: int, token: str, logdir: Path) -> tuple[Any, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_TOKEN"] = token
    log = open(logdir / "ui.log", "wb")  # noqa: SIM115 - owned by the process
    proc = subprocess.Popen(
        [*TRACKER, "ui", "--uri", uri, "--port", str(port), "--workers", str(workers)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=logdir,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"the dashboard did not start: {(logdir / 'ui.log').read_text()[-2000:]}")


def make_token(uri: str) -> str:
    from tracker.store import Store, tokens

    store = Store(uri)
    try:
        return tokens.create_token(store, "log", name="fleet")[1]
    finally:
        store.close()


def run_fleet(env_extra: dict[str, str], procs: int, steps: int, work: Path) -> dict[str, Any]:
    gate = work / "gate"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env.update(env_extra)
    trainers = []
    for i in range(procs):
        out = work / f"trainer-{i}.json"
        trainers.append(
            subprocess.Popen(
                [sys.executable, "-c", TRAINER, str(gate), str(out), str(steps)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=open(work / f"trainer-{i}.err", "wb"),  # noqa: SIM115
                cwd=work,
                start_new_session=True,
            )
        )
    for i, p in enumerate(trainers):
        assert p.stdout is not None
        line = p.stdout.readline().decode()
        if not line.startswith("READY"):
            raise RuntimeError(f"trainer {i}: {(work / f'trainer-{i}.err').read_text()[-2000:]}")
    common.progress(f"{procs} trainers ready; go")
    gate.touch()
    for i, p in enumerate(trainers):
        if p.wait(1800) != 0:
            raise RuntimeError(f"trainer {i}: {(work / f'trainer-{i}.err').read_text()[-2000:]}")
    docs = [json.loads((work / f"trainer-{i}.json").read_text()) for i in range(procs)]
    gate.unlink()
    costs = sorted(c for d in docs for c in d["costs_ns"])
    elapsed = max(d["end"] for d in docs) - min(d["start"] for d in docs)
    return {
        "procs": procs,
        "steps": steps,
        "points": procs * steps * 5,
        "seconds": elapsed,
        "points_per_s": procs * steps * 5 / elapsed,
        "log_median_us": statistics.median(costs) / 1000,
        "log_p99_us": costs[int(0.99 * len(costs))] / 1000,
        "log_p999_us": costs[int(0.999 * len(costs))] / 1000,
        "per_process_p99_us_max": max(d["p99_ns"] for d in docs) / 1000,
        "finish_s_max": max(d["finish_s"] for d in docs),
        "run_ids": [d["run_id"] for d in docs],
    }


def stored_points(uri: str, run_ids: list[int]) -> int:
    from tracker.store import Store

    store = Store(uri)
    try:
        return sum(count_points(store, run_id) for run_id in run_ids)
    finally:
        store.close()


def main() -> None:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=32, help="training processes")
    parser.add_argument("--steps", type=int, default=20_000, help="log() calls per process")
    parser.add_argument("--ui-workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--pg-url", default=os.environ.get(common.PG_ENV))
    args = parser.parse_args()
    if args.quick:
        args.procs, args.steps = min(args.procs, 4), min(args.steps, 500)
    if not args.pg_url:
        sys.exit(f"give --pg-url or set {common.PG_ENV}: this benchmark needs PostgreSQL")
    command = common.print_header("many trainers at once: over HTTP and straight to PostgreSQL")
    results: dict[str, Any] = {}
    with common.workdir(args.workdir, args.keep) as work:
        with common.fresh_pg_database(args.pg_url) as uri:
            (work / "http").mkdir(exist_ok=True)
            token = make_token(uri)
            ui, url = start_dashboard(uri, args.ui_workers, token, work / "http")
            try:
                common.progress(f"http: {args.procs} trainers -> {url} ({args.ui_workers} workers)")
                env = {"TRACKER_URI": url, "TRACKER_TOKEN": token}
                results["http"] = run_fleet(env, args.procs, args.steps, work / "http")
            finally:
                os.killpg(ui.pid, signal.SIGTERM)
                ui.wait(60)
            results["http"]["stored_points"] = stored_points(uri, results["http"]["run_ids"])
        with common.fresh_pg_database(args.pg_url) as uri:
            (work / "pg").mkdir(exist_ok=True)
            common.progress(f"postgres: {args.procs} trainers -> the database")
            results["postgres"] = run_fleet({"TRACKER_URI": uri}, args.procs, args.steps,
                                            work / "pg")  # fmt: skip
            results["postgres"]["stored_points"] = stored_points(
                uri, results["postgres"]["run_ids"]
            )
    rows = []
    for name, r in results.items():
        r.pop("run_ids")
        rows.append(
            (name, r["procs"], r["points"], r["stored_points"], r["points_per_s"],
             r["log_median_us"], r["log_p99_us"], r["log_p999_us"], r["finish_s_max"])
        )  # fmt: skip
    common.print_table(
        "trainers logging 5 floats per call",
        ("setup", "procs", "points", "stored", "points/s", "log() median µs", "p99 µs",
         "p99.9 µs", "slowest finish s"),
        rows,
    )  # fmt: skip
    common.write_json(
        args.json,
        {"benchmark": "fleet", "command": command, "environment": common.environment(),
         "params": vars(args) | {"pg_url": bool(args.pg_url)}, "results": results},
    )  # fmt: skip
    lost = [n for n, r in results.items() if r["stored_points"] != r["points"]]
    if lost:
        sys.exit(f"points lost or duplicated in: {', '.join(lost)}")


if __name__ == "__main__":
    main()
