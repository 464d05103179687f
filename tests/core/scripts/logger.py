"""A training-like process for fault tests: logs, flushes, then waits to be killed.

usage: logger.py URI MODE N    (MODE: flush-then-wait | log-then-wait | raise | exit)
"""

import sys
import time

import tracker

uri, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
run = tracker.init(project="faults", config={"mode": mode}, uri=uri, system_interval=None,
                   heartbeat_interval=0.2)  # fmt: skip
print(f"RUN {run.id}", flush=True)
for step in range(n):
    tracker.log({"a": float(step), "b": step * 0.5}, step=step)
if mode == "flush-then-wait":
    tracker.flush()
    for step in range(n, n + 1000):  # logged after the flush: may be lost on SIGKILL
        tracker.log({"a": float(step), "b": step * 0.5}, step=step)
if mode == "raise":
    raise ValueError("bad batch shape (3, 4)")
if mode == "exit":
    sys.exit(0)
print("READY", flush=True)
# Short sleeps, not one long one: Python runs a signal handler between bytecodes, so a SIGTERM
# that lands between the READY line and the start of one long sleep() would wait for the whole
# sleep (the test sends it the moment it reads READY; ~1 run in 300 hung so).
for _ in range(6000):
    time.sleep(0.1)
