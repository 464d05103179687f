"""The doctor against a corpus it was not tuned on: false alarms on healthy trainings, recall
on the failing scripts (issue 26, item 2).

    python bench/bench_corpus.py [--quick] [--seed 0] [--configs 120] [--jobs 2] [--json out.json]
    python bench/bench_corpus.py --rejudge DIR   # a kept corpus (--workdir DIR --keep) again

Healthy: ``--configs`` real small PyTorch trainings on the CPU made by ``bench/corpus``
(different data, models, optimizers, schedules, batch sizes, AMP, eval and checkpoint
cadences, resumes, 20 to 50,000 steps), each a process running ``bench/corpus/train.py``
that logs into one SQLite store, ``--jobs`` at a time (a busy CPU is part of the user's
conditions). Each configuration belongs to the tuning or the held-out half by a hash of its
id, a rule fixed before any detector output was seen (``bench/corpus/__init__.py``). After a
run ends, the doctor's final pass (what ``tracker doctor RUN`` does: checkpoints re-hashed)
is run and its diagnoses read back; any diagnosis of a healthy run is a false alarm.

Failing: the scripts of ``tests/doctor/scripts/`` (one problem each, each in its own store),
with the code, metric and onset the script suite expects; recall is whether that code was
found on that metric, and how far its step is from the true onset.

``--quick`` (a smoke test, not a result): the first 10 configurations capped at 200 steps and
3 failing scripts. Exits non-zero only when a process crashed (a healthy run that failed to
train, a failing script that did not run to its end), never for a diagnosis.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import corpus
from common import (
    base_parser,
    environment,
    print_header,
    print_table,
    progress,
    workdir,
    write_json,
)

from tracker.store import Store
from tracker.store.checkpoints import list_checkpoints
from tracker.store.diagnoses import DoctorMemory, diagnose_run, judge_run
from tracker.store.metrics import metric_history, metric_keys
from tracker.store.runs import list_runs

ROOT = Path(__file__).resolve().parents[1]
TRAIN = Path(__file__).resolve().parent / "corpus" / "train.py"
SCRIPTS = ROOT / "tests" / "doctor" / "scripts"
PROJECT = "doctor-corpus"
QUICK_STEPS = 200


def _first_nonfinite(store: Store, run_id: int, key: str) -> int | None:
    points = metric_history(store, run_id, key)
    return next((p.step for p in points if not math.isfinite(p.value or math.nan)), None)


@dataclass(frozen=True)
class Failing:
    """A failing script and what the script suite expects of it (tests/doctor)."""

    script: str
    args: tuple[str, ...]
    code: str
    metric: str
    onset: int | Callable[[Store, int], int | None]
    window: int

    @property
    def name(self) -> str:
        return " ".join((self.script, *self.args))


FAILING = [
    Failing("nan_lr.py", (), "nonfinite", "loss", lambda s, r: _first_nonfinite(s, r, "loss"), 0),
    Failing("divergence.py", (), "divergence", "loss", 150, 5),
    Failing("grad_explosion.py", (), "grad_explosion", "grad/global_norm", 100, 1),
    Failing("leak.py", (), "memory_growth", "sys/rss_bytes", 0, 8),
    Failing("stall.py", (), "throughput_drop", "sys/step_time_s", 100, 3),
    Failing("stall_auto.py", (), "throughput_drop", "sys/step_time_s", 200, 5),
    Failing("recompiles.py", (), "recompiles", "compile/frame_recompiles_max", 70, 0),
    Failing("amp_collapse.py", (), "amp_scale_collapse", "amp/loss_scale", 60, 1),
    Failing("amp_calibration.py", ("collapse",), "amp_scale_collapse", "amp/loss_scale", 60, 0),
    Failing("grad_vanishing.py", (), "grad_vanishing", "grad/global_norm", 100, 1),
    Failing("torn_checkpoint.py", (), "checkpoint_corrupt", "checkpoints", 40, 0),
]
QUICK_FAILING = ("nan_lr.py", "divergence.py", "grad_explosion.py")


def _env(uri: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_URI"] = uri
    env["TRACKER_QUIET"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _run(argv: list[str], uri: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, *argv], env=_env(uri), cwd=cwd, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def _diagnoses(store: Store, run_id: int) -> list[dict[str, Any]]:
    """The final pass as the run's own process makes it at ``finish()`` (it has seen the
    run from its start: every point of a loss is judged for spikes), checkpoints
    re-hashed as ``tracker doctor RUN`` does, as plain dicts."""
    found = diagnose_run(
        store, run_id, final=True, verify_checkpoints=True, memory=DoctorMemory(whole_runs=True)
    )
    return [d.as_dict() for d in found]


def live_diagnoses(store: Store, run_id: int, cuts: int) -> list[dict[str, Any]]:
    """What the live doctor would have shown while the run trained: its passes replayed
    (``judge_run(final=False, until_step=...)``, the live pass's own code and window, with
    the memory of the passes before, as the run's own process keeps it) at ``cuts`` steps
    spread over the run. Each (code, metric) once, at the first pass that showed it, with
    the step that pass was made at (``"live_at"``). A diagnosis a live pass shows and the
    final pass takes back is still a false alarm: the user saw it."""
    seen: dict[tuple[str, str | None], dict[str, Any]] = {}
    memory = DoctorMemory(whole_runs=True)
    for cut in _pass_steps(store, run_id, cuts):
        for d in judge_run(store, run_id, final=False, until_step=cut, memory=memory):
            seen.setdefault((d.code, d.metric), {**d.as_dict(), "live_at": cut})
    return list(seen.values())


def _pass_steps(store: Store, run_id: int, cuts: int) -> list[int]:
    """``cuts`` steps of the run, spread evenly over the steps it logged (0: none)."""
    keys = metric_keys(store, run_id)
    steps = sorted({p.step for key in keys for p in metric_history(store, run_id, key)})
    if cuts <= 0 or not steps:
        return []
    return sorted({steps[min(len(steps) - 1, len(steps) * i // cuts)] for i in range(1, cuts + 1)})


def _first_live_pass(store: Store, run_id: int, case: Failing, cuts: int) -> int | None:
    memory = DoctorMemory(whole_runs=True)
    for cut in _pass_steps(store, run_id, cuts):
        found = judge_run(store, run_id, final=False, until_step=cut, memory=memory)
        if any(d.code == case.code and d.metric == case.metric for d in found):
            return cut
    return None


def _runs_named(store: Store, name: str) -> list[int]:
    runs = list_runs(store, project=PROJECT, limit=1_000_000)
    return sorted(r.id for r in runs if r.name == name)


# ---------------------------------------------------------------- healthy


def train_config(cfg: dict[str, Any], uri: str, root: Path) -> dict[str, Any]:
    """Run one configuration (two processes for a resume); the exit codes and the time."""
    cwd = root / "runs" / cfg["id"]
    cwd.mkdir(parents=True, exist_ok=True)
    path = cwd / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    t0 = time.perf_counter()
    timeout = 120 + cfg["steps"] * 0.05
    out: dict[str, Any] = {"returncodes": [], "stderr": ""}
    if cfg["resume_at"]:
        first = _run([str(TRAIN), str(path), "--stop-at", str(cfg["resume_at"])], uri, cwd,
                     timeout)  # fmt: skip
        out["returncodes"].append(first.returncode)
        out["stderr"] += first.stderr[-2000:]
        if first.returncode == 0:
            store = Store(uri)
            try:
                [run_id] = _runs_named(store, cfg["id"])
                checkpoint = list_checkpoints(store, run_id)[0].path
            finally:
                store.close()
            done = _run([str(TRAIN), str(path), "--resume", checkpoint], uri, cwd, timeout)
            out["returncodes"].append(done.returncode)
            out["stderr"] += done.stderr[-2000:]
    else:
        done = _run([str(TRAIN), str(path)], uri, cwd, timeout)
        out["returncodes"].append(done.returncode)
        out["stderr"] += done.stderr[-2000:]
    out["seconds"] = time.perf_counter() - t0
    return out


def healthy_result(
    store: Store, cfg: dict[str, Any], ran: dict[str, Any], live_cuts: int = 0
) -> dict[str, Any]:
    ok = all(rc == 0 for rc in ran["returncodes"])
    runs = []
    for name in (cfg["id"], cfg["id"] + "-resumed"):
        for run_id in _runs_named(store, name):
            runs.append({"run_id": run_id, "name": name, "diagnoses": _diagnoses(store, run_id),
                         "live": live_diagnoses(store, run_id, live_cuts)})  # fmt: skip
    return {
        "id": cfg["id"],
        "split": corpus.split_of(cfg["id"]),
        "describe": corpus.describe(cfg),
        "config": cfg,
        "ok": ok,
        "returncodes": ran["returncodes"],
        "stderr": "" if ok else ran["stderr"],
        "seconds": round(ran["seconds"], 2),
        "runs": runs,
    }


# ---------------------------------------------------------------- failing


def run_failing(case: Failing, root: Path, live_cuts: int = 0) -> dict[str, Any]:
    cwd = root / "failing" / case.name.replace(" ", "-")
    cwd.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{cwd / 'tracker.db'}"
    t0 = time.perf_counter()
    done = _run([str(SCRIPTS / case.script), *case.args], uri, cwd, 600)
    seconds = time.perf_counter() - t0
    result: dict[str, Any] = {
        "script": case.name, "code": case.code, "metric": case.metric, "window": case.window,
        "ok": done.returncode == 0, "seconds": round(seconds, 2), "detected": False,
        "step": None, "onset": None, "delta": None, "on_time": False, "severity": None,
        "diagnoses": [],
    }  # fmt: skip
    if done.returncode != 0:
        result["stderr"] = done.stderr[-2000:]
        return result
    return judge_failing(case, uri, result, live_cuts)


def judge_failing(
    case: Failing, uri: str, result: dict[str, Any], live_cuts: int = 0
) -> dict[str, Any]:
    """The final pass over a failing script's store; whether its problem was found, and
    at which step the first of ``live_cuts`` replayed live passes showed it."""
    store = Store(uri)
    try:
        [run] = list_runs(store)
        found = _diagnoses(store, run.id)
        onset = case.onset(store, run.id) if callable(case.onset) else case.onset
        live = _first_live_pass(store, run.id, case, live_cuts)
    finally:
        store.close()
    result["live_step"] = live  # the step of the first live pass that showed the problem
    result["live_delay"] = None if live is None or onset is None else live - onset
    result["diagnoses"] = found
    result["onset"] = onset
    hit = [d for d in found if d["code"] == case.code and d["metric"] == case.metric]
    if hit:
        step = hit[0]["step"]
        delta = None if step is None or onset is None else step - onset
        on_time = delta is not None and abs(delta) <= case.window
        result.update(detected=True, step=step, delta=delta, on_time=on_time,
                      severity=hit[0]["severity"])  # fmt: skip
    return result


# ---------------------------------------------------------------- report


def summarize(healthy: list[dict[str, Any]], failing: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind: held-out and tuning runs with a false alarm (error / warning), and recall."""
    kinds: dict[str, dict[str, Any]] = {}

    def kind(code: str) -> dict[str, Any]:
        return kinds.setdefault(code, {
            "heldout": {"error": 0, "warning": 0}, "tuning": {"error": 0, "warning": 0},
            "scripts": 0, "detected": 0, "on_time": 0,
        })  # fmt: skip

    alarms = []
    for result in healthy:
        seen: set[tuple[str, str]] = set()
        for run in result["runs"]:
            final = {(d["code"], d["metric"]) for d in run["diagnoses"]}
            shown = run["diagnoses"] + [
                d for d in run.get("live", []) if (d["code"], d["metric"]) not in final
            ]
            for d in shown:
                seen.add((d["code"], d["severity"]))
                where = {"id": result["id"], "split": result["split"], "run": run["name"]}
                alarms.append({**where, "describe": result["describe"], **d})
        for code, severity in seen:
            kind(code)[result["split"]][severity] += 1
    for f in failing:
        k = kind(f["code"])
        k["scripts"] += 1
        k["detected"] += int(f["detected"])
        k["on_time"] += int(f["on_time"])
    splits = {}
    for split in (corpus.HELDOUT, corpus.TUNING):
        mine = [r for r in healthy if r["split"] == split]
        splits[split] = {
            "configs": len(mine),
            "runs": sum(len(r["runs"]) for r in mine),
            "crashed": sum(not r["ok"] for r in mine),
            "configs_with_alarm": sum(
                any(run["diagnoses"] or run.get("live") for run in r["runs"]) for r in mine
            ),
            "configs_with_final_alarm": sum(
                any(run["diagnoses"] for run in r["runs"]) for r in mine
            ),
            "configs_with_live_alarm": sum(any(run.get("live") for run in r["runs"]) for r in mine),
        }
    return {"kinds": kinds, "splits": splits, "false_alarms": alarms}


def print_report(summary: dict[str, Any], failing: list[dict[str, Any]]) -> None:
    splits = summary["splits"]
    print_table(
        "Healthy configurations (a run with any diagnosis is a false alarm)",
        ["half", "configs", "runs", "crashed", "with a false alarm", "in the final pass",
         "in a live pass"],
        [[s, v["configs"], v["runs"], v["crashed"], v["configs_with_alarm"],
          v["configs_with_final_alarm"], v["configs_with_live_alarm"]]
         for s, v in splits.items()],
    )  # fmt: skip
    rows = []
    for code, k in sorted(summary["kinds"].items()):
        rows.append([
            code, k["heldout"]["error"], k["heldout"]["warning"], k["tuning"]["error"],
            k["tuning"]["warning"], f"{k['detected']}/{k['scripts']}" if k["scripts"] else "-",
            f"{k['on_time']}/{k['scripts']}" if k["scripts"] else "-",
        ])  # fmt: skip
    print_table(
        "Per detector: configs with a false alarm (error / warning), recall on failing scripts",
        ["kind", "held-out err", "held-out warn", "tuning err", "tuning warn", "recall",
         "at onset"],
        rows,
    )  # fmt: skip
    print_table(
        "Failing scripts",
        ["script", "expected", "found", "step", "onset", "delta", "first live pass",
         "also found"],
        [[f["script"], f["code"], f["detected"], f["step"], f["onset"], f["delta"],
          f.get("live_step"),
          ", ".join(sorted({d["code"] for d in f["diagnoses"]} - {f["code"]})) or "-"]
         for f in failing],
    )  # fmt: skip
    if summary["false_alarms"]:
        print("\nFalse alarms on healthy runs:")
        for a in summary["false_alarms"]:
            when = f" (live pass at step {a['live_at']})" if "live_at" in a else " (final pass)"
            print(f"  [{a['split']}] {a['describe']}\n      run {a['run']}: {a['code']} "
                  f"{a['severity']} @{a['step']} on {a['metric']}{when}: "
                  f"{a['message']}")  # fmt: skip
    sys.stdout.flush()


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="the corpus seed (default 0)")
    parser.add_argument("--configs", type=int, default=120, help="healthy configurations")
    parser.add_argument("--jobs", type=int, default=2, help="trainings at a time (default 2)")
    parser.add_argument(
        "--split",
        choices=["all", corpus.HELDOUT, corpus.TUNING],
        default="all",
        help="train only the configurations of one half "
        "(e.g. a fresh held-out half: --seed 1 --split heldout)",
    )
    parser.add_argument(
        "--live-cuts",
        type=int,
        default=40,
        help="live passes replayed per run (0: the final pass only; default 40)",
    )
    parser.add_argument("--rejudge", metavar="DIR", type=Path, help="no training: the "
                        "final pass again over the runs a kept corpus (--workdir DIR --keep) "
                        "stored, e.g. after a detector changed")  # fmt: skip
    args = parser.parse_args()
    print_header("the doctor on a corpus of healthy trainings and failing scripts")
    configs = corpus.configs(args.seed, args.configs)
    if args.split != "all":
        configs = [c for c in configs if corpus.split_of(c["id"]) == args.split]
    failing_cases = FAILING
    if args.quick:
        configs = [_capped(c) for c in configs[:10]]
        failing_cases = [f for f in FAILING if f.script in QUICK_FAILING]
    if args.rejudge:
        return rejudge(args, configs, failing_cases)
    t0 = time.perf_counter()
    with workdir(args.workdir, args.keep) as root:
        uri = f"sqlite:///{root / 'corpus.db'}"
        Store(uri).close()  # create the schema once, before the processes race for it
        healthy, failing = [], []
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(train_config, c, uri, root): c for c in configs}
            store = Store(uri)
            try:
                for n, future in enumerate(as_completed(futures), 1):
                    cfg = futures[future]
                    healthy.append(healthy_result(store, cfg, future.result(), args.live_cuts))
                    r = healthy[-1]
                    codes = [d["code"] for run in r["runs"] for d in run["diagnoses"]]
                    state = "ok" if r["ok"] else "CRASHED"
                    progress(f"{n}/{len(configs)} {r['describe']}: {r['seconds']:.0f} s, "
                             f"{state}, {codes or 'no diagnosis'}")  # fmt: skip
            finally:
                store.close()
            scripts = [pool.submit(run_failing, f, root, args.live_cuts) for f in failing_cases]
            for future in as_completed(scripts):
                failing.append(future.result())
                f = failing[-1]
                progress(f"{f['script']}: {f['code']} found={f['detected']} step={f['step']}")
    seconds = time.perf_counter() - t0
    healthy.sort(key=lambda r: r["id"])
    order = [f.name for f in FAILING]
    failing.sort(key=lambda f: order.index(f["script"]))
    summary = summarize(healthy, failing)
    print_report(summary, failing)
    print(f"\nwall time: {seconds:.0f} s ({args.jobs} at a time)")
    write_json(args.json, {
        "benchmark": "corpus",
        "params": {"quick": args.quick, "seed": args.seed, "configs": len(configs),
                   "jobs": args.jobs, "split_rule": corpus.SPLIT_RULE, "split": args.split,
                   "live_cuts": args.live_cuts},
        "seconds": round(seconds, 1),
        "splits": summary["splits"],
        "kinds": summary["kinds"],
        "false_alarms": summary["false_alarms"],
        "failing": failing,
        "healthy": healthy,
        "environment": environment(),
    })  # fmt: skip
    crashed = [r["id"] for r in healthy if not r["ok"]] + [f["script"] for f in failing
                                                            if not f["ok"]]  # fmt: skip
    if crashed:
        sys.exit(f"processes that did not run to their end: {crashed}")


def rejudge(args: argparse.Namespace, configs: list[dict[str, Any]],
            failing_cases: list[Failing]) -> None:  # fmt: skip
    """``--rejudge DIR``: the report of a kept corpus, judged by the doctor as it is now."""
    root: Path = args.rejudge
    t0 = time.perf_counter()
    store = Store(f"sqlite:///{root / 'corpus.db'}")
    ran = {"returncodes": [0], "stderr": "", "seconds": 0.0}
    try:
        healthy = [
            healthy_result(store, cfg, ran, args.live_cuts)
            for cfg in configs
            if _runs_named(store, cfg["id"])
        ]
    finally:
        store.close()
    failing = []
    for case in failing_cases:
        db = root / "failing" / case.name.replace(" ", "-") / "tracker.db"
        result: dict[str, Any] = {
            "script": case.name, "code": case.code, "metric": case.metric,
            "window": case.window, "ok": db.exists(), "seconds": 0.0, "detected": False,
            "step": None, "onset": None, "delta": None, "on_time": False, "severity": None,
            "diagnoses": [],
        }  # fmt: skip
        if db.exists():
            result = judge_failing(case, f"sqlite:///{db}", result, args.live_cuts)
        failing.append(result)
    summary = summarize(healthy, failing)
    print_report(summary, failing)
    print(f"\nre-judged in {time.perf_counter() - t0:.0f} s")
    write_json(args.json, {
        "benchmark": "corpus", "rejudged": str(root),
        "params": {"quick": args.quick, "seed": args.seed, "configs": len(configs),
                   "split_rule": corpus.SPLIT_RULE, "live_cuts": args.live_cuts},
        "splits": summary["splits"], "kinds": summary["kinds"],
        "false_alarms": summary["false_alarms"], "failing": failing,
    })  # fmt: skip


def _capped(cfg: dict[str, Any]) -> dict[str, Any]:
    steps = min(cfg["steps"], QUICK_STEPS)
    resume = min(cfg["resume_at"], steps // 2) if cfg["resume_at"] else 0
    return {**cfg, "steps": steps, "resume_at": resume}


if __name__ == "__main__":
    main()
