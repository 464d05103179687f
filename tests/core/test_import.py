"""``import tracker`` stays cheap and works without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = (
    "flask",
    "plotly",
    "apscheduler",
    "torch",
    "lightning",
    "transformers",
    "tracker.integrations",
    "tracker.web",
    "tracker.runner",
    "web",
    "runner",
)


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_tracker_loads_no_heavy_module() -> None:
    out = _python(
        f"import sys, json, tracker\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    assert json.loads(out) == []


def test_a_whole_run_without_torch_loads_no_heavy_module(tmp_path: Path) -> None:
    code = f"""
import sys, json
sys.modules["torch"] = None  # as if torch were not installed: `import torch` fails
import tracker
run = tracker.init(project="nt", uri="sqlite:///{tmp_path / "nt.db"}", system_interval=0.05)
tracker.log({{"a": 1.0}})
try:
    tracker.save_checkpoint({{"w": 1}}, step=0)
except tracker.CheckpointError as exc:
    print("ckpt:", exc)
tracker.finish()
print(json.dumps([m for m in {HEAVY!r}[:3] if m in sys.modules]))
"""
    out = _python(code).splitlines()
    assert out[0] == "ckpt: save_checkpoint needs torch: pip install torch"
    assert json.loads(out[1]) == []
