"""A big burst into SQLite, then ``finish()``, while another process keeps writing.

Workload: a child process calls ``tracker.log({5 keys}, step=i)`` in a tight loop
(``--points`` points in all) into a fresh SQLite file and then ``finish()``; the writer
refreshes the chart rollups once idle, in chunks of short transactions
(``tracker.store.points.refresh_rollups``). Meanwhile this process runs one tiny write
transaction after another on the same file, as the dashboard or another run would, and
records the longest it waited for the write lock. Afterwards: the run's status, and the
rollups against a full rebuild.

Before the chunked refresh, the writer's one refresh transaction held the lock for
86-109 s after 10M points, and ``finish_run`` failed with "database is locked".

    python bench/bench_settle.py [--points 10000000]
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from tracker.store.metrics import refresh_rollups
from tracker.store.runs import get_run

CHILD = """
    import sys, time, tracker
    run = tracker.init(project="bench", uri=sys.argv[1], system_interval=None)
    t0 = time.perf_counter()
    for step in range(int(sys.argv[2]) // 5):
        run.log({"a": step * 0.5, "b": 1.0, "c": -step, "d": step % 7, "e": 3.0}, step=step)
    t1 = time.perf_counter()
    run.finish()
    print(run.id, t1 - t0, time.perf_counter() - t1)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000_000)
    args = parser.parse_args()
    import sqlalchemy as sa

    from tracker.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tracker.db"
        url = f"sqlite:///{path}"
        Store(url).close()
        child = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(CHILD), url, str(args.points)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        conn = sqlite3.connect(path, timeout=60.0, isolation_level=None)
        writes, worst = 0, 0.0
        while child.poll() is None:
            began = time.monotonic()
            conn.execute("BEGIN IMMEDIATE")
            worst = max(worst, time.monotonic() - began)
            conn.execute("UPDATE runs SET heartbeat_at = heartbeat_at WHERE id = 0")
            conn.execute("COMMIT")
            writes += 1
            time.sleep(0.05)  # a dashboard-like pace, not a second hot loop
        conn.close()
        out, err = child.communicate()
        if child.returncode != 0:
            print(err, file=sys.stderr)
            return 1
        run_id, loop_s, finish_s = out.split()
        store = Store(url)
        status = get_run(store, int(run_id)).status
        query = "SELECT * FROM metric_rollups WHERE run_id = :r ORDER BY key_id, width, bucket"
        with store.engine.connect() as c:
            before = c.execute(sa.text(query), {"r": int(run_id)}).all()
            c.execute(sa.text("DELETE FROM metric_rollups"))
            c.commit()
            found = c.execute(
                sa.text("SELECT key_id, min(step), max(step) FROM metric_points GROUP BY key_id")
            ).all()
        bounds = {(int(run_id), k): (lo, hi) for k, lo, hi in found}
        began = time.monotonic()
        refresh_rollups(store, bounds, chunk_points=10**12)
        rebuild_s = time.monotonic() - began
        with store.engine.connect() as c:
            after = c.execute(sa.text(query), {"r": int(run_id)}).all()
        print(
            f"points={args.points:,} status={status} loop_s={float(loop_s):.1f} "
            f"finish_s={float(finish_s):.1f} other_writes={writes} "
            f"other_worst_wait_s={worst:.2f} rollups_equal_rebuild={before == after} "
            f"one_transaction_rebuild_s={rebuild_s:.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
