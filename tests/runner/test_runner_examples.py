"""examples/train_leak.py: the leak shows as steady memory growth; the fixed loop does not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracker.rules.health import memory_growth
from tracker.store import Store
from tracker.store.metrics import metric_history
from tracker.store.runs import list_runs

pytestmark = pytest.mark.slow

LEAK = Path(__file__).parents[2] / "examples" / "train_leak.py"


@pytest.mark.parametrize("fixed", [False, True])
def test_leaking_loop_grows_memory_and_the_fixed_one_does_not(tmp_path: Path, fixed: bool) -> None:
    uri = f"sqlite:///{tmp_path / 'tracker.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_URI"] = uri
    args = [sys.executable, str(LEAK), "--steps", "120", *(["--fixed"] if fixed else [])]
    done = subprocess.run(
        args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    store = Store(uri)
    [run] = list_runs(store)
    points = metric_history(store, run.id, "mem/rss_bytes")
    assert [p.step for p in points] == list(range(120))
    found = memory_growth([(p.step, p.value) for p in points], "sys/rss_bytes")
    if fixed:
        assert found is None, found
    else:
        assert found is not None and found.code == "memory_growth", points[-1]
