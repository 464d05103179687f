"""The dashboard's server side, next to MLflow: chart series, runs search, HTTP ingest.

1. Series: a ``--points`` (1,000,000) point series of one run; server time of
   ``GET /api/v1/runs/<id>/series?key=..&max_buckets=1500`` (the whole series, min/max/last
   per bucket), of a zoom that returns full resolution (1,500 points) and of a 100,000-step
   window. "Server time" is the app handling the request in-process (Flask test client:
   routing, SQL, downsampling, JSON encoding; no network). MLflow: ``get_metric_history`` of
   the same series from its SQLite store (loaded by SQL, since logging 1M points through its
   client takes minutes).
2. Runs search: ``--runs`` (10,000) runs with a config (optimizer, lr, width, seed) and two
   metrics; ``GET /api/v1/runs?q=config.optimizer == "adam"&sort=metrics.val/acc`` -- one
   page of 50 with the total count and two projected columns. MLflow: ``mlflow.search_runs``
   with ``params.optimizer = 'adam'`` ordered by ``metrics.`val/acc` DESC``, one page of 50
   and every match.
3. HTTP ingest: ``tracker ui`` (gunicorn) in a subprocess on a fresh SQLite file; one client
   process logs ``--ingest-points`` (1,000,000) as 5-key steps with ``TRACKER_URI=http://..``;
   points/s from the first ``log()`` until ``flush()`` returns. Every point is counted after.
4. The ingest price of the rollup levels: ``metrics.write_points`` of 1,000,000 points in
   batches of 2,000 into SQLite, with the rollup refresh on (as shipped) and off.

    python bench/bench_web.py [--quick] [--json out.json] [--no-mlflow] [--pg-url URL]

With ``--pg-url`` (or ``TRACKER_BENCH_PG_URL``) parts 1 and 2 run on PostgreSQL too.
"""

from __future__ import annotations

import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common
import sqlalchemy as sa

from tracker.store.metrics import intern_keys, write_points
from tracker.store.runs import create_run

TARGET_SERIES_MS = 100.0
TARGET_SEARCH_MS = 150.0
TARGET_INGEST_PPS = 100_000
KEY = "train/loss"


def timed(fn: Callable[[], Any], repeat: int) -> dict[str, float]:
    """Median and max wall time of ``fn`` in ms over ``repeat`` calls (after one warm-up)."""
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000.0)
    return {"median_ms": statistics.median(samples), "max_ms": max(samples)}


def app_for(uri: str) -> Any:
    from tracker.web.app import create_app

    return create_app({"STORE_URI": uri, "NO_AUTH": True})  # measures the data path


def get_json(client: Any, url: str) -> Any:
    response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url}: {response.status_code} {response.text[:300]}")
    return response.json


# --------------------------------------------------------------------- series


def load_series(uri: str, points: int) -> tuple[int, float]:
    """One run with a ``points``-point series (spikes and a NaN); returns (run id, seconds)."""
    from tracker.store import Store

    store = Store(uri)
    run = create_run(store, "bench", "series")
    key_id = intern_keys(store, [KEY])[KEY]
    rng = random.Random(0)
    t0 = time.perf_counter()
    batch = 20_000
    for start in range(0, points, batch):
        rows: list[tuple[int, int, int, int, float | None]] = []
        for step in range(start, min(points, start + batch)):
            value = 1.0 / (1 + step * 1e-4) + rng.random() * 0.01
            if step % 99_991 == 0:
                value = 50.0  # rare one-step spikes must survive downsampling
            rows.append((run.id, key_id, step, 1_700_000_000_000 + step, value))
        if start == 0:
            rows[7] = (*rows[7][:4], None)  # a NaN
        write_points(store, rows)
    seconds = time.perf_counter() - t0
    store.close()
    return run.id, seconds


def series_side(uri: str, points: int, repeat: int) -> dict[str, Any]:
    common.progress(f"loading a {points:,}-point series")
    run_id, load_s = load_series(uri, points)
    client = app_for(uri).test_client()
    base = f"/api/v1/runs/{run_id}/series?key={KEY}&max_buckets=1500"
    whole = get_json(client, base)["series"][0]
    if max(v for v in whole["max"] if v is not None) != 50.0 or sum(whole["nan"]) != 1:
        raise RuntimeError("the downsampled series lost a spike or the NaN")
    mid = points // 2
    out: dict[str, Any] = {"points": points, "load_s": load_s, "buckets": len(whole["count"])}
    out["source"] = whole["source"]
    out["whole"] = timed(lambda: get_json(client, base), repeat)
    zoom = f"{base}&lo={mid}&hi={mid + 1499}"
    if get_json(client, zoom)["series"][0]["resolution"] != "full":
        raise RuntimeError("a 1,500-step zoom did not come back at full resolution")
    out["zoom_full"] = timed(lambda: get_json(client, zoom), repeat)
    window = f"{base}&lo={mid}&hi={mid + 99_999}"
    out["window_100k"] = timed(lambda: get_json(client, window), repeat)
    return out


def mlflow_series(workdir: Path, points: int) -> dict[str, Any]:
    """MLflow's get_metric_history of the same series (rows inserted by SQL)."""
    mlflow, exp = _mlflow(workdir / "mlflow-series.db", "series")
    client = mlflow.MlflowClient()
    run = client.create_run(exp)
    run_id = run.info.run_id
    client.log_metric(run_id, KEY, 0.0, step=0)
    rows = [(KEY, 1.0 / (1 + s * 1e-4), 1_700_000_000_000 + s, s, 0, run_id)
            for s in range(1, points)]  # fmt: skip
    with sqlite3.connect(workdir / "mlflow-series.db") as conn:
        conn.executemany(
            "INSERT INTO metrics (key, value, timestamp, step, is_nan, run_uuid) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
    common.progress(f"mlflow get_metric_history of {points:,} points")
    t0 = time.perf_counter()
    history = client.get_metric_history(run_id, KEY)
    seconds = time.perf_counter() - t0
    if len(history) != points:
        raise RuntimeError(f"mlflow returned {len(history):,} of {points:,} points")
    return {"get_metric_history_ms": seconds * 1000.0, "returned": len(history)}


# --------------------------------------------------------------------- search


def run_configs(n: int) -> list[tuple[dict[str, Any], float, float]]:
    rng = random.Random(1)
    out = []
    for i in range(n):
        config = {
            "optimizer": rng.choice(["adam", "sgd"]),
            "lr": rng.choice([1e-4, 3e-4, 1e-3, 3e-3]),
            "model": {"width": rng.choice([32, 64, 128])},
            "seed": i,
        }
        out.append((config, rng.random(), rng.random() * 2))
    return out


def load_runs(uri: str, specs: list[tuple[dict[str, Any], float, float]]) -> float:
    """Insert the runs in one transaction and their two metrics through the ingest path."""
    from tracker.store import Store
    from tracker.store import models as m
    from tracker.store.engine import write_begin

    store = Store(uri)
    t0 = time.perf_counter()
    project = create_run(store, "search", "first").project
    with write_begin(store.engine) as conn:
        pid = conn.execute(
            sa.select(m.ProjectRow.id).where(m.ProjectRow.name == project)
        ).scalar_one()
        now = time.time()
        conn.execute(
            sa.insert(m.RunRow),
            [{"project_id": pid, "name": f"run-{i}", "status": "finished", "config": config,
              "tags": [], "created_at": now + i, "started_at": now + i, "ended_at": now + i + 60}
             for i, (config, _, _) in enumerate(specs)],
        )  # fmt: skip
        ids = list(conn.execute(sa.select(m.RunRow.id).order_by(m.RunRow.id)).scalars())[1:]
    keys = intern_keys(store, ["val/acc", "train/loss"])
    rows = []
    for run_id, (_, acc, loss) in zip(ids, specs, strict=True):
        rows.append((run_id, keys["val/acc"], 100, 0, acc))
        rows.append((run_id, keys["train/loss"], 100, 0, loss))
    write_points(store, rows)
    seconds = time.perf_counter() - t0
    store.close()
    return seconds


def search_side(uri: str, specs: list[Any], repeat: int) -> dict[str, Any]:
    common.progress(f"loading {len(specs):,} runs")
    load_s = load_runs(uri, specs)
    client = app_for(uri).test_client()
    url = ('/api/v1/runs?q=config.optimizer%20==%20"adam"&sort=metrics.val/acc&order=desc'
           "&limit=50&config=lr,model.width&metrics=val/acc")  # fmt: skip
    page = get_json(client, url)
    expected = sum(1 for c, _, _ in specs if c["optimizer"] == "adam")
    accs = [r["metrics"]["val/acc"] for r in page["runs"]]
    if page["total"] != expected or accs != sorted(accs, reverse=True) or len(accs) != 50:
        raise RuntimeError("the runs search returned the wrong page")
    return {"runs": len(specs), "matches": expected, "load_s": load_s, **timed(
        lambda: get_json(client, url), repeat)}  # fmt: skip


def mlflow_search(workdir: Path, specs: list[Any], repeat: int) -> dict[str, Any]:
    """mlflow.search_runs on the same runs, inserted into MLflow's schema by SQL."""
    db = workdir / "mlflow-search.db"
    mlflow, exp = _mlflow(db, "search")
    now = int(time.time() * 1000)
    artifacts = (workdir / "mlflow-artifacts").resolve()
    runs, params, latest, metrics = [], [], [], []
    for i, (config, acc, loss) in enumerate(specs):
        rid = uuid.uuid4().hex
        end = now + i + 60_000
        runs.append((rid, f"run-{i}", "LOCAL", "", "", "bench", "FINISHED", now + i, end,
                     None, "", "active", (artifacts / rid).as_uri(), int(exp)))  # fmt: skip
        params += [("optimizer", config["optimizer"], rid), ("lr", str(config["lr"]), rid),
                   ("model.width", str(config["model"]["width"]), rid)]  # fmt: skip
        for key, value in (("val/acc", acc), ("train/loss", loss)):
            latest.append((key, value, now, 100, 0, rid))
            metrics.append((key, value, now, 100, 0, rid))
    with sqlite3.connect(db) as conn:
        conn.executemany("INSERT INTO runs (run_uuid, name, source_type, source_name, "
                         "entry_point_name, user_id, status, start_time, end_time, deleted_time, "
                         "source_version, lifecycle_stage, artifact_uri, experiment_id) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", runs)  # fmt: skip
        conn.executemany("INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)", params)
        for table, rows in (("latest_metrics", latest), ("metrics", metrics)):
            conn.executemany(
                f"INSERT INTO {table} (key, value, timestamp, step, is_nan, run_uuid) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
    order = ["metrics.`val/acc` DESC"]

    def page() -> Any:
        return mlflow.search_runs([exp], "params.optimizer = 'adam'", order_by=order,
                                  max_results=50)  # fmt: skip

    def every() -> Any:
        return mlflow.search_runs([exp], "params.optimizer = 'adam'", order_by=order)

    expected = sum(1 for c, _, _ in specs if c["optimizer"] == "adam")
    if len(page()) != 50 or len(every()) != expected:
        raise RuntimeError("mlflow.search_runs returned the wrong number of runs")
    common.progress("mlflow search_runs")
    return {"page_50": timed(page, max(3, repeat // 4)), "all_matches": timed(every, 3)}


# --------------------------------------------------------------------- ingest

CLIENT = """
import sys, time, tracker
points, keys = int(sys.argv[1]), ("train/loss", "train/acc", "lr", "grad_norm", "tokens_per_s")
run = tracker.init(project="bench", name="http-ingest", system_interval=None)
log = tracker.log
t0 = time.perf_counter()
for i in range(points // 5):
    b = i * 1e-4
    log({"train/loss": b + 0.12, "train/acc": b + 0.23, "lr": b + 0.34, "grad_norm": b + 0.45,
         "tokens_per_s": b + 0.56}, step=i)
tracker.flush()
print(run.id, time.perf_counter() - t0, flush=True)
tracker.finish()
"""


def http_ingest(workdir: Path, points: int) -> dict[str, Any]:
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = workdir / "http-ingest.db"
    tracker_cli = [sys.executable, "-c", "from tracker.cli import main; main()"]
    env = {k: v for k, v in os.environ.items() if k not in ("TRACKER_URI", "TRACKER_TOKEN")}
    server = subprocess.Popen([*tracker_cli, "ui", "--no-auth", "--port", str(port), "--uri",
                               f"sqlite:///{db}"],
                              env=env, cwd=workdir, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the dashboard did not start") from None
                time.sleep(0.1)
        common.progress(f"HTTP ingest of {points:,} points")
        done = subprocess.run(
            [sys.executable, "-c", CLIENT, str(points)], capture_output=True, text=True,
            env={**env, "TRACKER_URI": f"http://127.0.0.1:{port}"}, cwd=workdir, check=True,
        )  # fmt: skip
        run_id, seconds = done.stdout.split()
    finally:
        server.terminate()
        server.wait(timeout=30)
    common.check_stored(f"sqlite:///{db}", int(run_id), points // 5 * 5)
    return {"points": points // 5 * 5, "seconds": float(seconds),
            "points_per_s": points // 5 * 5 / float(seconds)}  # fmt: skip


# ------------------------------------------------------------- rollup price


def rollup_price(workdir: Path, points: int) -> dict[str, Any]:
    code = """
import sys, time, random
import tracker.store.rollups as r
if sys.argv[2] == "off":
    r.refresh = lambda *a, **k: None
from tracker.store import Store
from tracker.store.metrics import intern_keys, write_points
from tracker.store.runs import create_run
s = Store(sys.argv[1]); run = create_run(s, "p"); k = intern_keys(s, ["x"])["x"]
n = int(sys.argv[3]); rng = random.Random(0)
batches = [[(run.id, k, i, i, rng.random()) for i in range(a, min(n, a + 2000))]
           for a in range(0, n, 2000)]
t0 = time.perf_counter()
for rows in batches:
    write_points(s, rows)
print(n / (time.perf_counter() - t0))
"""
    out = {}
    for mode in ("off", "on"):
        uri = f"sqlite:///{workdir / f'rollup-{mode}.db'}"
        done = subprocess.run([sys.executable, "-c", code, uri, mode, str(points)],
                              capture_output=True, text=True, check=True)  # fmt: skip
        out[mode] = float(done.stdout)
    out["slowdown"] = 1 - out["on"] / out["off"]
    return out


# ----------------------------------------------------------------------- mlflow


def _mlflow(db: Path, experiment: str) -> tuple[Any, str]:
    import bench_mlflow

    return bench_mlflow._mlflow(db, experiment)


# ------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--ingest-points", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--pg-url", default=os.environ.get(common.PG_ENV))
    args = parser.parse_args(argv)
    if args.quick:
        args.points, args.runs, args.ingest_points, args.repeat = 100_000, 1_000, 100_000, 5
    cmd = common.print_header("dashboard server: series, runs search, HTTP ingest")
    params = {k: getattr(args, k) for k in ("quick", "points", "runs", "ingest_points", "repeat")}
    doc: dict[str, Any] = {"benchmark": "web", "command": cmd, "params": params,
                           "environment": common.environment()}  # fmt: skip
    with common.workdir(args.workdir, args.keep) as work:
        doc["series"] = {"sqlite": series_side(f"sqlite:///{work / 'series.db'}", args.points,
                                               args.repeat)}  # fmt: skip
        specs = run_configs(args.runs)
        doc["search"] = {"sqlite": search_side(f"sqlite:///{work / 'search.db'}", specs,
                                               args.repeat)}  # fmt: skip
        if args.pg_url:
            with common.fresh_pg_database(args.pg_url) as url:
                doc["series"]["postgresql"] = series_side(url, args.points, args.repeat)
            with common.fresh_pg_database(args.pg_url) as url:
                doc["search"]["postgresql"] = search_side(url, specs, args.repeat)
        doc["http_ingest"] = http_ingest(work, args.ingest_points)
        doc["rollup_price"] = rollup_price(work, args.points)
        if not args.no_mlflow:
            doc["mlflow"] = {"series": mlflow_series(work, args.points),
                             "search": mlflow_search(work, specs, args.repeat)}  # fmt: skip
    report(doc)
    common.write_json(args.json, doc)
    return 0


def report(doc: dict[str, Any]) -> None:
    ml = doc.get("mlflow", {})
    rows = []
    for dialect, s in doc["series"].items():
        rows.append([f"series {s['points']:,} pts, whole ({dialect})", s["whole"]["median_ms"],
                     s["whole"]["max_ms"], TARGET_SERIES_MS,
                     common.ratio(ml.get("series", {}).get("get_metric_history_ms"),
                                  s["whole"]["median_ms"])])  # fmt: skip
        rows.append([f"  zoom 1,500 steps, full res ({dialect})", s["zoom_full"]["median_ms"],
                     s["zoom_full"]["max_ms"], None, None])  # fmt: skip
        rows.append([f"  window 100,000 steps ({dialect})", s["window_100k"]["median_ms"],
                     s["window_100k"]["max_ms"], None, None])  # fmt: skip
    for dialect, s in doc["search"].items():
        rows.append([f"search {s['runs']:,} runs, page of 50 ({dialect})", s["median_ms"],
                     s["max_ms"], TARGET_SEARCH_MS,
                     common.ratio(ml.get("search", {}).get("page_50", {}).get("median_ms"),
                                  s["median_ms"])])  # fmt: skip
    common.print_table("server time (ms)", ["request", "median", "max", "target", "mlflow x"], rows)
    if ml:
        common.print_table("mlflow (ms)", ["call", "time"], [
            ["get_metric_history (whole series)", ml["series"]["get_metric_history_ms"]],
            ["search_runs, max_results=50", ml["search"]["page_50"]["median_ms"]],
            ["search_runs, every match", ml["search"]["all_matches"]["median_ms"]],
        ])  # fmt: skip
    ing, price = doc["http_ingest"], doc["rollup_price"]
    common.print_table("ingest", ["what", "points/s", "target"], [
        [f"HTTP, one client, {ing['points']:,} pts (SQLite server)", ing["points_per_s"],
         TARGET_INGEST_PPS],
        ["write_points, rollups off", price["off"], None],
        ["write_points, rollups on (shipped)", price["on"], None],
    ])  # fmt: skip
    print(f"rollup refresh costs {price['slowdown']:.0%} of raw SQLite write throughput")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    raise SystemExit(main())
