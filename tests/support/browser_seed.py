"""Seed data for the browser tests: a small, deterministic set of runs, jobs and a worker.

Everything goes through the real store and the runner's own queue code, so the pages read
exactly the rows that training scripts and workers write.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from tracker.entities import ClaimedJob, GpuDevice, JobSpec, RunInfo
from tracker.runner.pending import explain_pending
from tracker.store import Store, logs, queue
from tracker.store import workers as store_workers
from tracker.store.checkpoints import add_checkpoint
from tracker.store.events import add_event
from tracker.store.metrics import intern_keys, write_points
from tracker.store.runs import create_run, finish_run, start_run, update_run

PROJECT = "digits"
GIB = 1024**3
TRAIN_STEPS = 600
LONG_STEPS = 3000  # more steps than chart buckets: the best run's charts are bucketed
COMMAND = ["python", "examples/train_digits.py", "--epochs", "10"]
COMMIT = "3f9c2d1e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d"


@dataclass
class Seeded:
    runs: dict[str, int] = field(default_factory=dict)  # run name -> run id
    jobs: dict[str, int] = field(default_factory=dict)  # job name -> job id
    claims: dict[str, ClaimedJob] = field(default_factory=dict)  # job name -> worker's claim


@dataclass
class RunSpec:
    name: str
    config: dict[str, Any]
    status: str
    quality: float  # where accuracy ends up
    steps: int = TRAIN_STEPS
    project: str = PROJECT
    tags: tuple[str, ...] = ()
    gpus: int = 1
    nan_at: int | None = None  # from this step on, train/loss alternates NaN and +Inf
    finish: dict[str, Any] = field(default_factory=dict)
    submitted: bool = False  # ran as a job (clonable), else logged by a script run by hand


def _config(optimizer: str, lr: float, width: int, **extra: Any) -> dict[str, Any]:
    return {
        "optimizer": optimizer,
        "lr": lr,
        "batch_size": 64,
        "epochs": 10,
        "model": {"width": width, "depth": 2, "dropout": 0.1},
        "data": {"name": "digits", "augment": False},
        **extra,
    }


RUNS = [
    RunSpec("adam-lr3e-4", _config("adam", 3e-4, 64), "finished", 0.96, steps=LONG_STEPS,
            tags=("baseline",), gpus=2, finish={"exit_code": 0}, submitted=True),
    RunSpec("adam-lr1e-3", _config("adam", 1e-3, 128), "finished", 0.93, tags=("baseline",),
            finish={"exit_code": 0}),
    RunSpec("sgd-lr1e-2", _config("sgd", 1e-2, 64, momentum=0.9), "finished", 0.88,
            finish={"exit_code": 0}, submitted=True),
    RunSpec("adam-lr1e-1-diverged", _config("adam", 1e-1, 64), "failed", 0.5, nan_at=420,
            finish={"exit_code": 1, "failure_class": "nonfinite_loss",
                    "failure_hint": "the loss became NaN/Inf at step 420: lower the learning "
                    "rate or enable gradient clipping",
                    "error": "FloatingPointError: loss is nan"}),
    RunSpec("sgd-wide-oom", _config("sgd", 1e-2, 1024), "failed", 0.6, steps=120,
            finish={"exit_code": 1, "failure_class": "cuda_oom",
                    "failure_hint": "CUDA out of memory: lower batch_size or model.width",
                    "error": "torch.OutOfMemoryError: CUDA out of memory"}),
    RunSpec("adam-node-lost", _config("adam", 3e-4, 256), "crashed", 0.8, steps=300,
            finish={"failure_class": "killed_by_signal",
                    "failure_hint": "no heartbeat for 60 s: the worker host went away"}),
    RunSpec("adam-stopped", _config("adam", 5e-4, 64), "killed", 0.85, steps=200,
            finish={"exit_code": -15}),
    RunSpec("cifar-resnet18", {"optimizer": "sgd", "lr": 0.1, "arch": "resnet18"}, "finished",
            0.91, project="cifar", finish={"exit_code": 0}),
]  # fmt: skip


def _curves(store: Store, run_id: int, spec: RunSpec, start: float) -> None:
    """Loss falling towards ``1 - quality`` with a one-step spike; accuracy rising; system
    metrics every 10 steps (GPU memory per device)."""
    rng = random.Random(spec.name)
    names = ["train/loss", "train/acc", "val/loss", "val/acc", "sys/cpu_percent", "sys/rss_bytes"]
    kinds = ("allocated_bytes", "reserved_bytes", "peak_allocated_bytes")
    names += [f"sys/gpu{d}/{k}" for d in range(spec.gpus) for k in kinds]
    ids = intern_keys(store, names)
    rows: list[tuple[int, int, int, int, float | None]] = []

    def add(key: str, step: int, value: float | None) -> None:
        rows.append((run_id, ids[key], step, int((start + step * 0.5) * 1000), value))

    peak = [0.0] * spec.gpus
    for step in range(spec.steps):
        progress = 1 - math.exp(-step / (spec.steps / 5))
        loss = 2.3 * (1 - progress) + (1 - spec.quality) + rng.gauss(0, 0.04)
        if step == spec.steps // 3:
            loss += 1.5  # a one-step spike that downsampling must keep
        value: float | None = max(loss, 0.01)
        if spec.nan_at is not None and step >= spec.nan_at:
            value = None if step % 2 == 0 else math.inf
        add("train/loss", step, value)
        acc = 0.1 + (spec.quality - 0.1) * progress + rng.gauss(0, 0.01)
        add("train/acc", step, min(acc, 1.0))
        if step % 50 == 49:
            add("val/loss", step, max(loss * 1.05, 0.01))
            add("val/acc", step, min(0.1 + (spec.quality - 0.12) * progress, 1.0))
        if step % 10 == 0:
            add("sys/cpu_percent", step, 80 + rng.gauss(0, 8))
            add("sys/rss_bytes", step, 1.2 * GIB + step * 256 * 1024)
            for dev in range(spec.gpus):
                allocated = (2.0 + dev * 0.4 + 0.5 * math.sin(step / 20)) * GIB
                peak[dev] = max(peak[dev], allocated)
                add(f"sys/gpu{dev}/allocated_bytes", step, allocated)
                add(f"sys/gpu{dev}/reserved_bytes", step, (3.0 + dev * 0.4) * GIB)
                add(f"sys/gpu{dev}/peak_allocated_bytes", step, peak[dev])
    write_points(store, rows)


def _run(store: Store, spec: RunSpec, start: float) -> int:
    if spec.submitted:
        run = _submitted_run(store, spec, start)
    else:
        run = create_run(
            store,
            spec.project,
            spec.name,
            spec.config,
            list(spec.tags),
            host="gpu-node-01",
            pid=4242,
            git_commit=COMMIT,
            command=COMMAND,
            now=start,
        )
    _curves(store, run.id, spec, start)
    if spec.status != "running":
        finish_run(store, run.id, spec.status, **spec.finish)
        update_run(store, run.id, ended_at=start + spec.steps * 0.5)
    return run.id


def _submitted_run(store: Store, spec: RunSpec, start: float) -> RunInfo:
    """A run as ``tracker submit`` and a worker make it: the job is queued, claimed, its
    process starts the run, and the job ends as its process exits."""
    job_spec = JobSpec(COMMAND, spec.project, config=spec.config, name=spec.name,
                       tags=spec.tags, gpus=spec.gpus)  # fmt: skip
    queue.enqueue(store, job_spec, now=start)
    claimed = queue.claim(store, "gpu-node-01:4242", lease_s=3600, max_gpus=8, now=start)
    assert claimed is not None
    claim = claimed[0]
    run = start_run(store, claim.run_id, host="gpu-node-01", pid=4242, git_commit=COMMIT,
                          now=start)  # fmt: skip
    queue.finish(store, claim, exit_code=0, failure=None, now=start + spec.steps * 0.5)
    return run


def seed(store: Store, *, now: float | None = None) -> Seeded:
    """Runs of every status in two projects; a running, a queued and a waiting job; a worker."""
    now = time.time() if now is None else now
    seeded = Seeded()
    for i, spec in enumerate(RUNS):
        seeded.runs[spec.name] = _run(store, spec, now - 6 * 3600 + i * 600)
    best = seeded.runs["adam-lr3e-4"]
    for step, acc, digest in ((1499, 0.91, "ab"), (2999, 0.95, "cd")):
        path = f"/ckpt/adam-lr3e-4/step{step}.pt"
        add_checkpoint(store, best, step, path, 1_234_567, digest * 32, {"val/acc": acc})
    add_event(store, best, "status", "run finished", {"exit_code": 0})
    diverged = seeded.runs["adam-lr1e-1-diverged"]
    add_event(store, diverged, "diagnosis", "non-finite train/loss from step 420", {"step": 420})
    gpus = [GpuDevice(i, "NVIDIA H100 80GB HBM3", 80 * GIB) for i in range(2)]
    store_workers.register_worker(
        store, "gpu-node-01:4242", host="gpu-node-01", pid=4242, gpus=gpus, max_jobs=2
    )
    _jobs(store, seeded)
    return seeded


def _jobs(store: Store, seeded: Seeded) -> None:
    spec = JobSpec(COMMAND, PROJECT, config={"lr": 2e-4}, name="adam-live", gpus=1, max_retries=2)
    running = queue.enqueue(store, spec)
    claimed = queue.claim(store, "gpu-node-01:4242", lease_s=3600, max_gpus=2)
    assert claimed is not None and claimed[0].job.id == running.id
    claim = claimed[0]
    now = time.time()
    lines = [("stdout", now, "epoch 1/10: loss 2.1\n"), ("stderr", now, "warning: slow loader\n")]
    logs.append(store, claim, lines)
    seeded.jobs["running"] = running.id
    seeded.claims["running"] = claim
    seeded.runs["adam-live"] = claim.run_id
    spec = JobSpec(COMMAND, PROJECT, config={"lr": 1e-4}, name="adam-queued", priority=5, gpus=1)
    queued = queue.enqueue(store, spec)
    seeded.jobs["queued"] = queued.id
    seeded.runs["adam-queued"] = queued.run_id
    waiting = queue.enqueue(store, JobSpec(COMMAND, PROJECT, config={"lr": 5e-5}, gpus=4))
    store_workers.update_pending_reasons(store, explain_pending)
    seeded.jobs["waiting"] = waiting.id
