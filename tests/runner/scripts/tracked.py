"""A tracked job: reports what it received (env, merged config) and logs a few metrics."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import tracker


def main() -> None:
    out = Path(sys.argv[1])
    run = tracker.init(project="ignored", config={"lr": 0.1, "model": {"width": 8, "depth": 2}})
    report = {
        "run_id": run.id,
        "config": tracker.config,
        "env": {k: v for k, v in os.environ.items() if k.startswith(("TRACKER_", "CUDA_"))},
        "cwd": os.getcwd(),
    }
    (out / "tracked.json").write_text(json.dumps(report))
    for step in range(3):
        tracker.log({"loss": 1.0 / (step + 1)}, step=step)


if __name__ == "__main__":
    main()
