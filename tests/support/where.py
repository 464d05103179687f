"""Helpers of the "where is my run?" tests (tests/core/test_store_discovery.py,
tests/web/test_where_is_my_run.py): a real training script run in a folder, its line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tracker.store import Store
from tracker.store.runs import list_runs

SCRIPT = """
import sys, tracker
quiet = {"quiet": True} if "--quiet" in sys.argv else {}
tracker.init(project="p", name=sys.argv[1], system_interval=None, **quiet)
tracker.log({"x": 1.0})
tracker.finish()
"""


def env_for(registry: Path, **extra: str) -> dict[str, str]:
    """This process's environment without TRACKER_* settings (strict mode kept), with a
    server registry of the test's own (a live dashboard elsewhere on the machine must not
    be adopted)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    if "TRACKER_STRICT" in os.environ:
        env["TRACKER_STRICT"] = os.environ["TRACKER_STRICT"]
    env["TRACKER_SERVER_REGISTRY"] = str(registry)
    env.update(extra)
    return env


def train(cwd: Path, name: str, env: dict[str, str], *args: str) -> str:
    """Run the training script in ``cwd``; its stderr (the run's line is on it)."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, name, *args], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stderr


def line_of(stderr: str) -> str:
    """The one line ``tracker.init`` printed (not the tracker's warnings, which start alike)."""
    lines = [
        s for s in stderr.splitlines() if s.startswith("tracker: run ") and " logging to " in s
    ]
    assert len(lines) == 1, stderr
    return lines[0]


def run_names(db: Path) -> list[str]:
    store = Store(f"sqlite:///{db}", create=False)
    try:
        return sorted(r.name for r in list_runs(store))
    finally:
        store.close()
