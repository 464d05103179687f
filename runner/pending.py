"""Why a queued job waits: a pure rule over the live workers.

``explain_pending`` says why a job cannot run on any live worker (too many GPUs asked, GPUs
too small, no worker at all), or ``None``: always ``None`` while a dispatcher is live (the
cluster scheduler has the GPUs, and its own pending reason shows once it holds the job).
The housekeeping hands it to :func:`tracker.store.workers.update_pending_reasons`, which
writes the reasons; ``tracker jobs show`` asks it directly for a job that has none stored yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracker.entities import WorkerInfo

__all__ = ["explain_pending"]

_GIB = 1024**3


def explain_pending(
    gpus: int, gpu_memory_bytes: int | None, workers: Sequence[WorkerInfo]
) -> str | None:
    """Why no live worker can ever run a job asking for this, or ``None`` if one could."""
    able = [w for w in workers if w.status == "running"]
    if not able:
        return "no live worker: start one with `tracker worker`"
    if any(w.executor != "local" for w in able):
        return None  # a cluster scheduler takes any job, and says itself why one waits there
    most = max(able, key=lambda w: len(w.gpus))
    if gpus > len(most.gpus):
        if not most.gpus:
            return (
                f"needs {gpus} GPU(s), but every live worker is CPU-only; "
                "start `tracker worker --gpus ...` on a GPU host"
            )
        return f"needs {gpus} GPU(s); the largest live worker ({most.id}) has {len(most.gpus)}"
    big = gpu_memory_bytes or 0
    if big and gpus > 0 and not any(_big_enough(w.gpus, big) >= gpus for w in able):
        return (
            f"needs {gpus} GPU(s) with {big / _GIB:.1f} GiB each; "
            "no live worker has that many GPUs that large"
        )
    return None


def _big_enough(devices: Sequence[Mapping[str, Any]], need: int) -> int:
    return sum(1 for d in devices if d.get("total_bytes") is None or d["total_bytes"] >= need)
