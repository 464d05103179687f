"""System and GPU memory samplers.

* CPU percent and process RSS from psutil.
* PyTorch allocator stats per visible device (allocated, reserved, peak, alloc retries,
  OOMs) -- only when torch is *already imported* by the training script and CUDA is
  initialised; this module never imports torch itself.
* NVML (nvidia-ml-py) device memory used/total and utilisation, for the devices this
  process may see (``CUDA_VISIBLE_DEVICES``), when NVML is installed and a driver answers.

On a machine without CUDA the GPU series are simply absent: no error, no warning.
Keys: ``sys/cpu_percent``, ``sys/rss_bytes``, ``sys/gpu{i}/allocated_bytes``, ...
(``sys/rank{r}/gpu{i}/...`` when ``RANK`` is set, so every rank reports its own).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

ALLOCATOR_FIELDS = {
    "allocated_bytes": "allocated_bytes.all.current",
    "reserved_bytes": "reserved_bytes.all.current",
    "peak_allocated_bytes": "allocated_bytes.all.peak",
    "alloc_retries": "num_alloc_retries",
    "ooms": "num_ooms",
}


def gpu_prefix(device: int) -> str:
    rank = os.environ.get("RANK")
    return f"sys/rank{rank}/gpu{device}" if rank is not None else f"sys/gpu{device}"


def _cuda() -> Any | None:
    """torch.cuda if torch is imported and CUDA is initialised, else None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_available() or not cuda.is_initialized():
            return None
    except Exception:  # a broken driver must not break training
        return None
    return cuda


def allocator_stats() -> dict[str, float]:
    """The PyTorch caching allocator's counters for every visible device (host-side reads)."""
    cuda = _cuda()
    if cuda is None:
        return {}
    out: dict[str, float] = {}
    for device in range(cuda.device_count()):
        stats = cuda.memory_stats(device)
        prefix = gpu_prefix(device)
        for name, field in ALLOCATOR_FIELDS.items():
            if field in stats:
                out[f"{prefix}/{name}"] = float(stats[field])
    return out


def step_memory_reader() -> Callable[[], tuple[float, float]] | None:
    """A cheap reader of (allocated, peak) bytes on the current device for every log() call.

    None when CUDA is not in use. ``memory_allocated`` reads a host-side counter: no sync.
    """
    cuda = _cuda()
    if cuda is None:
        return None
    return lambda: (float(cuda.memory_allocated()), float(cuda.max_memory_allocated()))


class NvmlReader:
    """NVML device memory and utilisation for this process's visible devices."""

    def __init__(self) -> None:
        self.handles: list[tuple[int, Any]] = []
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception:  # no NVML library or no driver: GPU series are simply absent
            return
        self._nvml = pynvml
        for index, physical in enumerate(_visible_devices(pynvml.nvmlDeviceGetCount())):
            try:
                handle = _nvml_handle(pynvml, physical)
            except Exception:
                continue
            self.handles.append((index, handle))

    def read(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for index, handle in self.handles:
            prefix = gpu_prefix(index)
            mem = self._nvml.nvmlDeviceGetMemoryInfo(handle)
            util = self._nvml.nvmlDeviceGetUtilizationRates(handle)
            out[f"{prefix}/nvml_used_bytes"] = float(mem.used)
            out[f"{prefix}/nvml_total_bytes"] = float(mem.total)
            out[f"{prefix}/utilization_percent"] = float(util.gpu)
        return out


def _visible_devices(count: int) -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return [str(i) for i in range(count)]
    return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]


def _nvml_handle(pynvml: Any, device: str) -> Any:
    if device.isdigit():
        return pynvml.nvmlDeviceGetHandleByIndex(int(device))
    return pynvml.nvmlDeviceGetHandleByUUID(device)


class SystemSampler:
    """A daemon thread that calls ``emit(values)`` every ``interval`` seconds."""

    def __init__(
        self,
        emit: Callable[[dict[str, float]], None],
        interval: float = 5.0,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        import psutil

        self.interval = interval
        self._emit = emit
        self._on_error = on_error
        self._process = psutil.Process()
        self._process.cpu_percent(None)  # the first call only primes the counter
        self._nvml = NvmlReader()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tracker-system", daemon=True)
        self._thread.start()

    def sample(self) -> dict[str, float]:
        values = {
            "sys/cpu_percent": float(self._process.cpu_percent(None)),
            "sys/rss_bytes": float(self._process.memory_info().rss),
        }
        values.update(allocator_stats())
        values.update(self._nvml.read())
        return values

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._emit(self.sample())
            except Exception as exc:  # sampling is optional: report it and stop sampling
                if self._on_error is not None:
                    self._on_error(exc)
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 1)
