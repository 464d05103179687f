"""What the per-job supervisor costs: CPU time to start and end one no-op job.

    python bench/bench_supervisor.py --runs 50

Each row starts ``--runs`` processes one after another, as a worker starts jobs, and reports
the CPU time (user + system, from ``RUSAGE_CHILDREN``) per start: the job ``true`` alone
(what a worker paid before the supervisor), a bare ``python -I -S`` interpreter, and
``true`` under the supervisor exactly as :class:`tracker.runner.execution.Execution` starts
it (stdin a pipe the parent holds; the job's pid reported on a pipe).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from collections.abc import Sequence

from tracker.runner.execution import spawn_plan


def cpu_ms(argv: Sequence[str], runs: int, *, report: bool = False) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(runs):
        read, write = os.pipe() if report else (-1, -1)
        command = spawn_plan(argv, None, os.environ, write) if report else list(argv)
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if report else subprocess.DEVNULL,
            pass_fds=(write,) if report else (),
        )
        if report:
            os.close(write)
            os.read(read, 32)
            os.close(read)
        if proc.wait() != 0:
            sys.exit(f"{command} exited {proc.returncode}")
        if proc.stdin is not None:
            proc.stdin.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return spent / runs * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="process starts per row")
    args = parser.parse_args()
    rows = [
        ("true (the job alone)", cpu_ms(["true"], args.runs)),
        ("python -I -S -c pass", cpu_ms([sys.executable, "-I", "-S", "-c", "pass"], args.runs)),
        ("true under the supervisor", cpu_ms(["true"], args.runs, report=True)),
    ]
    print(f"{'process':<28} CPU ms per start ({args.runs} runs)")
    for name, ms in rows:
        print(f"{name:<28} {ms:8.1f}")


if __name__ == "__main__":
    main()
