"""Logs steadily for a while, for the full-disk test (``test_full_disk.py``).

usage: log_through_full_disk.py SPILL_DIR STEPS    (the store: ``TRACKER_URI``; SPILL_DIR
``-``: none given, ``TRACKER_SPILL_DIR`` or the default decides)

Logs ``KEYS`` metrics per step for ``STEPS`` steps, a step every few milliseconds, so the
test can fill the store's filesystem and free it again while it runs. Prints ``RUN <id>``
after init and ``DONE <steps>`` after the last step.
"""

import sys
import time

import tracker

KEYS = 200
spill_dir, steps = sys.argv[1], int(sys.argv[2])
options = {"spill_dir": spill_dir} if spill_dir != "-" else {}
run = tracker.init(project="full-disk", system_interval=None, **options)
print(f"RUN {run.id}", flush=True)
for step in range(steps):
    tracker.log({f"m/{k}": float(step * k) for k in range(KEYS)}, step=step)
    time.sleep(0.01)
tracker.finish()
print(f"DONE {steps}", flush=True)
