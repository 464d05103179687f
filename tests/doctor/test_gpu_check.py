"""bench/gpu_check.py runs everywhere: on a machine without CUDA every check is SKIP and
the exit status is 0 (on a GPU host the same command checks the leak, OOM, NVML and a CUDA
profile)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parents[2] / "bench" / "gpu_check.py"


def _cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


@pytest.mark.skipif(_cuda(), reason="a CUDA host runs the real checks (bench/gpu_check.py)")
def test_gpu_check_skips_cleanly_without_cuda(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", str(out)], capture_output=True, text=True,
        timeout=120, check=False, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("SKIP") == 4 and "FAIL" not in done.stdout
    assert {k: v["ok"] for k, v in json.loads(out.read_text()).items()} == {
        "leak": None, "oom": None, "nvml": None, "profile": None,
    }  # fmt: skip
