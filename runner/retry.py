"""When to run a failed job again: a pure policy, with the clock passed in (epoch seconds,
as the store keeps time).

Policy (``max_retries`` is the number of retries a job may have; 0 means none):

- ``cancelled`` is never retried: a person asked for it to stop; nor is ``pruned``: a
  sweep's pruner stopped the trial because it was worse than its peers.
- Failures from outside the job's code, ``crashed`` (the worker or host died, the lease
  expired), ``timeout``, ``host_oom`` and ``killed_by_signal`` (SIGKILL/SIGTERM from outside,
  e.g. a preemption), and from a cluster scheduler, ``preempted`` (Slurm preempted or
  requeued the job) and ``node_fail``, are retried whenever retries remain, because running the
  same code again, resumed from its last checkpoint, can succeed.
- Every other class (``python_exception``, ``exit_code``, ``cuda_oom``, ``nccl``,
  ``device_assert``, ``nonfinite_loss``, ``import_error``, ``missing_module``,
  ``missing_file``, the doctor's kinds a job's ``fail_on`` policy failed it for --
  ``divergence``, ``amp_scale_collapse``, ``memory_growth``... -- and unknown classes)
  comes from the job itself and would most likely fail the same way again; it is retried
  only when the user asked for it with ``retry_on_failure=True`` and retries remain.

Delays grow exponentially: ``base_delay_s * 2 ** (attempt - 1)``, capped at ``max_delay_s``.
There is no randomness unless an ``rng`` is passed in; then the delay is "equal jitter":
half the delay fixed plus a uniform draw over the other half, so many jobs that failed
together do not all come back at the same moment.

``RetryPolicy`` bundles the delays a worker or housekeeper was started with; its
``next_retry`` is the rule the store's ``finish`` and lease reaper call
(:class:`tracker.store.queue.RetryRule`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from tracker.errors import InvalidInput
from tracker.rules import backoff
from tracker.rules.failure import (
    CANCELLED,
    HOST_OOM,
    KILLED_BY_SIGNAL,
    NODE_FAIL,
    PREEMPTED,
    PRUNED,
    TIMEOUT,
)

__all__ = [
    "ALWAYS_RETRIED",
    "DEFAULT_POLICY",
    "NEVER_RETRIED",
    "RetryPolicy",
    "RetryPolicyError",
    "backoff_delay",
    "is_retryable",
    "next_attempt",
]

ALWAYS_RETRIED = frozenset({"crashed", TIMEOUT, HOST_OOM, KILLED_BY_SIGNAL, PREEMPTED, NODE_FAIL})
NEVER_RETRIED = frozenset({CANCELLED, PRUNED})


class RetryPolicyError(InvalidInput):
    """Retry settings that break the rules (negative counts, delays, attempt numbers)."""

    code = "invalid_retry_policy"


def is_retryable(failure_cls: str, *, retry_on_failure: bool) -> bool:
    """Whether a failure of this class may be retried at all (ignoring the retry budget)."""
    if failure_cls in NEVER_RETRIED:
        return False
    return failure_cls in ALWAYS_RETRIED or retry_on_failure


def _check_non_negative(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise RetryPolicyError(f"{name}: got {value!r}; it must be a number >= 0", field=name)
    if not math.isfinite(value):
        raise RetryPolicyError(f"{name}: got {value!r}; it must be finite", field=name)


def _check_settings(attempt: int, base_delay_s: float, max_delay_s: float) -> None:
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise RetryPolicyError(
            f"attempt: got {attempt!r}; attempts are numbered from 1", field="attempt"
        )
    _check_non_negative("base_delay_s", base_delay_s)
    _check_non_negative("max_delay_s", max_delay_s)


def backoff_delay(
    attempt: int,
    *,
    base_delay_s: float = 10,
    max_delay_s: float = 600,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first run).

    Raises ``RetryPolicyError`` when ``attempt < 1`` or a delay is negative or not finite.
    """
    _check_settings(attempt, base_delay_s, max_delay_s)
    jitter = None if rng is None else rng.random()  # as rng.uniform(0, delay / 2) drew it
    return backoff.backoff_delay(attempt, base_s=base_delay_s, cap_s=max_delay_s, jitter=jitter)


def next_attempt(
    failure_cls: str,
    attempt: int,
    max_retries: int,
    now: float,
    *,
    base_delay_s: float = 10,
    max_delay_s: float = 600,
    retry_on_failure: bool = False,
    rng: random.Random | None = None,
) -> float | None:
    """When (epoch seconds: ``now`` plus the backoff) to start the next attempt after attempt
    number ``attempt`` failed, or ``None``.

    ``None`` means do not retry: the class is never retried, it is a failure of the job's
    own code and ``retry_on_failure`` is off, or ``attempt`` already used up the
    ``max_retries`` retries (a job has ``1 + max_retries`` attempts in all).

    Raises ``RetryPolicyError`` when ``attempt < 1``, ``max_retries < 0`` or a delay is
    negative or not finite.
    """
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise RetryPolicyError(
            f"max_retries: got {max_retries!r}; it must be an integer >= 0", field="max_retries"
        )
    _check_settings(attempt, base_delay_s, max_delay_s)
    if attempt > max_retries:
        return None
    if not is_retryable(failure_cls, retry_on_failure=retry_on_failure):
        return None
    delay = backoff_delay(attempt, base_delay_s=base_delay_s, max_delay_s=max_delay_s, rng=rng)
    return now + delay


@dataclass(frozen=True)
class RetryPolicy:
    """The backoff settings of a worker or housekeeper (``tracker worker --retry-delay``)."""

    base_delay_s: float = 10.0
    max_delay_s: float = 600.0

    def next_retry(
        self,
        failure_cls: str,
        attempt: int,
        max_retries: int,
        now: float,
        *,
        retry_on_failure: bool,
    ) -> float | None:
        """:func:`next_attempt` with this policy's delays (no jitter)."""
        return next_attempt(
            failure_cls,
            attempt,
            max_retries,
            now,
            base_delay_s=self.base_delay_s,
            max_delay_s=self.max_delay_s,
            retry_on_failure=retry_on_failure,
        )


DEFAULT_POLICY = RetryPolicy()  # backoff 10 s, doubling, at most 600 s
