"""The CUDA and NVML branches of the samplers, on a machine without a GPU.

No GPU exists here, so these tests hand the samplers small stand-ins that answer like
``torch.cuda`` and ``pynvml`` do; they check our mapping (keys, units, device selection,
rank tags), not the driver. The CPU-only behaviour against the real torch is in
test_system.py.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from tracker import system

GIB = 1024**3


def _fake_cuda(stats: dict[int, dict[str, int]]) -> Any:
    return SimpleNamespace(
        is_available=lambda: True,
        is_initialized=lambda: True,
        device_count=lambda: len(stats),
        memory_stats=lambda device: stats[device],
        memory_allocated=lambda: stats[0]["allocated_bytes.all.current"],
        max_memory_allocated=lambda: stats[0]["allocated_bytes.all.peak"],
    )


STATS = {
    0: {
        "allocated_bytes.all.current": 3 * GIB,
        "reserved_bytes.all.current": 4 * GIB,
        "allocated_bytes.all.peak": 5 * GIB,
        "num_alloc_retries": 2,
        "num_ooms": 1,
    },
    1: {"allocated_bytes.all.current": GIB, "reserved_bytes.all.current": 2 * GIB},
}


def test_allocator_stats_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=_fake_cuda(STATS)))
    monkeypatch.delenv("RANK", raising=False)
    assert system.allocator_stats() == {
        "sys/gpu0/allocated_bytes": 3.0 * GIB,
        "sys/gpu0/reserved_bytes": 4.0 * GIB,
        "sys/gpu0/peak_allocated_bytes": 5.0 * GIB,
        "sys/gpu0/alloc_retries": 2.0,
        "sys/gpu0/ooms": 1.0,
        "sys/gpu1/allocated_bytes": 1.0 * GIB,
        "sys/gpu1/reserved_bytes": 2.0 * GIB,
    }
    reader = system.step_memory_reader()
    assert reader is not None and reader() == (3.0 * GIB, 5.0 * GIB)


def test_allocator_stats_are_tagged_by_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=_fake_cuda(STATS)))
    monkeypatch.setenv("RANK", "1")
    assert "sys/rank1/gpu0/allocated_bytes" in system.allocator_stats()


def test_cuda_not_initialised_means_no_series(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = _fake_cuda(STATS)
    cuda.is_initialized = lambda: False  # torch imported, CUDA never used: no context made
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    assert system.allocator_stats() == {} and system.step_memory_reader() is None


class FakeNvml:
    """Answers like pynvml for three physical devices."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 3

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self.asked.append(index)
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        self.asked.append(uuid)
        return 2

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(used=(handle + 1) * GIB, total=141 * GIB)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        return SimpleNamespace(gpu=10 * handle)


def test_nvml_reads_only_the_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,GPU-0f3a")
    monkeypatch.delenv("RANK", raising=False)
    values = system.NvmlReader().read()
    assert fake.asked == [2, "GPU-0f3a"]
    assert values == {  # visible device 0 is physical device 2, as CUDA numbers them
        "sys/gpu0/nvml_used_bytes": 3.0 * GIB,
        "sys/gpu0/nvml_total_bytes": 141.0 * GIB,
        "sys/gpu0/utilization_percent": 20.0,
        "sys/gpu1/nvml_used_bytes": 3.0 * GIB,
        "sys/gpu1/nvml_total_bytes": 141.0 * GIB,
        "sys/gpu1/utilization_percent": 20.0,
    }
