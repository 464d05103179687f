"""The unit rules: durations and byte sizes (tracker/rules/units.py)."""

from __future__ import annotations

import pytest

from tracker.errors import InvalidInput
from tracker.rules.units import (
    GIB,
    MIB,
    DurationError,
    SizeError,
    format_bytes,
    parse_duration,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2h", 7200),
        ("90", 90),
        ("90s", 90),
        ("45m", 2700),
        ("1d", 86400),
        ("1h30m", 5400),
        ("1h 30m 15s", 5415),
        ("1.5h", 5400),
        ("2D", 172800),
        ("1d2h3m4s", 93784),
        ("0.5", 0.5),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(text, allow_zero=True) == seconds


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "expected a duration like"),
        ("2x", "expected a duration like"),
        ("h", "expected a duration like"),
        ("2hours", "expected a duration like"),
        ("30m1h", "largest first"),
        ("1h1h", "largest first"),
        ("0s", "greater than 0"),
        ("-5", "greater than 0"),
        ("1h-", "expected a duration like"),
    ],
)
def test_parse_duration_errors(text: str, fragment: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text, field="timeout")
    assert fragment in str(info.value) and repr(text) in str(info.value)
    assert info.value.code == "invalid_duration" and info.value.field == "timeout"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("0s", 0.0), ("0h0m", 0.0), ("1h30m", 5400.0)],
)
def test_parse_duration_allow_zero(text: str, seconds: float) -> None:
    assert parse_duration(text, allow_zero=True) == seconds


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("-5", "must not be negative"), ("30m1h", "largest first"), ("soon", "expected a")],
)
def test_parse_duration_allow_zero_errors(text: str, fragment: str) -> None:
    with pytest.raises(DurationError, match=fragment) as info:
        parse_duration(text, allow_zero=True)
    assert info.value.field == "duration"


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("20GiB", 20 * GIB),
        ("20G", 20 * GIB),
        ("20gb", 20 * GIB),
        ("512MiB", 512 * MIB),
        ("16000MB", 16000 * MIB),
        ("1.5G", int(1.5 * GIB)),
        (" 2 TiB ", 2 * 1024**4),
        ("4K", 4096),
        ("10B", 10),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("20", "give a size with a unit"),
        ("", "give a size with a unit"),
        ("GiB", "give a size with a unit"),
        ("20XB", "give a size with a unit"),
        ("-1GiB", "give a size with a unit"),
        ("0GiB", "must be more than 0"),
        ("0.1B", "must be more than 0"),
    ],
)
def test_parse_size_errors(text: str, fragment: str) -> None:
    with pytest.raises(SizeError, match=fragment) as info:
        parse_size(text, field="gpu_memory")
    assert isinstance(info.value, InvalidInput)
    assert info.value.field == "gpu_memory" and info.value.code == "invalid_size"
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (12.5 * MIB, "12.5 MiB"),
        (3 * GIB, "3 GiB"),
        (-2 * MIB, "-2 MiB"),
        (1536 * GIB, "1.54e+03 GiB"),
    ],
)
def test_format_bytes(n: float, text: str) -> None:
    assert format_bytes(n) == text
