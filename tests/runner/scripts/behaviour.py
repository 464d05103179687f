"""One job per row of the executor behaviour table (tests/runner/test_executor_behaviour.py).

behaviour.py ok | nan | diverge | leak | exception | missing | env
behaviour.py sleep DIR | stubborn DIR   (publish the pid to DIR/pid-<attempt>, sleep;
                                          stubborn ignores SIGTERM)
behaviour.py resume DIR                  (checkpoint, then wait to be stopped; a retry resumes)

``resume``: attempt 1 logs steps 0-2 and records two checkpoints, step 2 and step 3, then
damages the step-3 file, so the last *verified* checkpoint is step 2; it publishes what it saw
(DIR/attempt-<n>.json) and the verified checkpoint's path (DIR/saved-<n>), then sleeps until
the test stops it. A retry reads the checkpoint it was handed, carries on from the step after
it and exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from published import publish  # this script's folder: the tests poll these files

import tracker


def main() -> None:
    mode = sys.argv[1]
    if mode in ("sleep", "stubborn"):
        sleep(Path(sys.argv[2]), ignore_term=mode == "stubborn")
        return
    if mode == "resume":
        resume(Path(sys.argv[2]))
        return
    if mode == "missing":
        import no_such_dep_pkg  # noqa: F401  # the job's environment lacks it
    if mode == "env":  # what of the starter's own environment reached the job
        for name in ("MASTER_PORT", "BEHAVIOUR_MARK"):
            print(f"{name}={os.environ.get(name, '-')}", flush=True)
        return
    tracker.init(project="behaviour")
    for step in range(40 if mode in ("diverge", "leak") else 10):
        loss = float("nan") if mode == "nan" and step >= 5 else 1.0 / (step + 1)
        if mode == "diverge" and step >= 25:  # up to 1.7e25, finite: a divergence, an error
            loss = 1.7 * 10 ** (step - 14)
        tracker.log({"loss": loss}, step=step)
        if mode == "leak":  # +4 MiB a step, 156 MiB in all: memory growth, a warning
            tracker.log({"mem/rss_bytes": float(2**28 + step * 2**22)}, step=step)
    tracker.finish()
    if mode == "exception":
        raise ValueError("bad value 42 in batch 7")
    # exit 0: a NaN loss or a divergence fails by the doctor's final pass and the job's policy
    print(f"done {mode}", flush=True)


def nap(seconds: float) -> None:
    """Sleep in short slices: Python runs a signal handler (the tracker's SIGTERM one) between
    bytecodes, so a signal landing just before one long sleep() would wait for all of it."""
    for _ in range(int(seconds * 10)):
        time.sleep(0.1)


def sleep(out: Path, *, ignore_term: bool) -> None:
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    publish(out / f"pid-{os.environ['TRACKER_ATTEMPT']}", str(os.getpid()))
    print("sleeping", flush=True)
    nap(600)  # the test cancels it, or its timeout stops it


def resume(out: Path) -> None:
    attempt = os.environ["TRACKER_ATTEMPT"]
    run = tracker.init(project="behaviour")
    given = tracker.resume_checkpoint()
    start = json.loads(Path(given).read_text())["step"] + 1 if given else 0
    report = {
        "pid": os.getpid(),
        "resume": given,
        "env": os.environ.get("TRACKER_RESUME_CHECKPOINT"),
        "start": start,
    }
    publish(out / f"attempt-{attempt}.json", json.dumps(report))
    for step in range(start, start + 3):
        tracker.log({"loss": 1.0 / (step + 1)}, step=step)
    good = out / f"step-{start + 2}.json"
    publish(good, json.dumps({"step": start + 2}))
    saved = run.record_checkpoint(good, step=start + 2)
    if given is None:
        damaged = out / f"step-{start + 3}.json"  # the newest checkpoint, then damaged
        publish(damaged, json.dumps({"step": start + 3}))
        run.record_checkpoint(damaged, step=start + 3)
        damaged.write_text("damaged")
    tracker.flush()
    if saved is None:
        sys.exit("the store did not record the checkpoint")
    publish(out / f"saved-{attempt}", saved.path)
    if given is None:
        print("checkpointed; waiting to be stopped", flush=True)
        nap(600)  # the test preempts it, or fails its node, now
    tracker.finish()
    print(f"resumed at step {start}", flush=True)


if __name__ == "__main__":
    main()
