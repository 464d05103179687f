"""The GPUs a worker may hand out, and (with NVML) how much memory each has free.

NVML comes from ``nvidia-ml-py`` and is optional: without it, or without a driver, a worker
trusts the ``--gpus`` list it was given and places jobs by free slots only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from tracker.entities import GpuDevice

log = logging.getLogger(__name__)


class Nvml:
    """A thin, failure-tolerant NVML handle; ``available`` is False without a driver."""

    def __init__(self) -> None:
        self._lib: Any = None
        self._lock = threading.Lock()
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # no library or no driver: NVML is simply not used
            log.debug("NVML unavailable: %s", exc)
            return
        self._lib = pynvml

    @property
    def available(self) -> bool:
        return self._lib is not None

    def devices(self) -> list[GpuDevice]:
        if self._lib is None:
            return []
        lib = self._lib
        out = []
        with self._lock:
            for index in range(lib.nvmlDeviceGetCount()):
                handle = lib.nvmlDeviceGetHandleByIndex(index)
                name = lib.nvmlDeviceGetName(handle)
                name = name.decode() if isinstance(name, bytes) else str(name)
                total = int(lib.nvmlDeviceGetMemoryInfo(handle).total)
                out.append(GpuDevice(index, name, total))
        return out

    def free_bytes(self, index: int) -> int | None:
        """Free memory of a device, or None when NVML cannot tell."""
        if self._lib is None:
            return None
        try:
            with self._lock:
                handle = self._lib.nvmlDeviceGetHandleByIndex(index)
                return int(self._lib.nvmlDeviceGetMemoryInfo(handle).free)
        except Exception as exc:  # a device that stops answering is treated as unknown
            log.warning("NVML could not read device %s: %s", index, exc)
            return None


def parse_gpus(text: str | None, nvml: Nvml) -> list[GpuDevice]:
    """``--gpus`` as devices: ``none``; ``all``/``auto``/None (every NVML device); ``0,1``.

    Raises ValueError for anything else.
    """
    value = (text or "auto").strip().lower()
    if value in ("none", "", "-1", "cpu"):
        return []
    known = {d.index: d for d in nvml.devices()}
    if value in ("auto", "all"):
        return list(known.values())
    indices = []
    for part in value.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"--gpus {text!r}: use none, all, or device indices like 0,1")
        indices.append(int(part))
    if len(set(indices)) != len(indices):
        raise ValueError(f"--gpus {text!r}: a device is listed twice")
    return [known.get(i, GpuDevice(i)) for i in indices]


class GpuSlots:
    """Which of the worker's GPUs are busy; places a job on free devices with enough memory."""

    def __init__(self, devices: Sequence[GpuDevice], nvml: Nvml) -> None:
        self.devices = list(devices)
        self.nvml = nvml
        self.busy: set[int] = set()

    def free(self) -> list[int]:
        return [d.index for d in self.devices if d.index not in self.busy]

    def place(self, resources: Mapping[str, Any]) -> tuple[int, ...] | None:
        """Device indices for a job's resources, or None when it does not fit now."""
        want = int(resources.get("gpus") or 0)
        if want == 0:
            return ()
        need = resources.get("gpu_memory_bytes")
        chosen = []
        for index in self.free():
            if need:
                free = self.nvml.free_bytes(index)
                if free is not None and free < int(need):
                    continue
            chosen.append(index)
            if len(chosen) == want:
                return tuple(chosen)
        return None

    def take(self, indices: Sequence[int]) -> None:
        self.busy.update(indices)

    def release(self, indices: Sequence[int]) -> None:
        self.busy.difference_update(indices)
