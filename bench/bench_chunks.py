"""The chunk format (tracker.rules.chunk_codec) side by side with the row layout, on SQLite.

Four series of ``--points`` points each (one run, one metric each; steps 0..n-1, wall times
~10 ms apart with jitter): a smooth loss logged from float32 tensors, the same in float64,
Gaussian noise (float64: nothing to predict) and an integer counter. For each:

* **rows**: the points inserted into the product's own ``metric_points`` table (a store made
  by ``tracker``, so the real schema and key) with ``sqlite3``; **chunks**: the same points
  encoded ``--chunk`` points to a chunk and inserted into a table of the shape issue 30
  plans (the chunk's key, its header columns and the bytes; a prototype here, not yet the
  product's). Bytes per point: the growth of the database file after a checkpoint, over the
  points.
* encode and decode rates of the codec alone (points/s, median of ``--repeat``);
* reading the whole series at full resolution: ``SELECT step, value ... ORDER BY step`` into
  Python lists (rows) vs. the chunks' bytes decoded and joined with numpy (chunks).

    python bench/bench_chunks.py [--points 100000] [--chunk 4096] [--repeat 5] [--quick]
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common
import numpy as np

from tracker.rules.chunk_codec import Points, decode, encode, summary
from tracker.store import Store

CHUNKS_DDL = """
CREATE TABLE metric_chunks (
    run_id INTEGER NOT NULL, key_id INTEGER NOT NULL, first_step BIGINT NOT NULL,
    last_step BIGINT NOT NULL, count BIGINT NOT NULL, min_value FLOAT, max_value FLOAT,
    last_value FLOAT, last_wall_ms BIGINT NOT NULL, nan_count BIGINT NOT NULL,
    posinf_count BIGINT NOT NULL, neginf_count BIGINT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (run_id, key_id, first_step)
) WITHOUT ROWID
"""


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


def _store(path: Path) -> sqlite3.Connection:
    Store(f"sqlite:///{path}").close()  # the product's schema, migrated
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(CHUNKS_DDL)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn


def _size(conn: sqlite3.Connection, path: Path) -> int:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return common.sqlite_file_bytes(path)


def _chunks(p: Points, size: int) -> list[Points]:
    return [
        Points(
            p.steps[i : i + size],
            p.seqs[i : i + size],
            p.walls[i : i + size],
            p.values[i : i + size],
        )
        for i in range(0, len(p), size)
    ]


def _rate(fn: Callable[[], Any], points: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return points / statistics.median(times)


def _median_s(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(name: str, p: Points, key_id: int, chunk: int, repeat: int, work: Path) -> dict:
    path = work / f"layout-{key_id}.db"
    conn = _store(path)
    empty = _size(conn, path)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO metric_points (run_id, key_id, step, seq, wall_ms, value) "
        "VALUES (1, ?, ?, 0, ?, ?)",
        zip([key_id] * len(p), p.steps.tolist(), p.walls.tolist(), p.values.tolist(), strict=True),
    )
    conn.execute("COMMIT")
    with_rows = _size(conn, path)
    parts = _chunks(p, chunk)
    blobs = [encode(c) for c in parts]
    conn.execute("BEGIN")
    for c, blob in zip(parts, blobs, strict=True):
        b = summary(c)
        conn.execute(
            "INSERT INTO metric_chunks VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key_id, b.first_step, b.last_step, b.count, b.min, b.max, b.last,
             int(c.walls[-1]), b.nan_count, b.posinf_count, b.neginf_count, blob),
        )  # fmt: skip
    conn.execute("COMMIT")
    with_chunks = _size(conn, path)

    def read_rows() -> int:
        got = conn.execute(
            "SELECT step, value FROM metric_points WHERE run_id = 1 AND key_id = ? ORDER BY step",
            (key_id,),
        ).fetchall()
        return len(got)

    def read_chunks() -> int:
        got = [
            decode(row[0])
            for row in conn.execute(
                "SELECT data FROM metric_chunks WHERE run_id = 1 AND key_id = ? "
                "ORDER BY first_step",
                (key_id,),
            )
        ]
        steps = np.concatenate([g.steps for g in got])
        values = np.concatenate([g.values for g in got])
        return len(steps) + 0 * len(values)

    assert read_rows() == read_chunks() == len(p)
    decoded = [decode(b) for b in blobs]
    assert all(d.same(c) for d, c in zip(decoded, parts, strict=True))
    out = {
        "series": name,
        "points": len(p),
        "rows_bytes_per_point": (with_rows - empty) / len(p),
        "chunks_bytes_per_point": (with_chunks - with_rows) / len(p),
        "codec_bytes_per_point": sum(map(len, blobs)) / len(p),
        "encode_points_per_s": _rate(lambda: [encode(c) for c in parts], len(p), repeat),
        "decode_points_per_s": _rate(lambda: [decode(b) for b in blobs], len(p), repeat),
        "read_rows_ms": 1000 * _median_s(read_rows, repeat),
        "read_chunks_ms": 1000 * _median_s(read_chunks, repeat),
    }
    conn.close()
    return out


def main() -> None:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.quick:
        args.points, args.repeat = 20_000, 3
    common.print_header("chunk format vs row layout (SQLite)")
    results = []
    with common.workdir(args.workdir, args.keep) as work:
        for key_id, (name, p) in enumerate(series(args.points).items(), start=1):
            common.progress(f"{name}: {len(p):,} points")
            results.append(measure(name, p, key_id, args.chunk, args.repeat, work))
    common.print_table(
        f"{args.points:,} points per series, {args.chunk:,} points per chunk",
        [
            "series",
            "rows B/pt",
            "chunks B/pt",
            "encode pts/s",
            "decode pts/s",
            "read rows ms",
            "read chunks ms",
        ],
        [
            [
                r["series"],
                r["rows_bytes_per_point"],
                r["chunks_bytes_per_point"],
                r["encode_points_per_s"],
                r["decode_points_per_s"],
                r["read_rows_ms"],
                r["read_chunks_ms"],
            ]
            for r in results
        ],
    )
    common.write_json(
        args.json,
        {
            "benchmark": "chunks",
            "command": common.command_line(),
            "environment": common.environment(),
            "results": results,
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
