"""A training-like process that forks after tracker.init(), for the fork-safety tests.

usage: forker.py URI SCENARIO [CONTEXT]

SCENARIO:
  loader        DataLoader(num_workers=2) over a Dataset that does not log; the parent logs
                one point per batch while the workers run
  loader-logs   the same, but the Dataset's __getitem__ calls tracker.log()
  plain-fork    os.fork() while the writer is busy; the children exit normally (atexit runs
                in them), log, or start a run of their own
CONTEXT: fork | spawn (the DataLoader's multiprocessing context)

Prints ``RUN <id>``, then lines the test reads, then ``WAITING`` and waits for a line on stdin
before logging its last points and exiting normally.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import tracker

PARENT_RUN: list[Any] = []  # the run, for the children to misuse


class Squares:  # a map-style Dataset (torch only needs __len__ and __getitem__)
    def __init__(self, n: int, log: bool) -> None:
        self.n = n
        self.log = log

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> float:
        if self.log:
            tracker.log({"worker/item": float(i)}, step=i)
        return float(i * i)


def loader(uri: str, context: str, log_in_worker: bool) -> int:
    import torch.utils.data

    data = torch.utils.data.DataLoader(
        Squares(64, log_in_worker), batch_size=4, num_workers=2, multiprocessing_context=context
    )
    step = 0
    try:
        for batch in data:
            tracker.log({"parent/batch_sum": float(batch.sum())}, step=step)
            step += 1
    except Exception as exc:  # DataLoader re-raises a worker's exception in the parent
        print(f"WORKER_ERROR {type(exc).__name__}: {exc}".replace("\n", " | "), flush=True)
    print(f"BATCHES {step}", flush=True)
    del data  # the workers are shut down and joined
    return step


def plain_fork(uri: str) -> int:
    step = 0
    children = {}
    for kind in ("exit", "exit", "exit", "log", "init"):
        for _ in range(2000):  # keep the writer busy: a fork may land inside a write
            tracker.log({"parent/x": float(step)}, step=step)
            step += 1
        pid = os.fork()
        if pid == 0:
            _child(kind, uri)  # never returns
        children[pid] = kind
    deadline = time.monotonic() + 60
    while children and time.monotonic() < deadline:  # bounded poll for every child
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            print(f"CHILD {children.pop(pid)} {os.waitstatus_to_exitcode(status)}", flush=True)
        else:
            time.sleep(0.05)
    for pid, kind in children.items():
        print(f"CHILD {kind} STUCK", flush=True)
        os.kill(pid, 9)
    return step


def _child(kind: str, uri: str) -> None:
    if kind == "exit":
        sys.exit(0)  # atexit runs here: it must not finish the parent's run, nor hang
    if kind == "log":  # every way into the parent's run refuses, naming the rule
        calls = [
            lambda: tracker.log({"child/x": 1.0}), tracker.flush, tracker.finish,
            lambda: PARENT_RUN[0].log({"child/x": 1.0}), lambda: PARENT_RUN[0].finish(),
        ]  # fmt: skip
        refused = []
        for call in calls:
            try:
                call()
            except tracker.InheritedRunError as exc:
                refused.append(f"{type(exc).__name__}: {exc}")
        print(f"CHILD_LOG_ERROR {len(refused)} of {len(calls)} {refused[0]}", flush=True)
        sys.exit(3)
    try:
        own = tracker.init(project="fork-child", uri=uri, system_interval=None)
    except tracker.InheritedRunError as exc:  # a SQLite file the parent has open
        print(f"CHILD_INIT_ERROR {type(exc).__name__}: {exc}", flush=True)
        sys.exit(4)
    for i in range(10):
        tracker.log({"child/own": float(i)}, step=i)
    print(f"CHILD_RUN {own.id}", flush=True)
    sys.exit(0)  # finishes the child's own run


def main() -> None:
    uri, scenario = sys.argv[1], sys.argv[2]
    context = sys.argv[3] if len(sys.argv) > 3 else "fork"
    run = tracker.init(project="fork", uri=uri, system_interval=None)
    PARENT_RUN.append(run)
    print(f"RUN {run.id}", flush=True)
    if scenario == "plain-fork":
        step = plain_fork(uri)
    else:
        step = loader(uri, context, scenario == "loader-logs")
    tracker.flush()
    print(f"LOGGED {step}", flush=True)
    print("WAITING", flush=True)
    sys.stdin.readline()
    tracker.log({"parent/last": 1.0}, step=step)


if __name__ == "__main__":
    main()
