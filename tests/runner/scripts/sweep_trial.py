"""A sweep's trial as a researcher writes it: no sweep or Optuna code, only ``tracker.init``
(its config carries the trial's params) and ``tracker.log`` of ``val/loss`` once a step.

``bad=1`` keeps the loss ten times higher and each step slow (2 s against 0.1 s), so a
median pruner that has seen good trials finished stops it while it still runs. The process
writes its pid to ``<out>/<job id>.pid`` first, so a test can tell that a pruned trial's
process is gone.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import tracker


def main() -> None:
    out = Path(sys.argv[1])
    run = tracker.init(project="sweeps", config={"lr": 0.01, "bad": 0, "steps": 10})
    job = os.environ.get("TRACKER_JOB_ID", "by-hand")
    part = out / f"{job}.pid.part"
    part.write_text(str(os.getpid()))
    part.replace(out / f"{job}.pid")
    lr, bad, steps = float(run.config["lr"]), int(run.config["bad"]), int(run.config["steps"])
    floor = 1.0 + (math.log10(lr) + 2.5) ** 2 / 10  # best near lr = 3e-3
    for step in range(steps):
        loss = (10.0 if bad else 1.0) * (floor + 1.0 / (step + 1))
        tracker.log({"val/loss": loss}, step=step)
        time.sleep(2.0 if bad else 0.1)
    tracker.finish()


if __name__ == "__main__":
    main()
