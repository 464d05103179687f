"""torch's own account of a frame that reached its recompile limit: pure, no I/O.

``tracker.watch`` records one run event of kind ``RECOMPILE_LIMIT_EVENT`` when a frame that
``torch.compile`` compiles reaches torch's recompile limit (``recompile_limit`` compiles:
one compile and ``recompile_limit - 1`` recompiles; the next new guard failure makes Dynamo
stop compiling the frame). Its ``data`` names the frame (function, file, first line), the
number of compiles, the limit then in force, the step, and the guard failure torch gave as
the reason of that last recompile (what ``TORCH_LOGS=recompiles`` would print, e.g.
``tensor 'x' size mismatch at index 0. expected 8, actual 9``).

The doctor reads those events back as :class:`RecompileFact` (``fact_from_event`` tolerates
malformed data: ``None``, never an error) and :func:`advice` turns the guard into what to
try. ``clean_reason`` shortens torch's reason text to its first guard failure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_REASON_CHARS",
    "RECOMPILE_LIMIT_EVENT",
    "RecompileFact",
    "advice",
    "clean_reason",
    "fact_from_event",
]

RECOMPILE_LIMIT_EVENT = "recompile_limit"  # run_events.kind
MAX_REASON_CHARS = 300

_COMPILE_ID = re.compile(r"^\s*\[?!?[\d/_]+\]?:\s*")  # "0/7: " before each reason
_TORCH_WRAPPER = re.compile(r"(^|/)torch/_dynamo/external_utils\.py$")
_SOURCE_COMMENT = re.compile(r"\s{2,}#.*$")  # "k == 0      # return x * k  # f.py:18 in g"


@dataclass(frozen=True)
class RecompileFact:
    """A frame that reached torch's recompile limit, as ``tracker.watch`` saw it."""

    step: int  # the run's step when the frame compiled for the ``compiles``-th time
    function: str
    file: str
    line: int
    compiles: int
    limit: int
    reason: str  # the guard failure that caused the last recompile ("" when unknown)

    @property
    def frame(self) -> str:
        """``function (file:line)``, as torch names a frame (the function alone when its
        place is unknown); torch's own wrapper around a module it cannot trace from its
        ``forward`` (an ``nn.Sequential``, say) is said to be one."""
        if not self.line:
            return self.function
        if _TORCH_WRAPPER.search(self.file.replace("\\", "/")):
            wrapper = "; torch's wrapper around the compiled module's forward"
            return f"{self.function} ({self.file}:{self.line}{wrapper})"
        return f"{self.function} ({self.file}:{self.line})"

    def as_event_data(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "function": self.function,
            "file": self.file,
            "line": self.line,
            "compiles": self.compiles,
            "limit": self.limit,
            "reason": self.reason,
        }


def clean_reason(raw: str) -> str:
    """The first guard failure of torch's reason text, without the compile id prefix
    (``0/7: ``), the source comment torch appends, or the user stack trace."""
    first = next((ln for ln in str(raw).splitlines() if ln.strip()), "")
    first = first.split("; ")[0]  # several failures of one cache entry are joined by "; "
    first = _SOURCE_COMMENT.sub("", _COMPILE_ID.sub("", first))
    first = " ".join(first.split())
    if len(first) > MAX_REASON_CHARS:
        first = first[: MAX_REASON_CHARS - 1] + "…"
    return first


def fact_from_event(data: Mapping[str, Any] | None) -> RecompileFact | None:
    """A stored ``recompile_limit`` event's data as a fact; ``None`` when it is malformed."""
    if not isinstance(data, Mapping):
        return None
    try:
        fact = RecompileFact(
            step=int(data["step"]),
            function=str(data["function"]),
            file=str(data.get("file") or "?"),
            line=int(data.get("line") or 0),
            compiles=int(data["compiles"]),
            limit=int(data["limit"]),
            reason=clean_reason(str(data.get("reason") or "")),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return fact if fact.step >= 0 and fact.limit >= 1 else None


def advice(reason: str) -> str:
    """What to try against the guard that failed (torch's wording of guard failures)."""
    text = reason.lower()
    if "size mismatch" in text or "stride mismatch" in text or "dimensionality" in text:
        return (
            "an input's shape changes from call to call: mark that dimension dynamic "
            "(torch._dynamo.mark_dynamic(tensor, dim) before the call, or "
            "torch.compile(dynamic=True)), or pad batches to one shape (drop_last=True)"
        )
    if "dtype mismatch" in text or "device mismatch" in text or "requires_grad" in text:
        return (
            "an input's dtype, device or requires_grad changes: pass inputs of one kind "
            "(cast them before the call)"
        )
    if "___check_obj_id" in text or "id(" in text or "___check_type_id" in text:
        return (
            "a different object (a new module, function or class instance) reaches the "
            "compiled code each time: build it once and reuse it"
        )
    if re.search(r"==\s*-?[\d.]+", text) or "___check_type" in text:
        return (
            "a Python number the graph depends on changes (a step count, a length, a "
            "hyperparameter): pass it as a tensor, or mark it dynamic"
        )
    return (
        "change what the guard checks into something fixed, or mark it dynamic "
        "(torch._dynamo.mark_dynamic, torch.compile(dynamic=True))"
    )
