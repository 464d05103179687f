"""A small training loop that breaks the tracker under itself, for the never-stops-training tests.

usage: train_through_failures.py FAILURE WORKDIR    (the store: ``TRACKER_URI``)

Trains a tiny torch model for ``STEPS`` steps: logs metrics every step, an image and a
histogram every ``MEDIA_EVERY`` steps, a checkpoint at ``CHECKPOINT_AT`` and at the end. At
step ``FAIL_AT`` it breaks one part of the tracker for real (no mocks), then goes on:

* ``artifact_root``: the artifact root (``TRACKER_ARTIFACT_ROOT``) is replaced by a file;
* ``store_locked``: another connection takes the SQLite store's write lock and keeps it
  (every write waits past the store's busy timeout: the store is unavailable for good);
* ``disk_full``: ``RLIMIT_FSIZE`` of this process drops to the size of the store's largest
  file (SIGXFSZ ignored: a write past it fails with EFBIG, as on a full disk); the
  checkpoint at ``CHECKPOINT_AT`` is bigger than that;
* ``encoder``: an image file that the media encoder cannot decode is logged;
* ``http``: nothing here: ``TRACKER_URI`` is a server that answers garbage after the run is
  created (``garbage_server.py``);
* ``doctor``: the store's unique index that the doctor's upserts rely on is dropped, and the
  loss goes NaN, so the doctor's final pass fails.

Prints ``RUN <id>`` after init and ``DONE <steps>`` after the last step; its exit status is
the script's own (0 unless something raised).
"""

import os
import resource
import signal
import sqlite3
import sys
from pathlib import Path

import numpy as np
import torch

import tracker

STEPS = 30
FAIL_AT = 10
MEDIA_EVERY = 5
CHECKPOINT_AT = 20

failure, workdir = sys.argv[1], Path(sys.argv[2])
if failure == "store_locked":
    # What is tested is the tracker once a write waited past the store's busy timeout, not the
    # length of that timeout: 5 s instead of 30 s (read when each connection opens).
    import tracker.store.engine

    tracker.store.engine.SQLITE_BUSY_TIMEOUT_MS = 5_000
run = tracker.init(
    project="never-stops", config={"lr": 0.1}, system_interval=None, exit_timeout=2.0,
    spill_dir=str(workdir / "spill"), checkpoint_dir=str(workdir / "checkpoints"),
)  # fmt: skip
print(f"RUN {run.id}", flush=True)
uri = os.environ.get("TRACKER_URI", "")
database = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else None
held = []  # keeps the lock's connection open


def break_the_tracker() -> None:
    if failure == "artifact_root":
        tracker.flush()  # the writer idle: it creates nothing in the root while it goes
        root = Path(os.environ["TRACKER_ARTIFACT_ROOT"])
        for path in sorted(root.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        root.rmdir()
        root.write_text("not a directory any more\n")
    elif failure == "store_locked":
        assert database is not None
        conn = sqlite3.connect(database, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")  # the write lock, until this process ends
        held.append(conn)
    elif failure == "disk_full":
        assert database is not None
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        # No file may grow past the store's largest file (its WAL, most of the time): the
        # store cannot grow, the spill file (smaller) still can; the checkpoint is bigger.
        limit = max(os.path.getsize(p) for p in (database, database + "-wal") if os.path.exists(p))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    elif failure == "encoder":
        broken = workdir / "broken.bmp"
        broken.write_bytes(b"BM but not an image")
        tracker.log_image("samples/broken", str(broken), step=FAIL_AT)
    elif failure == "doctor":
        assert database is not None
        with sqlite3.connect(database) as conn:
            conn.execute("DROP INDEX uq_run_events_run_dedupe_key")


torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(STEPS):
    if step == FAIL_AT:
        break_the_tracker()
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    value = float("nan") if failure == "doctor" and step >= FAIL_AT else loss.item()
    # many keys after the failure: a store that can still write a little must still fail
    extra = {f"probe/{i}": float(i * step) for i in range(200)} if step > FAIL_AT else {}
    tracker.log({"loss": value, "step_sq": float(step * step), **extra}, step=step)
    if step % MEDIA_EVERY == 0:
        tracker.log_image("samples/noise", np.random.rand(16, 16, 3), step=step)
        tracker.log_histogram("weights", model.weight.detach(), step=step)
    if step == CHECKPOINT_AT:
        state = {"model": model.state_dict()}
        if failure == "disk_full":  # larger than the disk has room for
            state["padding"] = torch.zeros(1 << 20)  # 4 MiB
        tracker.save_checkpoint(state, step=step, metrics={"loss": loss.item()})
tracker.save_checkpoint({"model": model.state_dict()}, step=STEPS - 1)
tracker.flush()
print(f"DONE {STEPS}", flush=True)
