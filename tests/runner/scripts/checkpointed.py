"""A tracked job that checkpoints, then (first attempt) waits to be killed; a retry resumes."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
from published import publish  # this script's folder: the tests poll these files

import tracker


def main() -> None:
    out = Path(sys.argv[1])
    attempt = os.environ["TRACKER_ATTEMPT"]
    tracker.init(project="ckpt", config={"steps": 3})
    resume = tracker.resume_checkpoint()
    start = int(torch.load(resume, weights_only=True)["step"]) + 1 if resume else 0
    report = {
        "pid": os.getpid(),
        "resume": resume,
        "env": os.environ.get("TRACKER_RESUME_CHECKPOINT"),
        "start": start,
    }
    publish(out / f"attempt-{attempt}.json", json.dumps(report))
    for step in range(start, start + 3):
        tracker.log({"loss": 1.0 / (step + 1)}, step=step)
    info = tracker.save_checkpoint({"step": start + 2}, step=start + 2)
    tracker.flush()
    publish(out / f"saved-{attempt}", info.path)
    if resume is None:
        time.sleep(120)  # the test kills the worker now


if __name__ == "__main__":
    main()
