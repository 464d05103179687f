"""One job per row of the executor behaviour table (tests/runner/test_executor_behaviour.py).

behaviour.py ok | nan | diverge | leak | exception | missing | env
"""

from __future__ import annotations

import os
import sys

import tracker


def main() -> None:
    mode = sys.argv[1]
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


if __name__ == "__main__":
    main()
