"""The one backoff rule (``tracker.rules.backoff``): table, bounds, Retry-After."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.rules.backoff import backoff_delay, retry_after_seconds


@pytest.mark.parametrize(
    ("attempt", "base", "cap", "want"),
    [
        (1, 0.1, 2.0, 0.1),
        (2, 0.1, 2.0, 0.2),
        (5, 0.1, 2.0, 1.6),
        (6, 0.1, 2.0, 2.0),
        (10_000, 0.1, 2.0, 2.0),  # no float overflow
        (3, 10.0, 600.0, 40.0),
        (1, 0.0, 5.0, 0.0),
    ],
)
def test_doubles_from_base_up_to_cap(attempt: int, base: float, cap: float, want: float) -> None:
    assert backoff_delay(attempt, base_s=base, cap_s=cap) == pytest.approx(want)


@given(
    attempt=st.integers(1, 100_000),
    base=st.floats(0, 1e6),
    cap=st.floats(0, 1e6),
    jitter=st.none() | st.floats(0, 1),
)
def test_bounds(attempt: int, base: float, cap: float, jitter: float | None) -> None:
    delay = backoff_delay(attempt, base_s=base, cap_s=cap, jitter=jitter)
    plain = backoff_delay(attempt, base_s=base, cap_s=cap)
    assert math.isfinite(delay) and 0 <= delay <= cap
    assert plain == min(cap, base * 2.0 ** min(attempt - 1, 64))
    if jitter is None:
        assert delay == plain
    else:  # the upper half of the plain delay
        assert plain / 2 <= delay <= plain


@given(attempt=st.integers(1, 200), base=st.floats(0, 100), cap=st.floats(0, 1e4))
def test_never_shrinks_with_more_attempts(attempt: int, base: float, cap: float) -> None:
    assert backoff_delay(attempt + 1, base_s=base, cap_s=cap) >= backoff_delay(
        attempt, base_s=base, cap_s=cap
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attempt": 0},
        {"attempt": True},
        {"base_s": -1.0},
        {"cap_s": math.inf},
        {"base_s": math.nan},
        {"jitter": 1.5},
        {"jitter": -0.1},
    ],
)
def test_refuses_bad_settings(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"attempt": 1, "base_s": 0.1, "cap_s": 1.0, **kwargs}
    with pytest.raises(ValueError):
        backoff_delay(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("header", "want"),
    [
        (None, None),
        ("", None),
        ("2", 2.0),
        (" 0 ", 0.0),
        ("soon", None),
        ("-3", None),
        ("Wed, 21 Oct 2015 07:28:05 GMT", 5.0),  # now = 07:28:00
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # past: no wait
    ],
)
def test_retry_after(header: str | None, want: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert retry_after_seconds(header, now) == want
