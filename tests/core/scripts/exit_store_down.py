"""A training process that ends while its store is down, for the exit-while-down tests.

usage: exit_store_down.py URI MODE N SPILL_DIR    (MODE: exit | raise)

Logs N steps of two metrics, flushes, prints ``RUN <id>`` and ``READY``, waits for a line on
stdin (the test stops the store meanwhile), logs N more steps, then exits normally (MODE
exit) or with an uncaught exception (MODE raise). Its exit may wait 2 s (exit_timeout) while
nothing can be stored.
"""

import sys

import tracker

uri, mode, n, spill_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
run = tracker.init(project="down-at-exit", uri=uri, system_interval=None, spill_dir=spill_dir,
                   exit_timeout=2.0)  # fmt: skip
print(f"RUN {run.id}", flush=True)
for step in range(n):
    tracker.log({"a": float(step), "b": -float(step)}, step=step)
tracker.flush()
print("READY", flush=True)
sys.stdin.readline()
for step in range(n, 2 * n):  # the store is down now
    tracker.log({"a": float(step), "b": -float(step)}, step=step)
if mode == "raise":
    raise ValueError("loss is NaN at the end")
