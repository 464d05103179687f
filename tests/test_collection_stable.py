"""Every pytest-xdist worker must collect the same tests in the same order, or the parallel
run (scripts/test.sh) stops before running any: a test id built from the clock (a gzip
header's mtime), from a set's order (hash randomization) or from anything random breaks it.
Two collections in two processes, different hash seeds and different seconds, must agree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _collect(seed: str) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "tests"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_every_worker_collects_the_same_tests() -> None:
    first = _collect("1")
    second = _collect("2")  # seconds later: a clock in an id shows
    assert len(first) > 1000
    differ = [(a, b) for a, b in zip(first, second, strict=False) if a != b]
    assert len(first) == len(second) and not differ, differ[:5]
