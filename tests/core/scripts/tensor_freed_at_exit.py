"""A training process that logs an image tensor and keeps no reference to it, so the last
reference is the logged entry's: ``tensor_freed_at_exit.py URI``.

Torch releases the GIL while it frees a tensor. The tensor here is made by
``torch.from_numpy`` over memory whose Python owner takes ``FREE_S`` seconds to be freed
(its ``__del__`` sleeps, the GIL released), so whichever thread frees the tensor stays
inside torch's free for that long. When that thread is the media encoder (a daemon) and the
interpreter exits meanwhile, the process aborts ("terminate called without an active
exception", exit -6) -- what the encoder did when it let go of an entry the writer had
stored. Prints ``RUN <id>``, ``FREED IN <thread name>`` and ``FINISHED``; the test checks
the exit code."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time

import numpy as np
import torch

import tracker

FREE_S = 1.0  # how long freeing the logged tensor takes
FINALIZING_S = 2.0  # how long the interpreter's exit takes, from its garbage collection on
freeing = threading.Event()


class SlowToFree(bytearray):
    """The image's memory: its ``__del__`` names the thread that freed it, then sleeps."""

    def __del__(self) -> None:
        os.write(1, f"FREED IN {threading.current_thread().name}\n".encode())
        freeing.set()
        time.sleep(FREE_S)


class SlowExit:
    """Left in a reference cycle: the garbage collection of the interpreter's finalization
    calls its ``__del__``, which sleeps, so a thread that frees the tensor meanwhile takes
    the GIL back during the finalization."""

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        time.sleep(FINALIZING_S)


uri = sys.argv[1]
run = tracker.init(project="exit", uri=uri, system_interval=None, capture_console=False)
print(f"RUN {run.id}", flush=True)
run.log_image("warm", torch.zeros(8, 8, dtype=torch.uint8), step=0)  # starts the encoder
run.flush()
uploads = run._writer.uploads
pixels = np.frombuffer(SlowToFree(b"\x80" * 64 * 64), dtype=np.uint8).reshape(64, 64)
image = torch.from_numpy(pixels)
run.log_image("gray", image, step=0)
entry = uploads._queue[-1]
del pixels, image  # the entry holds the only reference now
deadline = time.monotonic() + 60
while not (entry.built and uploads._encoder_waiting) and time.monotonic() < deadline:
    time.sleep(0.001)
assert entry.built, "the encoder thread did not build the image"
assert uploads._encoder_waiting, "the encoder thread does not wait for the next entry"
del entry
run.flush()  # stored by the writer, which lets go of it, as the encoder thread waits
run.log_image("gray", torch.zeros(8, 8, dtype=torch.uint8), step=1)  # the encoder's next one
assert freeing.wait(60), "the logged tensor was not freed"
run.finish()  # the exit follows while the thread that frees it may still be inside torch
print("FINISHED", flush=True)
gc.collect()  # nothing else left for a collection before the exit's
SlowExit()
