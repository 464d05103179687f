"""Conversion of metric values (pure, no I/O); keys follow :mod:`tracker.rules.keys`.

Rule (also in the README):

* a value is an ``int`` or ``float`` (``bool`` is rejected: ``True`` is almost always a bug),
  a numpy number, or a torch tensor with exactly one element. NaN and ±Inf are kept.
"""

from __future__ import annotations

import sys
from typing import Any

from tracker.errors import InvalidMetricType

# Scalar types (numpy's) that float() converts exactly; filled on first sight so log()
# can take them without calling convert_value again.
SCALAR_TYPES: set[type] = set()
# torch.Tensor and its real (not bool, not complex) dtypes, taken on the first tensor seen:
# the check of a logged loss is then a type test and a set lookup, not five torch calls.
_TENSOR: type | None = None
_REAL_DTYPES: frozenset[Any] = frozenset()


def convert_value(key: str, value: Any) -> Any:
    """Turn an accepted non-builtin value into a float or a detached one-element tensor.

    Plain ints and floats never reach this function (``log()`` keeps them as they are).

    Raises:
        InvalidMetricType: bool, str, None, containers, multi-element tensors or arrays.
    """
    if type(value) is _TENSOR:  # the common case after the first: a loss tensor
        return _torch_value(key, value)
    if isinstance(value, bool):
        raise InvalidMetricType(
            f"metric {key!r}: bool values are not metrics (log 1.0/0.0 or int(flag))", field=key
        )
    if isinstance(value, int | float):  # int/float subclasses (e.g. IntEnum)
        return float(value)
    module = type(value).__module__
    if module.startswith("numpy"):
        return _numpy_value(key, value)
    if module.startswith("torch") and "torch" in sys.modules:
        return _torch_value(key, value)
    raise InvalidMetricType(
        f"metric {key!r}: a {type(value).__name__} is not a metric value; "
        "log an int, a float, a numpy number or a one-element torch tensor",
        field=key,
    )


def _numpy_value(key: str, value: Any) -> float:
    import numpy as np

    if isinstance(value, np.bool_):
        raise InvalidMetricType(f"metric {key!r}: numpy bool is not a metric value", field=key)
    if isinstance(value, np.integer | np.floating):
        SCALAR_TYPES.add(type(value))
        return float(value)
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iuf":
        return float(value.reshape(()))
    shape = getattr(value, "shape", None)
    raise InvalidMetricType(
        f"metric {key!r}: a numpy {type(value).__name__} of shape {shape} and dtype "
        f"{getattr(value, 'dtype', '?')} is not a metric value; log one number",
        field=key,
    )


def _torch_value(key: str, value: Any) -> Any:
    """A float for CPU tensors; a detached tensor (converted later, in the writer thread,
    one sync per batch) for tensors on an accelerator."""
    global _TENSOR, _REAL_DTYPES
    torch = sys.modules["torch"]  # the caller saw a torch type: imported by the script
    if not isinstance(value, torch.Tensor):
        raise InvalidMetricType(f"metric {key!r}: a {type(value).__name__} is not a metric")
    if _TENSOR is None:
        _REAL_DTYPES = frozenset(
            d for d in vars(torch).values()
            if isinstance(d, torch.dtype) and d != torch.bool and not d.is_complex
        )  # fmt: skip
        _TENSOR = torch.Tensor
    if value.numel() != 1:
        raise InvalidMetricType(
            f"metric {key!r}: a tensor of shape {tuple(value.shape)} has {value.numel()} "
            "elements; log a 0-d or one-element tensor (e.g. loss, not losses)",
            field=key,
        )
    if value.dtype not in _REAL_DTYPES:
        raise InvalidMetricType(
            f"metric {key!r}: a {value.dtype} tensor is not a metric value", field=key
        )
    if value.is_cpu:
        return float(value.item())  # no device to wait for: convert now, keep no tensor
    return value.detach()


def is_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch")


def tensors_to_floats(tensors: list[Any]) -> list[float]:
    """Convert detached one-element tensors to floats with one device sync per device."""
    import torch

    out: list[float] = [0.0] * len(tensors)
    groups: dict[tuple[Any, Any], list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    for idx in groups.values():
        stacked = torch.stack([tensors[i].reshape(()) for i in idx]).cpu().tolist()
        for i, v in zip(idx, stacked, strict=True):
            out[i] = float(v)
    return out
