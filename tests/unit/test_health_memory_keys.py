"""Which series the leak detector reads: RSS and allocated bytes under any prefix (the
system sampler's, or a script's own like examples/train_leak.py's ``mem/rss_bytes``), never
peaks, the allocator's cache or other units; ``diagnose`` routes them all."""

from __future__ import annotations

import pytest

from tracker.rules.health import diagnose, is_memory_key

MIB = 1024**2


@pytest.mark.parametrize(
    ("key", "read"),
    [
        ("sys/rss_bytes", True),
        ("mem/rss_bytes", True),
        ("memory/process_rss_bytes", True),
        ("sys/gpu0/allocated_bytes", True),
        ("sys/rank1/gpu3/allocated_bytes", True),
        ("mem/gpu_allocated_bytes", True),
        ("cuda_memory_allocated_bytes", True),
        ("sys/step/gpu_allocated_bytes", False),  # repeats sys/gpu<i>/allocated_bytes
        ("sys/gpu0/peak_allocated_bytes", False),  # only ever rises
        ("mem/max_allocated_bytes", False),
        ("sys/gpu0/reserved_bytes", False),  # the allocator's cache
        ("sys/gpu0/nvml_used_bytes", False),
        ("mem/rss_mb", False),  # not bytes: the thresholds would be wrong
        ("train/loss", False),
        ("rss", False),
    ],
)
def test_memory_keys(key: str, read: bool) -> None:
    assert is_memory_key(key) is read


def _leak(n: int = 120) -> list[tuple[int, float | None]]:
    # examples/train_leak.py as measured: ~380 MiB, +0.5 MiB per step, a little noise
    return [(s, 383 * MIB + 0.55 * MIB * s + (s % 3) * 0.2 * MIB) for s in range(n)]


@pytest.mark.parametrize("key", ["mem/rss_bytes", "sys/rss_bytes", "mem/gpu_allocated_bytes"])
def test_diagnose_reads_a_scripts_own_memory_series(key: str) -> None:
    [found] = diagnose({key: _leak(), "train/loss": [(s, 1.0) for s in range(120)]}, final=True)
    assert (found.code, found.metric, found.step) == ("memory_growth", key, 0)
    where = "GPU memory" if "gpu" in key else "Host memory (RSS)"
    assert found.message.startswith(f"{where} ({key})")


def test_peaks_and_other_units_are_not_read_as_leaks() -> None:
    series = {"sys/gpu0/peak_allocated_bytes": _leak(), "mem/rss_mb": _leak()}
    assert diagnose(series, final=True) == []
