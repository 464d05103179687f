"""Job env values are write-only (pure, no I/O).

A job's ``env`` (and a schedule's stored spec, which holds one) may carry tokens and
passwords: the trusted submitter writes them, the worker reads them from the store to start
the process, and nothing else ever shows them. Every place that turns a job or a schedule
into output -- the JSON API, the MLflow routes, the CLI's ``--json`` -- passes it through
:func:`env_keys_only`, which keeps the names (so a reader sees *that* ``WANDB_API_KEY`` is
set) and drops the values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["env_keys_only"]


def env_keys_only(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a job or job spec (as a mapping) with ``env`` replaced by ``env_keys``, the
    sorted names. A mapping without ``env`` gets ``env_keys: []``."""
    out = {k: v for k, v in data.items() if k != "env"}
    out["env_keys"] = sorted(data.get("env") or {})
    return out
