"""GPU check of the doctor, on a real CUDA device (skips cleanly without one).

    python bench/gpu_check.py [--json out.json]

Three checks, each printed as PASS/FAIL/SKIP with its evidence:

1. leak: a loop that keeps every step's output graph alive (``kept.append(out)``) logs the
   allocator's ``sys/gpu0/allocated_bytes`` per step (``tracker.system.allocator_stats``);
   the stored run is diagnosed ``memory_growth`` on that series, near step 0.
2. oom: a real ``torch.OutOfMemoryError`` from allocating more than the device holds, in a
   child process; its stderr is classified ``cuda_oom`` by ``tracker.rules.failure``.
3. nvml: the system sampler's NVML fields (``sys/gpu0/nvml_used_bytes``,
   ``nvml_total_bytes``, utilisation) are filled (SKIP when nvidia-ml-py is not installed).
4. profile: a run training on the GPU with a hidden ``loss.item()`` per step is asked for a
   profile of 5 steps (``tracker.store.profiles``, what ``tracker profile`` does); the
   client records CUDA activities, and the server's summary has GPU kernels (a kernel
   breakdown, busy/idle shares) and names the host sync (``aten::item``) as the cause.

Exit status: 0 when every check passed or was skipped, 1 when one failed. The store is a
temporary SQLite file. Without torch or CUDA, everything is SKIP and the exit status is 0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

OOM_CHILD = """
import torch
free, total = torch.cuda.mem_get_info()
torch.empty(int(total * 2), dtype=torch.uint8, device="cuda")
"""


def check_leak(uri: str) -> dict[str, Any]:
    import torch

    import tracker
    from tracker.store import Store
    from tracker.store.diagnoses import list_diagnoses
    from tracker.system import allocator_stats

    model = torch.nn.Linear(1024, 1024).cuda()
    x = torch.randn(256, 1024, device="cuda")
    kept = []
    with tracker.init(project="gpu-check", uri=uri, system_interval=None) as run:
        for step in range(60):
            out = model(x).relu().sum()  # the graph holds the activations
            kept.append(out)  # the bug: keeping the graph alive
            stats = allocator_stats()
            tracker.log(
                {"loss": out.item(), "sys/gpu0/allocated_bytes": stats["sys/gpu0/allocated_bytes"]},
                step=step,
            )
    found = [e.data for e in list_diagnoses(Store(uri), run.id) if e.data]
    growth = [
        d
        for d in found
        if d["code"] == "memory_growth" and d["metric"] == "sys/gpu0/allocated_bytes"
    ]
    ok = bool(growth) and growth[0]["step"] <= 6
    return {"ok": ok, "diagnoses": found}


def check_oom() -> dict[str, Any]:
    from tracker.rules.failure import classify

    done = subprocess.run(
        [sys.executable, "-c", OOM_CHILD], capture_output=True, text=True, timeout=300, check=False
    )
    failure = classify(done.returncode, None, done.stderr)
    ok = done.returncode != 0 and failure is not None and failure.cls == "cuda_oom"
    return {"ok": ok, "exit_code": done.returncode, "class": failure and failure.cls,
            "hint": failure and failure.hint, "stderr_tail": done.stderr[-600:]}  # fmt: skip


PROFILE_STEPS = 5


def check_profile(uri: str) -> dict[str, Any]:
    import time

    import torch

    import tracker
    from tracker.rules.profile_summary import cause, summarize
    from tracker.store import Store, profiles

    store = Store(uri)
    model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 1)).cuda()  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(512, 2048, device="cuda"), torch.randn(512, 1, device="cuda")
    running = 0.0
    with tracker.init(project="gpu-check", uri=uri, system_interval=None,
                      heartbeat_interval=0.2) as run:  # fmt: skip
        asked = profiles.request_profile(store, run.id, PROFILE_STEPS)
        deadline = time.monotonic() + 120
        step = 0
        while profiles.get_profile(store, run.id, asked.id).state in profiles.OPEN:
            if time.monotonic() > deadline:
                break
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += loss.item()  # the hidden host sync
            tracker.log({"loss": loss}, step=step)
            step += 1
    found = profiles.get_profile(store, run.id, asked.id)
    if found.state != "stored":
        return {"ok": False, "state": found.state, "message": found.message}
    summary = profiles.summary(store, run.id, asked.id, summarize)
    gpu = summary.get("gpu") or {}
    why = cause(summary)
    ok = bool(gpu.get("kernels")) and why is not None and why[0] == "host_sync"
    return {"ok": ok, "gpu": gpu, "host_syncs": summary.get("host_syncs"), "cause": why,
            "steps": summary.get("steps")}  # fmt: skip


def check_nvml() -> dict[str, Any]:
    from tracker.system import NvmlReader

    values = NvmlReader().read()
    if not values:
        return {"ok": None, "why": "NVML not available (pip install nvidia-ml-py)"}
    wanted = ("sys/gpu0/nvml_used_bytes", "sys/gpu0/nvml_total_bytes")
    ok = all(values.get(k, 0) > 0 for k in wanted)
    return {"ok": ok, "values": values}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    print("command: python bench/gpu_check.py" + (f" --json {args.json}" if args.json else ""))
    results: dict[str, Any] = {}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        results = {
            name: {"ok": None, "why": "no CUDA device"}
            for name in ("leak", "oom", "nvml", "profile")
        }
    else:
        results["device"] = {
            "ok": None,
            "name": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
        }
        with tempfile.TemporaryDirectory() as tmp:
            uri = f"sqlite:///{Path(tmp) / 'tracker.db'}"
            results["leak"] = check_leak(uri)
            results["profile"] = check_profile(uri)
        results["oom"] = check_oom()
        results["nvml"] = check_nvml()
    failed = False
    for name, result in results.items():
        verdict = {True: "PASS", False: "FAIL", None: "SKIP"}[result["ok"]]
        failed = failed or result["ok"] is False
        evidence = json.dumps({k: v for k, v in result.items() if k != "ok"}, default=str)
        print(f"{verdict:4}  {name}: {evidence[:600]}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
