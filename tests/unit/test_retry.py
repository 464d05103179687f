from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from tracker.errors import InvalidInput
from tracker.rules.failure import FAILURE_CLASSES
from tracker.runner.retry import (
    ALWAYS_RETRIED,
    NEVER_RETRIED,
    RetryPolicy,
    RetryPolicyError,
    backoff_delay,
    is_retryable,
    next_attempt,
)

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC).timestamp()  # the store keeps floats


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(1, 10), (2, 20), (3, 40), (4, 80), (6, 320), (7, 600), (8, 600), (10_000, 600)],
)
def test_backoff_doubles_and_caps(attempt: int, expected: float) -> None:
    assert backoff_delay(attempt) == expected


def test_backoff_custom_base_and_cap() -> None:
    assert [backoff_delay(a, base_delay_s=1.5, max_delay_s=5) for a in (1, 2, 3, 4)] == [
        1.5,
        3.0,
        5.0,
        5.0,
    ]
    assert backoff_delay(3, base_delay_s=0) == 0


def test_backoff_jitter_only_with_rng_and_reproducible() -> None:
    with_rng = [backoff_delay(4, rng=random.Random(42)) for _ in range(2)]
    assert with_rng[0] == with_rng[1]  # same seed, same delay
    assert 40 <= with_rng[0] <= 80  # equal jitter: half fixed, half random
    rng = random.Random(1)
    draws = {backoff_delay(4, rng=rng) for _ in range(50)}
    assert len(draws) > 1 and all(40 <= d <= 80 for d in draws)
    assert backoff_delay(4) == backoff_delay(4) == 80


RETRY_TABLE = [
    # failure_cls, attempt, max_retries, retry_on_failure, expected delay in s or None
    ("crashed", 1, 3, False, 10),
    ("timeout", 2, 3, False, 20),
    ("host_oom", 3, 3, False, 40),
    ("killed_by_signal", 1, 1, False, 10),
    ("host_oom", 4, 3, False, None),  # retries used up
    ("crashed", 1, 0, False, None),  # no retries allowed
    ("python_exception", 1, 3, False, None),
    ("python_exception", 1, 3, True, 10),
    ("exit_code", 2, 3, True, 20),
    ("cuda_oom", 1, 2, False, None),
    ("cuda_oom", 1, 2, True, 10),
    ("nccl", 1, 2, True, 10),
    ("nccl", 3, 2, True, None),
    ("import_error", 1, 2, True, 10),
    ("something_new", 1, 2, False, None),
    ("something_new", 1, 2, True, 10),
    ("cancelled", 1, 5, True, None),
    ("cancelled", 1, 5, False, None),
]


@pytest.mark.parametrize(("cls", "attempt", "max_retries", "on_failure", "delay"), RETRY_TABLE)
def test_next_attempt(
    cls: str, attempt: int, max_retries: int, on_failure: bool, delay: float | None
) -> None:
    when = next_attempt(cls, attempt, max_retries, NOW, retry_on_failure=on_failure)
    if delay is None:
        assert when is None
    else:
        assert when == NOW + delay


def test_next_attempt_uses_given_clock_in_epoch_seconds() -> None:
    assert next_attempt("crashed", 1, 1, 1_893_456_000.0) == 1_893_456_010.0
    assert next_attempt("crashed", 1, 1, 0.25) == 10.25  # no rounding to microseconds


def test_the_policy_passes_its_delays() -> None:
    policy = RetryPolicy(base_delay_s=1.5, max_delay_s=2.0)
    assert policy.next_retry("crashed", 2, 3, NOW, retry_on_failure=False) == NOW + 2.0
    assert policy.next_retry("exit_code", 1, 3, NOW, retry_on_failure=False) is None
    assert policy.next_retry("exit_code", 1, 3, NOW, retry_on_failure=True) == NOW + 1.5


def test_next_attempt_with_rng_is_deterministic_per_seed() -> None:
    a = next_attempt("timeout", 3, 5, NOW, rng=random.Random(9))
    b = next_attempt("timeout", 3, 5, NOW, rng=random.Random(9))
    assert a == b and a is not None
    assert NOW + 20 <= a <= NOW + 40


def test_no_retry_does_not_consume_rng() -> None:
    rng = random.Random(5)
    state = rng.getstate()
    assert next_attempt("cancelled", 1, 3, NOW, rng=rng) is None
    assert rng.getstate() == state


def test_is_retryable_for_every_failure_class() -> None:
    for cls in FAILURE_CLASSES:
        if cls in ("cancelled", "pruned"):  # a person's cancel; a sweep's pruner
            assert not is_retryable(cls, retry_on_failure=True)
        elif cls in ("timeout", "host_oom", "killed_by_signal", "preempted", "node_fail"):
            assert is_retryable(cls, retry_on_failure=False)
        else:
            assert not is_retryable(cls, retry_on_failure=False)
            assert is_retryable(cls, retry_on_failure=True)
    assert "crashed" in ALWAYS_RETRIED and frozenset({"cancelled", "pruned"}) == NEVER_RETRIED


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"attempt": 0}, "attempt"),
        ({"attempt": True}, "attempt"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": 1.5}, "max_retries"),
        ({"base_delay_s": -1}, "base_delay_s"),
        ({"max_delay_s": float("inf")}, "max_delay_s"),
        ({"base_delay_s": float("nan")}, "base_delay_s"),
    ],
)
def test_invalid_settings_raise(kwargs: dict, field: str) -> None:
    args = {"failure_cls": "crashed", "attempt": 1, "max_retries": 3, "now": NOW, **kwargs}
    with pytest.raises(RetryPolicyError) as info:
        next_attempt(**args)
    assert info.value.field == field and field in str(info.value)
    assert isinstance(info.value, InvalidInput) and info.value.code == "invalid_retry_policy"
