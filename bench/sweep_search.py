"""Sweeps that learn (issue 31): TPE against random search, and ASHA's saving, measured
through the product's own controller on a real training whose optimum is known.

The training: a small tanh MLP (8 -> 32 -> 1) fitted by AdamW (betas 0.9/0.999, weight
decay decoupled, batch 128, ``--epochs`` epochs of 2 steps) with the learning rate
cosine-decayed to 0 over the full training, to a fixed synthetic regression (a random
teacher network plus Gaussian noise of std ``--noise``; 256 training and 1,024 validation
points, all from ``--problem-seed``). The objective is the validation MSE after the last
epoch (``val/loss``, minimised). The search space has two dimensions that interact:
``lr=loguniform(1e-4,1)`` and ``wd=loguniform(1e-4,1)`` (AdamW's weight decay). The training
is deterministic for given params (the same initial weights and minibatch order), so its
landscape is a fixed function: the benchmark measures it first on a dense grid (trained
batched, then refined around the best cell) and takes its minimum as the known optimum
``L*``.

Why this training: the first version (SGD with momentum 0.9 at a constant lr up to 1) had
its best losses on needles at the edge of stability, where no grid cell came within 5 % of
the refined optimum, so neither method could reach the target (bench/RESULTS.md). With
AdamW and the lr decayed to 0 nothing diverges in the space, the final loss is a smooth
function of (lr, wd) with one basin inside the space (too small an lr underfits, too large
a one ends noisy; weight decay trades fit against the label noise), and the grid's minimum
and its refinement agree (the landscape reports both).

"Within 5 %": a trial's objective ``L <= 1.05 * L*``. The grid also gives the share of the
space (uniform in log lr x log wd, the sampling measure of random search) that meets it,
so random search's expected number of trials is known too.

The sweeps go through the real product: ``tracker.store.sweeps.create_sweep`` on a fresh
SQLite store, ``control_once`` (the sampler and the pruner), ``queue.claim`` of the queued
trial jobs, the training run in this process with the job's config (its params), the metric
logged per epoch into the job's run (``tracker.store.metrics.log_metrics``), ``control_once``
again after every round of epochs, and a trial whose job got a cancel request
(``queue.poll``) is stopped and finished as ``cancelled`` (the store makes it ``pruned``).
``parallel`` trials are simulated by interleaving their epochs. Only the process spawn of a
worker is skipped.

1. Search: ``tpe`` and ``random``, no pruning, ``--trials`` trials, ``--search-parallel``
   at a time, ``--seeds`` sweeps each, seeded ``k * SEED_STRIDE`` (sampler seeds that no two
   sweeps share): trials until the best objective so far is within 5 %
   (trials counted in the order the controller queued them), median over seeds.
2. Pruning: ``tpe`` with ``asha``, ``hyperband``, ``median`` and ``none``, ``--parallel``
   at a time, same seeds and budget: the training steps actually run and their measured
   seconds (the "GPU-seconds" of the sweep), the saving against ``none``, and each sweep's
   best objective. "Equal best objective": the median over seeds of the pruned sweeps'
   best is at most 2 % above that of ``none``.

    python bench/sweep_search.py [--trials 40] [--seeds 5] [--json out.json]
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import common

LR_RANGE = (1e-4, 1.0)
WD_RANGE = (1e-4, 1.0)
SPACE = [
    f"lr=loguniform({LR_RANGE[0]:g},{LR_RANGE[1]:g})",
    f"wd=loguniform({WD_RANGE[0]:g},{WD_RANGE[1]:g})",
]
METRIC = "val/loss"
WITHIN = 0.05  # "within 5 % of the best objective": L <= (1 + WITHIN) * L*
EQUAL_BEST = 0.02  # pruned sweep's median best at most 2 % above the unpruned one's
SAVING_TARGET = 0.40
# Sweep k is seeded k * SEED_STRIDE. The product once seeded trial n's sampler with
# (sweep seed + n), which made sweeps seeded 0-4 draw 36 of 40 trials alike; it now hashes
# (seed, n), and the spacing keeps this benchmark's numbers comparable with that first run.
SEED_STRIDE = 10_000
BETAS = (0.9, 0.999)  # AdamW's
EPS = 1e-8
BATCH = 128


# ----------------------------------------------------------------------------- training


@dataclass(frozen=True)
class Problem:
    """The data and the initial weights every training starts from (all from one seed)."""

    x_train: Any
    y_train: Any
    x_val: Any
    y_val: Any
    init: tuple[Any, ...]
    order_seed: int


def make_problem(seed: int, noise: float, d: int = 8, hidden: int = 32) -> Problem:
    import torch

    g = torch.Generator().manual_seed(seed)
    t1 = torch.randn(d, 16, generator=g) / math.sqrt(d) * 2
    t2 = torch.randn(16, 1, generator=g) / 4.0

    def teacher(x: Any) -> Any:
        return torch.tanh(x @ t1) @ t2

    x_train = torch.randn(256, d, generator=g)
    x_val = torch.randn(1024, d, generator=g)
    y_train = teacher(x_train) + noise * torch.randn(256, 1, generator=g)
    y_val = teacher(x_val) + noise * torch.randn(1024, 1, generator=g)
    init = (
        torch.randn(d, hidden, generator=g) / math.sqrt(d),
        torch.zeros(1, hidden),
        torch.randn(hidden, 1, generator=g) / math.sqrt(hidden),
        torch.zeros(1, 1),
    )
    return Problem(x_train, y_train, x_val, y_val, init, seed + 1)


class Training:
    """``count`` trainings of the MLP side by side (one per (lr, wd) pair), one epoch per
    :meth:`epoch`. A sweep's trial is ``count == 1``; the grid trains thousands at once
    with the same code."""

    def __init__(self, problem: Problem, lr: Any, wd: Any, epochs: int) -> None:
        import torch

        self.p = problem
        n = lr.shape[0]
        self.params = [t.unsqueeze(0).repeat(n, 1, 1).requires_grad_(True) for t in problem.init]
        self.first = [torch.zeros_like(t) for t in self.params]  # AdamW's moments
        self.second = [torch.zeros_like(t) for t in self.params]
        self.lr = lr.view(n, 1, 1)
        self.wd = wd.view(n, 1, 1)
        self.order = torch.Generator().manual_seed(problem.order_seed)
        self.steps_per_epoch = math.ceil(problem.x_train.shape[0] / BATCH)
        self.total_steps = epochs * self.steps_per_epoch
        self.step = 0

    def _forward(self, x: Any) -> Any:
        import torch

        w1, b1, w2, b2 = self.params
        return torch.tanh(x @ w1 + b1) @ w2 + b2

    def epoch(self) -> Any:
        """One pass over the training data; the validation MSE of each training after it."""
        import torch

        p = self.p
        perm = torch.randperm(p.x_train.shape[0], generator=self.order)
        for i in range(0, perm.shape[0], BATCH):
            idx = perm[i : i + BATCH]
            loss = ((self._forward(p.x_train[idx]) - p.y_train[idx]) ** 2).mean(dim=(1, 2))
            grads = torch.autograd.grad(loss.sum(), self.params)
            self._update(grads)
        with torch.no_grad():
            return ((self._forward(p.x_val) - p.y_val) ** 2).mean(dim=(1, 2))

    def _update(self, grads: Any) -> None:
        """One AdamW step at the cosine-decayed lr (0 at the end of a full training)."""
        import torch

        b1, b2 = BETAS
        lr = self.lr * 0.5 * (1 + math.cos(math.pi * self.step / self.total_steps))
        self.step += 1
        fix1, fix2 = 1 - b1**self.step, 1 - b2**self.step
        with torch.no_grad():
            for w, m, v, g in zip(self.params, self.first, self.second, grads, strict=True):
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                w.mul_(1 - lr * self.wd)
                w.sub_(lr * (m / fix1) / ((v / fix2).sqrt() + EPS))


def train_all(problem: Problem, lr: Any, wd: Any, epochs: int) -> Any:
    """The final validation loss of each (lr, wd); a diverged training counts as +inf."""
    import torch

    training = Training(problem, lr, wd, epochs)
    for _ in range(epochs):
        val = training.epoch()
    return torch.nan_to_num(val, nan=math.inf)


def _log_grid(lo: float, hi: float, n: int) -> Any:
    import torch

    return torch.logspace(math.log10(lo), math.log10(hi), n, dtype=torch.float32)


def landscape(problem: Problem, epochs: int, n: int) -> dict[str, Any]:
    """The known optimum: an ``n`` x ``n`` grid over the space (log-uniform in both), then a
    finer grid spanning one coarse cell either side of the best point; the share of the
    coarse grid within 5 % (and 10 %) of the optimum, and how far the coarse grid's minimum
    is above the refined one (small on a smooth landscape, large on a needle)."""
    import torch

    began = time.perf_counter()
    lrs, wds = _log_grid(*LR_RANGE, n), _log_grid(*WD_RANGE, n)
    lr, wd = (t.flatten() for t in torch.meshgrid(lrs, wds, indexing="ij"))
    coarse = train_all(problem, lr, wd, epochs)
    i = int(coarse.argmin())
    step_lr = (math.log10(LR_RANGE[1]) - math.log10(LR_RANGE[0])) / (n - 1)
    step_wd = (math.log10(WD_RANGE[1]) - math.log10(WD_RANGE[0])) / (n - 1)
    fine_lr = _log_grid(float(lr[i]) / 10**step_lr, float(lr[i]) * 10**step_lr, n // 2 + 1)
    fine_wd = _log_grid(float(wd[i]) / 10**step_wd, float(wd[i]) * 10**step_wd, n // 2 + 1)
    flr, fwd = (t.flatten() for t in torch.meshgrid(fine_lr, fine_wd, indexing="ij"))
    fine = train_all(problem, flr, fwd, epochs)
    j = int(fine.argmin())
    if float(fine[j]) <= float(coarse[i]):
        best, best_lr, best_wd = float(fine[j]), float(flr[j]), float(fwd[j])
    else:
        best, best_lr, best_wd = float(coarse[i]), float(lr[i]), float(wd[i])
    # the same training alone (count 1, as a trial runs it): batching changes rounding only
    alone = float(train_all(problem, torch.tensor([best_lr]), torch.tensor([best_wd]), epochs)[0])
    finite = coarse[torch.isfinite(coarse)]
    return {
        "grid": f"{n}x{n} + {n // 2 + 1}x{n // 2 + 1} refined",
        "trainings": int(coarse.numel() + fine.numel()),
        "seconds": time.perf_counter() - began,
        "optimum": best,
        "optimum_lr": best_lr,
        "optimum_wd": best_wd,
        "optimum_trained_alone": alone,
        "grid_minimum": float(coarse[i]),
        "grid_minimum_over_optimum": float(coarse[i]) / best,
        "threshold": (1 + WITHIN) * best,
        "share_within": float((coarse <= (1 + WITHIN) * best).float().mean()),
        "share_within_10pct": float((coarse <= 1.10 * best).float().mean()),
        "share_diverged": float((~torch.isfinite(coarse)).float().mean()),
        "median_loss": float(finite.median()) if finite.numel() else None,
    }


# ----------------------------------------------------------------------------- a sweep


@dataclass
class Trial:
    claim: Any
    training: Training
    epochs: int = 0
    seconds: float = 0.0


@dataclass
class SweepResult:
    method: str
    prune: str
    seed: int
    values: dict[int, float | None] = field(default_factory=dict)  # trial -> objective
    states: dict[str, int] = field(default_factory=dict)
    steps: int = 0  # training steps (minibatches) actually run, all trials
    seconds: float = 0.0  # their measured time
    controller_s: float = 0.0  # control_once, queue and store calls (not training)
    best: float | None = None

    def trials_to(self, threshold: float) -> int | None:
        """Trials (in queue order) until the best objective so far is <= threshold."""
        for number in sorted(self.values):
            value = self.values[number]
            if value is not None and value <= threshold:
                return number + 1
        return None


def run_sweep(
    store: Any,
    problem: Problem,
    *,
    method: str,
    prune: str,
    seed: int,
    trials: int,
    parallel: int,
    epochs: int,
) -> SweepResult:
    """One sweep through the controller and the queue; returns what it cost and found."""
    import torch

    from tracker.entities import Failure, JobSpec
    from tracker.rules.sweep_search import SweepSettings
    from tracker.store import queue, sweeps
    from tracker.store.metrics import log_metrics

    settings = SweepSettings(
        method=method, metric=METRIC, trials=trials, parallel=parallel, prune=prune, seed=seed
    )
    spec = JobSpec(argv=["python", "train.py"], project="bench-sweeps")
    name = f"{method}-{prune}-seed{seed}"
    sweep = sweeps.create_sweep(store, spec, SPACE, settings, name=name)
    out = SweepResult(method, prune, seed)
    active: dict[int, Trial] = {}
    by_job: dict[int, Trial] = {}
    began = time.perf_counter()
    while True:
        sweeps.control_once(store)
        polled = queue.poll(store, [t.claim for t in active.values()])
        for job_id, state in polled.items():
            if state.cancel_requested:  # pruned: stop it as a worker stops a cancelled job
                trial = active.pop(job_id)
                queue.finish(
                    store, trial.claim, exit_code=None, failure=Failure("cancelled", "pruned")
                )
        while len(active) < parallel:
            got = queue.claim(store, "bench", lease_s=3600)
            if got is None:
                break
            claim = got[0]
            lr = torch.tensor([float(claim.job.config["lr"])])
            wd = torch.tensor([float(claim.job.config["wd"])])
            trial = Trial(claim, Training(problem, lr, wd, epochs))
            active[claim.job.id] = by_job[claim.job.id] = trial
        if not active:
            if sweeps.get_sweep(store, sweep.id).status == "finished":
                break
            raise RuntimeError(f"sweep {name}: nothing to run and not finished")
        for job_id, trial in list(active.items()):
            t0 = time.perf_counter()
            value = float(trial.training.epoch()[0])
            trial.seconds += time.perf_counter() - t0
            trial.epochs += 1
            log_metrics(store, trial.claim.run_id, trial.epochs, {METRIC: value})
            if trial.epochs == epochs or not math.isfinite(value):  # a NaN guard ends it
                queue.finish(store, trial.claim, exit_code=0, failure=None)
                del active[job_id]
    elapsed = time.perf_counter() - began
    for info in sweeps.trials(store, sweep.id):
        out.values[info.number] = info.value if info.state == "complete" else None
        out.states[info.state] = out.states.get(info.state, 0) + 1
    for trial in by_job.values():
        out.steps += trial.epochs * trial.training.steps_per_epoch
        out.seconds += trial.seconds
    out.controller_s = elapsed - out.seconds
    done = [v for v in out.values.values() if v is not None]
    out.best = min(done) if done else None
    if len(out.values) != trials:
        raise RuntimeError(f"sweep {name}: {len(out.values)} trials stored, {trials} asked")
    return out


# ----------------------------------------------------------------------------- report


def _median(values: list[int | None], cap: int) -> float | None:
    """Median where "never" counts as worse than the budget; None when the median is never."""
    ranked = sorted(v if v is not None else cap + 1 for v in values)
    med = statistics.median(ranked)
    return None if med > cap else float(med)


def _shown(value: float | None, cap: int) -> str:
    return f"> {cap}" if value is None else f"{value:g}"


def search_part(
    store: Any, problem: Problem, args: Any, threshold: float, optimum: float
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rows = []
    for method in ("tpe", "random"):
        runs = []
        for seed in range(args.seeds):
            common.progress(f"search: {method} seed {seed}")
            runs.append(
                run_sweep(
                    store,
                    problem,
                    method=method,
                    prune="none",
                    seed=seed * SEED_STRIDE,
                    trials=args.trials,
                    parallel=args.search_parallel,
                    epochs=args.epochs,
                )
            )
        reached = [r.trials_to(threshold) for r in runs]
        bests = [r.best for r in runs]
        med = _median(reached, args.trials)
        out[method] = {
            "trials_to_within": reached,
            "median_trials_to_within": med,
            "reached": sum(v is not None for v in reached),
            "best": bests,
            "best_over_optimum": [None if b is None else b / optimum for b in bests],
        }
        rows.append(
            [
                method,
                ", ".join(_shown(v and float(v), args.trials) for v in reached),
                _shown(med, args.trials),
                f"{out[method]['reached']}/{args.seeds}",
                f"{statistics.median(b for b in bests if b is not None) / optimum:.4f}",
            ]
        )
    common.print_table(
        f"Search: trials until the best so far is within {WITHIN:.0%} of the optimum "
        f"({args.trials} trials, parallel {args.search_parallel}, no pruning)",
        ["method", "per seed", "median", "reached", "median best / L*"],
        rows,
    )
    tpe, rnd = out["tpe"]["median_trials_to_within"], out["random"]["median_trials_to_within"]
    out["tpe_fewer_trials"] = tpe is not None and (rnd is None or tpe < rnd)
    return out


def prune_part(store: Any, problem: Problem, args: Any, optimum: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for prune in args.pruners:
        runs = []
        for seed in range(args.seeds):
            common.progress(f"pruning: tpe {prune} seed {seed}")
            runs.append(
                run_sweep(
                    store,
                    problem,
                    method="tpe",
                    prune=prune,
                    seed=seed * SEED_STRIDE,
                    trials=args.trials,
                    parallel=args.parallel,
                    epochs=args.epochs,
                )
            )
        bests = [r.best for r in runs]
        out[prune] = {
            "steps": sum(r.steps for r in runs),
            "seconds": sum(r.seconds for r in runs),
            "controller_s": sum(r.controller_s for r in runs),
            "steps_per_seed": [r.steps for r in runs],
            "states": [r.states for r in runs],
            "best": bests,
            "median_best": statistics.median(b for b in bests if b is not None),
        }
    base = out["none"]
    rows = []
    for prune, doc in out.items():
        doc["step_saving"] = 1 - doc["steps"] / base["steps"]
        doc["seconds_saving"] = 1 - doc["seconds"] / base["seconds"]
        doc["median_best_over_none"] = doc["median_best"] / base["median_best"]
        doc["equal_best"] = doc["median_best_over_none"] <= 1 + EQUAL_BEST
        pruned = sum(s.get("pruned", 0) for s in doc["states"])
        rows.append(
            [
                prune,
                doc["steps"],
                doc["seconds"],
                f"{doc['step_saving']:.1%}",
                f"{doc['seconds_saving']:.1%}",
                pruned,
                f"{doc['median_best']:.5g}",
                f"{doc['median_best'] / optimum:.4f}",
                f"{doc['median_best_over_none']:.4f}",
                doc["equal_best"],
                doc["controller_s"],
            ]
        )
    common.print_table(
        f"Pruning: tpe, {args.trials} trials x {args.seeds} seeds, parallel {args.parallel}, "
        f"{args.epochs} epochs max",
        [
            "prune",
            "steps",
            "train s",
            "step saving",
            "time saving",
            "pruned",
            "median best",
            "/ L*",
            "/ none",
            f"equal (<= {EQUAL_BEST:.0%})",
            "controller s",
        ],
        rows,
    )
    for prune, doc in out.items():
        shown = ", ".join("-" if b is None else f"{b / optimum:.3f}" for b in doc["best"])
        print(f"  {prune}: best / L* per seed: {shown}")
    return out


def main() -> int:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40, help="budget of every sweep")
    parser.add_argument(
        "--seeds",
        type=int,
        default=5,
        help=f"sweeps per method, seeded 0, {SEED_STRIDE:,}, ... (see SEED_STRIDE)",
    )
    parser.add_argument("--epochs", type=int, default=30, help="epochs of a full trial")
    parser.add_argument("--grid", type=int, default=48, help="landscape grid points per axis")
    parser.add_argument("--search-parallel", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=4, help="for the pruning sweeps")
    parser.add_argument("--problem-seed", type=int, default=0)
    parser.add_argument(
        "--noise", type=float, default=0.2, help="label noise of the data (std); see the doc"
    )
    parser.add_argument(
        "--pruners", default="none,asha,hyperband,median", help="comma list; none is added"
    )
    args = parser.parse_args()
    if args.quick:
        args.trials, args.seeds, args.epochs, args.grid = 8, 2, 4, 8
    if args.trials > SEED_STRIDE:
        parser.error(f"--trials: at most {SEED_STRIDE:,} (sweeps' sampler seeds would overlap)")
    args.pruners = ["none", *[p for p in args.pruners.split(",") if p and p != "none"]]
    common.print_header("sweeps that learn: TPE vs random, ASHA's saving (issue 31)")
    import torch

    torch.set_num_threads(1)  # one core per training, as each trial's job would have
    from tracker.store import Store

    problem = make_problem(args.problem_seed, args.noise)
    known = landscape(problem, args.epochs, args.grid)
    print(
        f"\nKnown optimum ({known['grid']} grid, {known['trainings']:,} trainings in "
        f"{known['seconds']:.1f} s): val/loss L* = {known['optimum']:.5g} at "
        f"lr={known['optimum_lr']:.4g}, wd={known['optimum_wd']:.3g} (trained alone: "
        f"{known['optimum_trained_alone']:.5g}); the coarse grid's minimum "
        f"{known['grid_minimum']:.5g} = {known['grid_minimum_over_optimum']:.4f} L*; within "
        f"{WITHIN:.0%}: L <= {known['threshold']:.5g}, {known['share_within']:.2%} of the space "
        f"(random search expects {1 / max(known['share_within'], 1e-9):.0f} trials; within 10 %: "
        f"{known['share_within_10pct']:.2%}); median config {known['median_loss']:.4g}; "
        f"diverged {known['share_diverged']:.1%}"
    )
    with common.workdir(args.workdir, args.keep) as folder:
        store = Store(f"sqlite:///{folder / 'sweeps.db'}")
        try:
            search = search_part(store, problem, args, known["threshold"], known["optimum"])
            prune = prune_part(store, problem, args, known["optimum"])
        finally:
            store.close()
    asha = prune.get("asha")
    print(
        f"\nTPE reaches {WITHIN:.0%} in fewer trials than random (median): "
        f"{common.fmt(search['tpe_fewer_trials'])}"
    )
    if asha is not None:
        met = asha["seconds_saving"] >= SAVING_TARGET and asha["equal_best"]
        print(
            f"ASHA saves >= {SAVING_TARGET:.0%} of the training seconds at equal best: "
            f"{common.fmt(met)} ({asha['seconds_saving']:.1%} of the seconds, "
            f"{asha['step_saving']:.1%} of the steps; median best "
            f"{asha['median_best_over_none']:.4f} x none's)"
        )
    params = {k: v for k, v in vars(args).items() if k not in ("json",)}
    doc = {
        "benchmark": "sweep_search",
        "params": params,
        "space": SPACE,
        "landscape": known,
        "search": search,
        "pruning": prune,
        "env": common.environment(),
    }
    common.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
