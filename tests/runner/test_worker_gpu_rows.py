"""A worker's heartbeat refreshes its GPUs' free memory, and the dashboard API shows it."""

from __future__ import annotations

from tracker.entities import GpuDevice
from tracker.store import Store
from tracker.store import workers as store_workers
from tracker.web.app import create_app

GIB = 1024**3


def test_heartbeat_refreshes_free_gpu_memory(store_url: str) -> None:
    store = Store(store_url)
    gpus = [GpuDevice(0, "NVIDIA H200", 141 * GIB), GpuDevice(1, "NVIDIA H200", 141 * GIB)]
    store_workers.register_worker(
        store, "gpu-host-1", host="gpu-host", pid=7, gpus=gpus, max_jobs=2
    )
    (worker,) = store_workers.list_workers(store)
    assert [g.get("free_bytes") for g in worker.gpus] == [None, None]

    free = {0: 100 * GIB, 1: None}  # NVML could not read device 1
    store_workers.heartbeat_worker(store, "gpu-host-1", gpus=store_workers.gpu_rows(gpus, free))
    (worker,) = store_workers.list_workers(store)
    assert worker.gpus == [
        {"index": 0, "name": "NVIDIA H200", "total_bytes": 141 * GIB, "free_bytes": 100 * GIB},
        {"index": 1, "name": "NVIDIA H200", "total_bytes": 141 * GIB},
    ]

    client = create_app({"STORE_URI": store_url, "TESTING": True, "NO_AUTH": True}).test_client()
    body = client.get("/api/v1/workers").get_json()
    (shown,) = [w for w in body["workers"] if w["id"] == "gpu-host-1"]
    assert shown["gpus"][0]["free_bytes"] == 100 * GIB


def test_cpu_only_heartbeat_leaves_gpus_alone(store_url: str) -> None:
    store = Store(store_url)
    store_workers.register_worker(store, "cpu-1", host="h", pid=1, gpus=[], max_jobs=1)
    store_workers.heartbeat_worker(store, "cpu-1", gpus=None)
    (worker,) = store_workers.list_workers(store)
    assert worker.gpus == [] and worker.status == "running"
