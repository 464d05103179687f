"""A training process that ends while its media encoder thread is still building a
histogram: ``encoder_at_exit.py URI DTYPE N``. The encoder (idle scheduling class) is
pinned to one CPU beside a spinning process, so it makes almost no progress; it has taken
the histogram of ``N`` values of ``DTYPE`` when ``finish()`` is called, the writer builds
the histogram too, and the interpreter exits with the encoder still inside the build.
Prints ``RUN <id>`` and ``FINISHED``; the test checks the exit code."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import torch

import tracker

uri, dtype_name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
run = tracker.init(project="exit", uri=uri, system_interval=None, capture_console=False)
print(f"RUN {run.id}", flush=True)
values = torch.randn(count, dtype=getattr(torch, dtype_name))
run.log_histogram("warm", torch.zeros(4), step=0)  # starts the encoder thread
run.flush()
uploads = run._writer.uploads
encoder = uploads._encoder
assert encoder is not None and encoder.thread.native_id is not None
busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
try:
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(busy.pid, {cpu})
    os.sched_setaffinity(encoder.thread.native_id, {cpu})
    run.log_histogram("weights", values, step=0)
    entry = uploads._queue[-1]
    deadline = time.monotonic() + 60
    while not entry.claimed and time.monotonic() < deadline:
        time.sleep(0.001)
    assert entry.claimed, "the encoder did not take the entry"
    time.sleep(0.2)  # inside the build by now, at ~0.3% of a CPU
    run.finish()
    assert encoder.thread.is_alive(), "the encoder finished the build: nothing was tested"
finally:
    busy.kill()
    busy.wait()
print("FINISHED", flush=True)
