"""Profile requests: the bounds and the trace's artifact path that the client, the store and
the dashboard share (pure, no I/O). See :mod:`tracker.store.profiles` for the life of a
request and :mod:`tracker.client.profiling` for how a run takes one."""

from __future__ import annotations

from typing import Any

from tracker.errors import InvalidInput

__all__ = ["MAX_STEPS", "MAX_TRACE_BYTES", "RANKS", "check_request", "trace_path"]

MAX_STEPS = 500  # a profile of more steps is a trace of gigabytes; 20 say where time goes
MAX_TRACE_BYTES = 64 * 1024 * 1024  # one rank's gzip'd trace; a bigger one is not stored
RANKS = ("0", "all")  # rank 0 only, or every rank of a distributed job


def trace_path(profile_id: int, rank: int) -> str:
    """The artifact path of one rank's trace (gzip'd Chrome trace JSON, what
    ``torch.profiler`` exports: Perfetto and ``chrome://tracing`` open it)."""
    return f"profiles/{profile_id}/rank{rank}.pt.trace.json.gz"


def check_request(steps: Any, ranks: Any = "0") -> tuple[int, str]:
    """The request's steps and ranks, checked.

    Raises:
        InvalidInput: ``steps`` not an integer from 1 to :data:`MAX_STEPS`; ``ranks`` not
            ``"0"`` (rank 0 only) or ``"all"``.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise InvalidInput(
            f"steps must be an integer from 1 to {MAX_STEPS} (the steps profiled), got {steps!r}",
            field="steps",
        )
    if ranks not in RANKS:
        raise InvalidInput(
            f'ranks must be "0" (rank 0 only) or "all" (every rank of a distributed job), '
            f"got {ranks!r}",
            field="ranks",
        )
    return steps, str(ranks)
