"""A profile makes the doctor's throughput drop precise (issue 32): a real training script
whose DataLoader falls behind at step 100 is profiled while it runs (the request a person
makes with ``tracker profile``), and the doctor's final pass says the drop began at step 100
and that the DataLoader is what the steps wait for, with what to try."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.runner import TRACKER
from tracker.store import Store, profiles
from tracker.store.diagnoses import list_diagnoses
from tracker.store.runs import list_runs

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "stall_loader_profiled.py"


def check_profiled_stall(store: Store, run_id: int) -> dict[str, Any]:
    """The run's one profile is stored, taken after the stall began, and the throughput
    drop's hint names the DataLoader from it. Returns the diagnosis."""
    [taken] = profiles.list_profiles(store, run_id)
    assert taken.state == "stored", taken.message
    assert taken.first_step is not None and 130 <= taken.first_step <= taken.last_step  # type: ignore[operator]
    found = [e.data for e in list_diagnoses(store, run_id) if e.data]
    [drop] = [d for d in found if d["code"] == "throughput_drop"]
    assert abs(drop["step"] - 100) <= 3, drop
    assert "waiting for the DataLoader" in drop["hint"] and "num_workers" in drop["hint"], drop
    assert f"A profile of steps {taken.first_step}-{taken.last_step}" in drop["message"], drop
    return drop


def test_a_profiled_loader_stall_is_named_by_the_doctor(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'tracker.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_URI"] = uri
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    store = Store(uri)
    try:
        [run] = list_runs(store)
        drop = check_profiled_stall(store, run.id)
        # the CLI's doctor says the same (and the profile's summary is kept, not recomputed)
        doctor = subprocess.run(
            [*TRACKER, "doctor", str(run.id)], env=env, cwd=tmp_path, capture_output=True,
            text=True, timeout=120, check=False,
        )  # fmt: skip
        assert "waiting for the DataLoader" in doctor.stdout, doctor.stdout + doctor.stderr
        assert drop == check_profiled_stall(store, run.id)
    finally:
        store.close()
