"""A training job for the attempt-fence test: logs ``a<attempt>/x`` every 20 ms.

Writes ``OUT/started-<attempt>.json`` once its run is started. Attempt 1 logs until the
store refuses its writes (then writes ``OUT/refused-1.txt`` with the error and exits 3);
a later attempt logs until ``OUT/release`` exists, then finishes its run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from published import publish  # this script's folder: the tests poll these files

import tracker

out = Path(sys.argv[1])
attempt = int(os.environ["TRACKER_ATTEMPT"])
run = tracker.init(flush_interval=0.05, heartbeat_interval=0.2, system_interval=None)
publish(out / f"started-{attempt}.json", json.dumps({"pid": os.getpid(), "run": run.id}))
deadline = time.monotonic() + 120
step = 0
try:
    while time.monotonic() < deadline and not (attempt > 1 and (out / "release").exists()):
        run.log({f"a{attempt}/x": float(step)}, step=step)
        step += 1
        time.sleep(0.02)
    run.finish()
except tracker.WriterError as exc:  # the store refused this attempt's writes
    publish(out / f"refused-{attempt}.txt", str(exc))
    sys.exit(3)
