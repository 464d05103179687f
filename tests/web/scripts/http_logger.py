"""A training process for the HTTP sink tests: logs over TRACKER_URI=http://... in two halves.

    python http_logger.py GATE_FILE STEPS

Prints ``RUN <id>``, logs steps [0, STEPS/2), flushes and prints ``HALF``; waits (bounded)
until GATE_FILE exists, logs the second half, prints ``LOGGED``, finishes the run (which
waits until every point is stored) and prints ``DONE``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import tracker


def main() -> None:
    gate, steps = Path(sys.argv[1]), int(sys.argv[2])
    run = tracker.init(
        project="http", config={"steps": steps}, system_interval=None, flush_interval=0.05
    )
    print("RUN", run.id, flush=True)
    half = steps // 2
    for step in range(half):
        tracker.log({"a": float(step), "b": -float(step)}, step=step)
    tracker.flush()
    print("HALF", flush=True)
    deadline = time.monotonic() + 120
    while not gate.exists():  # the test creates it once the server is gone
        if time.monotonic() > deadline:
            sys.exit("the gate file never appeared")
        time.sleep(0.02)
    for step in range(half, steps):
        tracker.log({"a": float(step), "b": -float(step)}, step=step)
    print("LOGGED", flush=True)
    tracker.finish(timeout=120)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
