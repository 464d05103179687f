"""System sampling on a machine without CUDA: CPU and RSS only, no GPU series, no errors."""

from __future__ import annotations

import time

import torch

import tracker
from tracker import system
from tracker.store import Store
from tracker.store.metrics import metric_keys
from tracker.store.runs import get_run


def test_no_cuda_means_no_gpu_series() -> None:
    assert not torch.cuda.is_available()
    assert system.allocator_stats() == {}
    assert system.step_memory_reader() is None
    assert system.NvmlReader().read() == {}


def test_sampler_records_cpu_and_rss(store_url: str) -> None:
    run = tracker.init(project="sys", uri=store_url, system_interval=0.05)
    sample = run._sampler.sample()
    assert set(sample) == {"sys/cpu_percent", "sys/rss_bytes"}
    assert sample["sys/rss_bytes"] > 10 * 2**20
    store = Store(store_url)
    deadline = time.monotonic() + 30
    while "sys/rss_bytes" not in get_run(store, run.id).last_metrics:
        run.flush()
        assert time.monotonic() < deadline, "no system sample reached the store within 30 s"
        time.sleep(0.05)  # waiting on the sampler's own clock, not on a thread join
    run.finish()
    assert not any(k.startswith("sys/gpu") for k in metric_keys(store, run.id))


def test_gpu_keys_are_tagged_by_rank(monkeypatch) -> None:
    assert system.gpu_prefix(0) == "sys/gpu0"
    monkeypatch.setenv("RANK", "3")
    assert system.gpu_prefix(1) == "sys/rank3/gpu1"


def test_visible_devices_follow_cuda_visible_devices(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,GPU-abc, 5")
    assert system._visible_devices(8) == ["2", "GPU-abc", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert system._visible_devices(8) == []
