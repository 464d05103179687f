"""How numbers read in the CLI (tracker.rules.display): table-driven."""

from __future__ import annotations

import math

import pytest

from tracker.rules.display import format_metric, format_number, is_bytes_key


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (522895360.0, "522,895,360"),
        (522895360, "522,895,360"),
        (12345.678, "12,345.68"),
        (0.93125, "0.93125"),
        (3e-4, "0.0003"),
        (1.5e-8, "1.5e-08"),
        (2.0, "2"),
        (-7, "-7"),
        (1e20, "1e+20"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (True, "True"),
        ("x", "x"),
        (None, "None"),
    ],
)
def test_format_number(value: object, text: str) -> None:
    assert format_number(value) == text


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("sys/rss_bytes", 522895360.0, "499 MiB"),
        ("sys/gpu0/allocated_bytes", 3 * 1024**3, "3 GiB"),
        ("bytes", 512, "512 B"),
        ("sys/rss_bytes", math.nan, "nan"),
        ("train/loss", 522895360.0, "522,895,360"),
        ("bytes_seen", 2048, "2,048"),  # only a name that ends in _bytes is a size
    ],
)
def test_format_metric(key: str, value: float, text: str) -> None:
    assert format_metric(key, value) == text


@pytest.mark.parametrize(
    ("key", "expected"),
    [("rss_bytes", True), ("sys/gpu0/peak_bytes", True), ("bytes", True),
     ("bytes/sec", False), ("num_bytes_seen", False), ("loss", False)],
)  # fmt: skip
def test_is_bytes_key(key: str, expected: bool) -> None:
    assert is_bytes_key(key) is expected
