"""Sealed chunks (tracker.store.chunks) side by side with the row layout, on SQLite.

Four series of ``--points`` points each (one run, one metric each; steps 0..n-1, wall times
~10 ms apart with jitter): a smooth loss logged from float32 tensors, the same in float64,
Gaussian noise (float64: nothing to predict) and an integer counter. For each, two fresh
stores made by the product (its migrated schema), the points written by its own
``write_points`` into both, and one of them sealed (``chunks.seal``, ``--chunk`` points per
chunk):

* bytes per point: each database file's growth over its empty schema, after ``VACUUM``;
* the seal's rate, and the codec's encode and decode rates alone (points/s; median of
  ``--repeat``);
* reading the whole series at full resolution: ``metrics.metric_history`` (a list of
  ``MetricPoint``) on each store, and ``chunks.read_points`` (numpy columns) on the sealed
  one. Both stores' histories are checked equal first.

With ``--pg-url`` the same series go into two fresh PostgreSQL databases too: bytes per
point are the tables' growth (``pg_total_relation_size``: heap, TOAST and indexes, after
``VACUUM FULL``) and the seal's rate there.

``--chart-points N`` (default 1,000,000) adds the chart reads (``store.series``) of one
N-point series, sealed and not, side by side: the whole run (rollups), an N/20-step window
(grouped points) and a 1,000-step window (full resolution), at 1,000 buckets; and the
workspace's overlay of 100 runs of 60,000 points each (``read_aligned``, 500 buckets).

``--long-overlay RUNS POINTS`` (default 100 x 1,000,000; 0 0 leaves it out) times the
workspace's overlay of long runs: RUNS runs of POINTS points each, written as packed chunks
(what a tight training loop writes), read by ``read_aligned`` at the buckets a workspace
panel asks (40 to 400 by its width: 114 is a third of a 1,440 px page, 400 the widest)
and at 1,000, with the rollup level each read used; and the workspace's own request for
them (``GET /api/v1/workspace/series``, through the dashboard's app) at 114 and 400
buckets, the JSON included (median of ``--repeat``).

    python bench/bench_chunks.py [--points 100000] [--chunk 4096] [--repeat 5] [--quick]
                                 [--pg-url URL] [--chart-points N] [--long-overlay RUNS POINTS]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common
import numpy as np

from tracker.rules.chunk_codec import Points, decode, encode
from tracker.store import Store
from tracker.store import series as chart
from tracker.store.chunks import read_points, seal, seal_run
from tracker.store.metrics import intern_keys, metric_history, write_points
from tracker.store.runs import create_run


def series(n: int) -> dict[str, Points]:
    rng = np.random.default_rng(0)
    steps = np.arange(n)
    walls = 1_750_000_000_000 + np.cumsum(rng.integers(8, 13, n))
    t = np.arange(n) / max(n, 1)
    smooth = 2.5 * np.exp(-4 * t) + 0.05 * np.sin(np.arange(n) / 50) + 0.3
    return {
        "smooth loss (float32 values)": Points.of(
            steps, smooth.astype(np.float32).astype(np.float64), walls
        ),
        "smooth loss (float64 values)": Points.of(steps, smooth, walls),
        "Gaussian noise (float64)": Points.of(steps, rng.standard_normal(n), walls),
        "integer counter": Points.of(steps, np.arange(n) * 512.0, walls),
    }


def _store(path: Path) -> tuple[Store, int]:
    store = Store(f"sqlite:///{path}")  # the product's schema, migrated
    _vacuum(store)
    return store, common.sqlite_file_bytes(path)


def _vacuum(store: Store) -> None:
    raw = store.engine.raw_connection()
    try:
        raw.execute("VACUUM")
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        raw.close()


def _write(store: Store, p: Points) -> tuple[int, int]:
    run = create_run(store, "bench").id
    key = intern_keys(store, ["series"])["series"]
    rows = list(
        zip([run] * len(p), [key] * len(p), p.steps.tolist(), p.walls.tolist(),
            p.values.tolist(), strict=True)
    )  # fmt: skip
    for i in range(0, len(rows), 50_000):
        write_points(store, rows[i : i + 50_000])
    return run, key


def _chunks(p: Points, size: int) -> list[Points]:
    return [
        Points(p.steps[i : i + size], p.seqs[i : i + size], p.walls[i : i + size],
               p.values[i : i + size])
        for i in range(0, len(p), size)
    ]  # fmt: skip


def _median_s(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(name: str, p: Points, index: int, chunk: int, repeat: int, work: Path) -> dict:
    rows_db, sealed_db = work / f"rows-{index}.db", work / f"chunks-{index}.db"
    rows_store, rows_empty = _store(rows_db)
    sealed_store, sealed_empty = _store(sealed_db)
    try:
        rows_run, _ = _write(rows_store, p)
        sealed_run, key = _write(sealed_store, p)
        t = time.perf_counter()
        sealed = seal(sealed_store, sealed_run, key, chunk_points=chunk)
        seal_s = time.perf_counter() - t
        assert sealed == len(p)
        _vacuum(rows_store)
        _vacuum(sealed_store)
        history = metric_history(rows_store, rows_run, "series")
        assert metric_history(sealed_store, sealed_run, "series") == history
        assert read_points(sealed_store, sealed_run, key).same(p)
        parts = _chunks(p, chunk)
        blobs = [encode(c) for c in parts]
        n = len(p)
        return {
            "series": name,
            "points": n,
            "rows_bytes_per_point": (common.sqlite_file_bytes(rows_db) - rows_empty) / n,
            "chunks_bytes_per_point": (common.sqlite_file_bytes(sealed_db) - sealed_empty) / n,
            "codec_bytes_per_point": sum(map(len, blobs)) / n,
            "seal_points_per_s": n / seal_s,
            "encode_points_per_s": n / _median_s(lambda: [encode(c) for c in parts], repeat),
            "decode_points_per_s": n / _median_s(lambda: [decode(b) for b in blobs], repeat),
            "history_rows_ms": 1000
            * _median_s(lambda: metric_history(rows_store, rows_run, "series"), repeat),
            "history_chunks_ms": 1000
            * _median_s(lambda: metric_history(sealed_store, sealed_run, "series"), repeat),
            "read_points_chunks_ms": 1000
            * _median_s(lambda: read_points(sealed_store, sealed_run, key), repeat),
        }
    finally:
        rows_store.close()
        sealed_store.close()


def _pg_bytes(store: Store) -> int:
    import sqlalchemy as sa

    engine = sa.create_engine(
        store.engine.url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool
    )
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("VACUUM FULL metric_points")
            conn.exec_driver_sql("VACUUM FULL metric_chunks")
            return int(
                conn.exec_driver_sql(
                    "SELECT pg_total_relation_size('metric_points') "
                    "+ pg_total_relation_size('metric_chunks')"
                ).scalar_one()
            )
    finally:
        engine.dispose()


def measure_pg(name: str, p: Points, chunk: int, server: str) -> dict:
    with common.fresh_pg_database(server) as rows_url, common.fresh_pg_database(server) as url:
        rows_store, sealed_store = Store(rows_url), Store(url)
        try:
            empty = _pg_bytes(rows_store)
            _write(rows_store, p)
            sealed_run, key = _write(sealed_store, p)
            t = time.perf_counter()
            assert seal(sealed_store, sealed_run, key, chunk_points=chunk) == len(p)
            seal_s = time.perf_counter() - t
            assert read_points(sealed_store, sealed_run, key).same(p)
            n = len(p)
            return {
                "series": name,
                "pg_rows_bytes_per_point": (_pg_bytes(rows_store) - empty) / n,
                "pg_chunks_bytes_per_point": (_pg_bytes(sealed_store) - empty) / n,
                "pg_seal_points_per_s": n / seal_s,
            }
        finally:
            rows_store.close()
            sealed_store.close()


def measure_charts(n: int, overlay: tuple[int, int], repeat: int, work: Path) -> list[dict]:
    """Chart reads of one n-point series, rows and sealed, and an overlay of
    ``overlay`` = (runs, points each)."""
    runs_n, small_n = overlay
    p = series(n)["smooth loss (float64 values)"]
    stores = {}
    for layout in ("rows", "chunks"):
        store, _ = _store(work / f"chart-{layout}.db")
        runs = [_write(store, p)[0]]
        small = Points(p.steps[:small_n], p.seqs[:small_n], p.walls[:small_n], p.values[:small_n])
        runs += [_write(store, small)[0] for _ in range(runs_n)]
        if layout == "chunks":
            for run in runs:
                seal_run(store, run)
        stores[layout] = (store, runs)
    windows = {
        f"whole run ({n:,} steps)": {},
        f"{n // 20:,} steps": {"lo": 0, "hi": n // 20 - 1},
        "1,000 steps": {"lo": n // 2, "hi": n // 2 + 999},
    }
    out = []
    for label, kw in windows.items():
        row: dict[str, Any] = {"read": label}
        for layout, (store, runs) in stores.items():

            def read(s: Store = store, r: int = runs[0], kw: dict = kw) -> Any:
                return chart.read_series(s, r, "series", max_buckets=1000, **kw)

            row[f"{layout}_source"] = read().source
            row[f"{layout}_ms"] = 1000 * _median_s(read, repeat)
        a = chart.read_series(stores["rows"][0], stores["rows"][1][0], "series", **kw)
        b = chart.read_series(stores["chunks"][0], stores["chunks"][1][0], "series", **kw)
        assert len(a.series.buckets) == len(b.series.buckets) and a.wall_ms == b.wall_ms
        out.append(row)
    row = {"read": f"{runs_n} runs x {small_n:,} points (workspace)"}
    for layout, (store, runs) in stores.items():
        row[f"{layout}_source"] = "aligned"
        row[f"{layout}_ms"] = 1000 * _median_s(
            lambda s=store, r=runs[1:]: chart.read_aligned(s, r, ["series"], max_buckets=500),
            repeat,
        )
    out.append(row)
    for store, _runs in stores.values():
        store.close()
    return out


def measure_long_overlay(runs_n: int, n: int, repeat: int, work: Path) -> list[dict]:
    """The overlay of ``runs_n`` runs of ``n`` points each, written packed."""
    store, _ = _store(work / "long-overlay.db")
    key = intern_keys(store, ["series"])["series"]
    steps = np.arange(n, dtype=np.int64)
    runs = []
    start = time.perf_counter()
    for r in range(runs_n):
        run = create_run(store, "bench").id
        values = np.exp(-3.0 * steps / n) + 0.01 * np.sin(steps / 50.0 + r)
        p = Points.of(steps, values, 1_700_000_000_000 + 10 * steps)
        for part in _chunks(p, 262_144):
            write_points(store, [], packed=[(run, key, part)])
        runs.append(run)
        if (r + 1) % 10 == 0:
            common.progress(f"long overlay: {r + 1}/{runs_n} runs written")
    write_s = time.perf_counter() - start
    out = []
    for buckets in (114, 250, 400, 1000):
        (read,), _ = chart.read_aligned(store, runs, ["series"], max_buckets=buckets)
        sources = sorted({r.source for r in read.reads.values()})
        ms = 1000 * _median_s(
            lambda b=buckets: chart.read_aligned(store, runs, ["series"], max_buckets=b), repeat
        )
        out.append({"read": f"{runs_n} runs x {n:,} points, {buckets} buckets",
                    "source": ",".join(sources), "ms": ms, "write_points_per_s":
                    runs_n * n / write_s})  # fmt: skip
    store.close()
    from tracker.web.app import create_app

    client = create_app({"STORE_URI": f"sqlite:///{work / 'long-overlay.db'}", "NO_AUTH": True})
    get = client.test_client().get
    for buckets in (114, 400):
        url = f"/api/v1/workspace/series?keys=series&limit={runs_n}&max_buckets={buckets}"
        answer = get(url)
        assert answer.status_code == 200 and len(answer.get_json()["runs"]) == runs_n
        ms = 1000 * _median_s(lambda u=url: get(u), repeat)
        out.append({"read": f"GET workspace/series, {runs_n} runs, {buckets} buckets",
                    "source": f"{len(answer.data):,} B of JSON", "ms": ms,
                    "write_points_per_s": runs_n * n / write_s})  # fmt: skip
    return out


def main() -> None:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pg-url", help="a PostgreSQL server URL (databases are made on it)")
    parser.add_argument("--chart-points", type=int, default=1_000_000)
    parser.add_argument(
        "--long-overlay", type=int, nargs=2, default=(100, 1_000_000), metavar=("RUNS", "POINTS")
    )
    args = parser.parse_args()
    if args.quick:
        args.points, args.repeat, args.chart_points = 20_000, 3, 100_000
        args.long_overlay = (5, 100_000)
    overlay = (10, 5_000) if args.quick else (100, 60_000)
    common.print_header("chunk format vs row layout (SQLite)")
    results = []
    with common.workdir(args.workdir, args.keep) as work:
        for key_id, (name, p) in enumerate(series(args.points).items(), start=1):
            common.progress(f"{name}: {len(p):,} points")
            results.append(measure(name, p, key_id, args.chunk, args.repeat, work))
    common.print_table(
        f"{args.points:,} points per series, {args.chunk:,} points per chunk",
        ["series", "rows B/pt", "chunks B/pt", "seal pts/s", "encode pts/s", "decode pts/s",
         "history rows ms", "history chunks ms", "read_points ms"],
        [
            [r["series"], r["rows_bytes_per_point"], r["chunks_bytes_per_point"],
             r["seal_points_per_s"], r["encode_points_per_s"], r["decode_points_per_s"],
             r["history_rows_ms"], r["history_chunks_ms"], r["read_points_chunks_ms"]]
            for r in results
        ],
    )  # fmt: skip
    pg = []
    if args.pg_url:
        for name, p in series(args.points).items():
            common.progress(f"PostgreSQL: {name}")
            pg.append(measure_pg(name, p, args.chunk, args.pg_url))
        common.print_table(
            f"PostgreSQL: {args.points:,} points per series",
            ["series", "rows B/pt", "chunks B/pt", "seal pts/s"],
            [[r["series"], r["pg_rows_bytes_per_point"], r["pg_chunks_bytes_per_point"],
              r["pg_seal_points_per_s"]] for r in pg],
        )  # fmt: skip
    charts = []
    if args.chart_points:
        with common.workdir(args.workdir, args.keep) as work:
            common.progress(f"chart reads: {args.chart_points:,} points; {overlay} overlay")
            charts = measure_charts(args.chart_points, overlay, args.repeat, work)
        common.print_table(
            "chart reads (store.series, 1,000 buckets), SQLite",
            ["read", "rows source", "rows ms", "chunks source", "chunks ms"],
            [[r["read"], r["rows_source"], r["rows_ms"], r["chunks_source"], r["chunks_ms"]]
             for r in charts],
        )  # fmt: skip
    long_overlay = []
    if all(args.long_overlay):
        with common.workdir(args.workdir, args.keep) as work:
            long_overlay = measure_long_overlay(*args.long_overlay, args.repeat, work)
        common.print_table(
            "the workspace's overlay of long runs (read_aligned), SQLite",
            ["read", "source", "ms", "write pts/s"],
            [[r["read"], r["source"], r["ms"], r["write_points_per_s"]] for r in long_overlay],
        )
    common.write_json(
        args.json,
        {
            "benchmark": "chunks",
            "command": common.command_line(),
            "environment": common.environment(),
            "results": results,
            "postgresql": pg,
            "charts": charts,
            "long_overlay": long_overlay,
            "params": {
                "points": args.points,
                "chunk": args.chunk,
                "repeat": args.repeat,
                "quick": args.quick,
            },
        },
    )


if __name__ == "__main__":
    main()
