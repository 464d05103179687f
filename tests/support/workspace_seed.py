"""A demo-like sweep for the workspace's tests and benchmark: a few learning rates x a few
seeds, each run a falling loss and a rising accuracy (plus ``extra_keys`` more series),
written through the real store as a training script's points are."""

from __future__ import annotations

import math
import random
import time

from tracker.store import Store
from tracker.store.metrics import intern_keys, write_points
from tracker.store.runs import create_run, finish_run

PROJECT = "sweep"
LRS = (0.3, 0.1, 0.03, 0.01, 0.003, 0.001, 0.0003, 0.0001, 0.00003, 0.00001)


def seed_sweep(
    store: Store,
    *,
    lrs: tuple[float, ...] = LRS[:10],
    seeds: int = 5,
    steps: int = 300,
    extra_keys: int = 0,
    project: str = PROJECT,
    running: int = 0,
) -> dict[str, int]:
    """``len(lrs) x seeds`` runs named ``lr<lr>-s<seed>``, config ``{lr, seed, model}``, metrics
    ``train/loss`` (every step), ``val/acc`` and ``val/loss`` (every 10th step), tag
    ``opt=adam`` or ``opt=sgd`` by seed parity; ``running`` of them (the last) still running.
    Returns run name -> id."""
    names = ["train/loss", "val/acc", "val/loss"] + [f"extra/m{i}" for i in range(extra_keys)]
    ids = intern_keys(store, names)
    start = time.time() - 3600
    out: dict[str, int] = {}
    total = len(lrs) * seeds
    for lr in lrs:
        for s in range(seeds):
            name = f"lr{lr:g}-s{s}"
            run = create_run(
                store,
                project,
                name,
                {"lr": lr, "seed": s, "model": {"width": 64}},
                ["opt=adam" if s % 2 == 0 else "opt=sgd"],
                now=start,
            )
            rng = random.Random(name)
            speed = 1.0 / (1 + abs(math.log10(lr) + 2.5))
            rows: list[tuple[int, int, int, int, float | None]] = []
            for step in range(steps):
                t = int((start + step) * 1000)
                loss = 2.3 * math.exp(-speed * step / 60) + 0.1 + rng.gauss(0, 0.02)
                rows.append((run.id, ids["train/loss"], step, t, loss))
                if step % 10 == 9:
                    acc = 0.1 + 0.85 * (1 - math.exp(-speed * step / 60)) + rng.gauss(0, 0.01)
                    rows.append((run.id, ids["val/acc"], step, t, acc))
                    rows.append((run.id, ids["val/loss"], step, t, loss * 1.1))
                for k in range(extra_keys):
                    rows.append(
                        (run.id, ids[f"extra/m{k}"], step, t, math.sin(step / 20 + k) + s * 0.1)
                    )
            write_points(store, rows)
            if len(out) < total - running:
                finish_run(store, run.id, "finished", exit_code=0)
            out[name] = run.id
    return out
