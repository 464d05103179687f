"""One job per row of the executor behaviour table (tests/runner/test_executor_behaviour.py).

behaviour.py ok | nan | exception | missing | env
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
    for step in range(10):
        loss = float("nan") if mode == "nan" and step >= 5 else 1.0 / (step + 1)
        tracker.log({"loss": loss}, step=step)
    tracker.finish()
    if mode == "exception":
        raise ValueError("bad value 42 in batch 7")
    print(f"done {mode}", flush=True)  # exit 0: a NaN loss fails by the doctor's final pass


if __name__ == "__main__":
    main()
