"""A controllable job for the runner's tests (no tracker import: starts fast).

Writes ``OUT/<job>-<attempt>.json`` (pid, process group, children, environment, argv) once
its children run and its signal handlers are in place, then waits as told and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from published import publish  # this script's folder: the tests poll these files

CHILD = """
import signal, sys, time
if sys.argv[1] == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("child ready", flush=True)
time.sleep(120)
"""
ENV_KEYS = (
    "TRACKER_RUN_ID", "TRACKER_JOB_ID", "TRACKER_ATTEMPT", "TRACKER_CONFIG", "TRACKER_PROJECT",
    "TRACKER_URI", "TRACKER_RESUME_CHECKPOINT", "CUDA_VISIBLE_DEVICES", "EXTRA_VAR",
)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--children", type=int, default=0)
    p.add_argument("--ignore-term", action="store_true", help="the leader ignores SIGTERM")
    p.add_argument("--children-ignore-term", action="store_true")
    p.add_argument("--graceful-term", action="store_true", help="exit 0 on SIGTERM")
    p.add_argument("--wait-for", help="wait until this file exists")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--lines", type=int, default=0)
    p.add_argument("--stdout-only", action="store_true", help="--lines go to stdout only")
    p.add_argument("--exit", type=int, default=0)
    a = p.parse_args()
    out = Path(a.out)
    job = os.environ.get("TRACKER_JOB_ID", "x")
    attempt = os.environ.get("TRACKER_ATTEMPT", "1")
    if a.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if a.graceful_term:

        def graceful(signum: int, frame: object) -> None:
            (out / f"{job}-{attempt}.term").write_text("got SIGTERM")
            sys.exit(0)

        signal.signal(signal.SIGTERM, graceful)
    flag = "1" if a.children_ignore_term else "0"
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, flag], stdout=subprocess.PIPE)
        for _ in range(a.children)
    ]
    for child in children:
        assert child.stdout is not None
        child.stdout.readline()  # the child's handler is set
    report = {
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "children": [c.pid for c in children],
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
    }
    publish(out / f"{job}-{attempt}.json", json.dumps(report))
    for i in range(a.lines):
        print(f"out {i}", flush=True)
        if not a.stdout_only:
            print(f"err {i}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 120
    end = time.monotonic() + a.sleep
    while time.monotonic() < deadline:
        waiting = a.wait_for is not None and not os.path.exists(a.wait_for)
        if not waiting and time.monotonic() >= end:
            break
        time.sleep(0.02)
    print("done", flush=True)
    sys.exit(a.exit)


if __name__ == "__main__":
    main()
