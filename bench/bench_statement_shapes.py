"""SQLite ingest with batches of random sizes (1 to 3,000 rows, 8 keys): rows per second.

Run it on two trees (before and after a change of ``tracker.store.points``) side by side:

    python bench/bench_statement_shapes.py LABEL
"""

import random
import sys
import tempfile
import time

from tracker.store import Store
from tracker.store.metrics import intern_keys, write_points
from tracker.store.runs import create_run

d = tempfile.mkdtemp()
s = Store(f"sqlite:///{d}/a.db")
r = create_run(s, "p")
keys = intern_keys(s, {f"k{i}": 0.0 for i in range(8)})
rng = random.Random(1)
step = 0
total = 0
t = time.perf_counter()
while total < 600_000:
    n = rng.randint(1, 3000)
    rows = []
    for i in range(n):
        rows.append((r.id, keys[f"k{i % 8}"], step + i // 8, 0, 0.5))
    step += n // 8 + 1
    write_points(s, rows, refresh_rollups=False)
    total += n
print(f"{sys.argv[1]}: {total / (time.perf_counter() - t):,.0f} rows/s")
