"""The doctor's corpus: healthy training configurations, made from a seed, and their split.

``configs(seed, n)`` returns ``n`` small, real PyTorch trainings (CPU, one thread) that should
draw no diagnosis at all: tabular, image, sequence and text tasks on data made here or shipped
by a package (scikit-learn's bundled digits/iris/wine/breast_cancer when it is installed, a
char-level text from the standard library's own sources); linear, MLP, small CNN, GRU, LSTM
and tiny transformer models; SGD (with and without momentum), Adam, AdamW, RMSprop; no
schedule, warmup + cosine, step decay, cosine with warm restarts, OneCycle,
ReduceLROnPlateau, linear warmup; batch sizes 8 to 128; bf16 autocast or fp16 with a
GradScaler; eval and checkpoint cadences, gradient clipping, ``tracker.watch``, resumes from a
checkpoint; 20 to 50,000 steps (most short; the long ones train a tiny model).
``bench/corpus/train.py`` runs one configuration.

The split, fixed before any detector output was looked at (never change it, or the held-out
half stops being held out): a configuration whose id is ``id`` is **held out** when the
SHA-256 of the UTF-8 string ``"doctor-corpus-split:" + id`` has an odd last hex digit, and
belongs to the **tuning** half otherwise (``split_of``). Ids are ``s<seed>-<index:03d>``, so
the split of a configuration depends on its seed and position only, not on what it trains.

Pure: no torch import, no I/O; a configuration is a JSON-able dict.
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
from typing import Any

SPLIT_SALT = "doctor-corpus-split:"
SPLIT_RULE = "held out when sha256('doctor-corpus-split:' + id) has an odd last hex digit"
HELDOUT = "heldout"
TUNING = "tuning"

TABULAR = ("synth_regression", "synth_classification")
SKLEARN_TABULAR = ("iris", "wine", "breast_cancer", "digits")
IMAGE = ("digits_image", "synth_image")
SEQUENCE = ("synth_sequence", "char_text")
OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw", "rmsprop")
SCHEDULERS = ("none", "warmup_cosine", "step", "cosine_restarts", "onecycle", "plateau",
              "linear_warmup")  # fmt: skip
# a stable learning rate for each optimizer (per model family: recurrent/attention models
# are trained gentler), the kind of value a person would pick
BASE_LR = {
    "sgd": 0.05,
    "sgd_momentum": 0.01,
    "adam": 2e-3,
    "adamw": 2e-3,
    "rmsprop": 5e-4,
}


def split_of(config_id: str) -> str:
    """``"heldout"`` or ``"tuning"`` (the rule in the module docstring)."""
    digest = hashlib.sha256((SPLIT_SALT + config_id).encode("utf-8")).hexdigest()
    return HELDOUT if int(digest[-1], 16) % 2 else TUNING


def have_sklearn() -> bool:
    return importlib.util.find_spec("sklearn") is not None


def configs(seed: int = 0, n: int = 120, *, sklearn: bool | None = None) -> list[dict[str, Any]]:
    """``n`` healthy configurations, the same for the same ``seed`` (and sklearn presence)."""
    if sklearn is None:
        sklearn = have_sklearn()
    rng = random.Random(seed)
    return [_one(rng, seed, i, sklearn) for i in range(n)]


def _steps(rng: random.Random, index: int, tiny: bool) -> int:
    if index == 0:
        return 20
    if index == 1:
        return 50_000
    roll = rng.random()
    if roll < 0.55:
        return rng.randint(20, 400)
    if roll < 0.85:
        return rng.randint(400, 2_000)
    if roll < 0.96 or not tiny:
        return rng.randint(2_000, 6_000) if tiny else rng.randint(1_000, 2_500)
    return rng.randint(10_000, 50_000)


def _one(rng: random.Random, seed: int, index: int, sklearn: bool) -> dict[str, Any]:
    family = "tabular" if index < 2 else rng.choice(("tabular", "tabular", "image", "sequence"))
    if family == "tabular":
        data = rng.choice(TABULAR + (SKLEARN_TABULAR if sklearn else ()))
        model = "linear" if index == 1 else rng.choice(("linear", "mlp", "mlp"))
    elif family == "image":
        data = rng.choice(IMAGE if sklearn else ("synth_image",))
        model = rng.choice(("cnn", "mlp"))
    else:
        data = rng.choice(SEQUENCE)
        model = rng.choice(("gru", "lstm", "transformer"))
    tiny = model in ("linear", "mlp") and data in TABULAR
    steps = _steps(rng, index, tiny)
    optimizer = rng.choice(OPTIMIZERS)
    lr = BASE_LR[optimizer] * rng.choice((0.5, 1.0, 1.0, 2.0))
    if model in ("gru", "lstm", "transformer") and optimizer.startswith("sgd"):
        lr *= 4  # plain SGD needs a larger step on these
    amp = rng.choice(("none", "none", "none", "bf16", "fp16"))
    if amp == "fp16" and model not in ("linear", "mlp", "cnn"):
        amp = "bf16"  # CPU fp16 autocast covers linear/conv; keep recurrent ones on bf16
    eval_every = rng.choice((0, 0, 10, 25, 50, 100, 250))
    ckpt_every = rng.choice((0, 0, 0, 50, 200, 1000))
    if ckpt_every and ckpt_every >= steps:
        ckpt_every = 0
    resume_at = 0
    if steps >= 100 and rng.random() < 0.15:
        resume_at = rng.randint(steps // 4, 3 * steps // 4)
    return {
        "id": f"s{seed}-{index:03d}",
        "seed": seed * 1000 + index,
        "data": data,
        "model": model,
        "hidden": rng.choice((16, 32, 64)),
        "optimizer": optimizer,
        "lr": lr,
        "weight_decay": rng.choice((0.0, 0.0, 1e-4, 1e-2)),
        "scheduler": rng.choice(SCHEDULERS),
        "batch_size": rng.choice((8, 16, 32, 64, 128)),
        "steps": steps,
        "amp": amp,
        "clip": rng.choice((0.0, 0.0, 1.0, 5.0)),
        "eval_every": eval_every,
        "checkpoint_every": ckpt_every,
        "resume_at": resume_at,
        "watch": rng.choice(("watch", "watch", "manual", "none")),
        "watch_every": rng.choice((1, 10, 50)),
        "system_metrics": rng.random() < 0.85,  # the default: on
    }


def describe(cfg: dict[str, Any]) -> str:
    """One line a person can read: what the configuration trains, and how."""
    extras = [f"{cfg['steps']} steps", f"bs {cfg['batch_size']}", f"lr {cfg['lr']:g}"]
    if cfg["amp"] != "none":
        extras.append(cfg["amp"])
    if cfg["clip"]:
        extras.append(f"clip {cfg['clip']:g}")
    if cfg["eval_every"]:
        extras.append(f"eval/{cfg['eval_every']}")
    if cfg["checkpoint_every"]:
        extras.append(f"ckpt/{cfg['checkpoint_every']}")
    if cfg["resume_at"]:
        extras.append(f"resume@{cfg['resume_at']}")
    if cfg["watch"] != "none":
        extras.append(f"{cfg['watch']}/{cfg['watch_every']}")
    if not cfg["system_metrics"]:
        extras.append("no sys")
    head = f"{cfg['id']} {cfg['model']} on {cfg['data']}, {cfg['optimizer']}+{cfg['scheduler']}"
    return f"{head} ({', '.join(extras)})"
