"""The ``compile/*`` series of ``tracker.watch`` and torch's reason when a frame reaches its
recompile limit.

* ``compile/graph_breaks``: ``torch._dynamo.utils.counters["graph_break"]`` (cumulative).
* ``compile/recompiles``: Dynamo's compile-start callbacks; a compile id ``F/N`` with N > 0
  is the N-th recompile of frame F, counted from the ``watch()`` call on.
* ``compile/frame_recompiles_max``: the most recompiles of any one frame (the doctor judges
  the limit by it: several frames recompiling a few times each are not one at the limit).
* When frame F starts its ``recompile_limit``-th compile (torch's limit, read from
  ``torch._dynamo.config`` at that moment: the frame is then at the limit, and the next
  guard failure makes Dynamo run it without compiling), one run event of kind
  ``recompile_limit`` (:mod:`tracker.rules.recompile_reasons`) names the function, its
  file and first line, the compiles, the limit, the run's step and the guard failure torch
  gave for that recompile. Dynamo appends every recompile's guard failure reasons to
  ``torch._dynamo.utils.guard_failures`` (per code object, newest cache entry first)
  whatever the logging settings; the first reason added since the frame's previous compile
  is the one ``TORCH_LOGS=recompiles`` prints and torch's "hit config.recompile_limit"
  warning calls the last reason. Torch builds its recompiles *log* only when that log is
  enabled (which prints it), so reading the dict leaves the user's logging untouched.

Cost: nothing per training step. On a recompile (itself tens of milliseconds to minutes) a
scan of ``guard_failures`` (one entry per compiled code object); the event is queued for the
writer thread, so no store write happens inside the compile.

Failure modes: nothing here raises into Dynamo (an exception in its callback would fail the
user's compile). A failure to read the reasons is reported once (``Failsafe``, kind
``compile_reasons``) and the counts go on; a torch without compile callbacks gives graph
breaks only, one without ``guard_failures`` gives counts and frames without a reason.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from tracker.rules.recompile_reasons import RECOMPILE_LIMIT_EVENT, RecompileFact, clean_reason

DEFAULT_RECOMPILE_LIMIT = 8  # torch._dynamo.config.recompile_limit's default


class CompileWatch:
    """Counts recompiles and reports frames at torch's recompile limit for one run.

    ``start()`` registers the callback (False when torch has none); ``remove()`` takes it off.
    """

    def __init__(self, run: Any) -> None:
        self._run = run
        self.recompiles = 0
        self._callback: Any = None
        self._handler: Any = None
        self._reason_lengths: dict[Any, int] = {}  # code object -> reasons already seen
        self._reported: set[str] = set()  # frame ids already reported at the limit
        self._per_frame: dict[str, int] = {}  # frame id -> its recompiles
        self._broken = False  # reading the reasons failed once: counts only from then on

    @property
    def counting(self) -> bool:
        return self._callback is not None

    def start(self) -> bool:
        if "torch._dynamo" not in sys.modules:
            return False
        try:
            from torch._dynamo.callback import callback_handler
        except ImportError:  # an older torch: graph breaks only
            return False
        self._handler = callback_handler
        self._guarded(self._reasons_added)  # what was there before watch() is not news
        callback_handler.register_start_callback(self._on_start)
        self._callback = self._on_start
        return True

    def remove(self) -> None:
        handler, self._handler = self._handler, None
        if handler is not None:
            with contextlib.suppress(ValueError):  # already removed (torch._dynamo.reset)
                handler.remove_start_callback(self._on_start)
        self._callback = None

    def counters(self) -> dict[str, float]:
        """``compile/graph_breaks`` and ``compile/recompiles`` as they stand."""
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is None:
            return {}
        counters = getattr(getattr(dynamo, "utils", None), "counters", None)
        out: dict[str, float] = {}
        if counters is not None:
            out["compile/graph_breaks"] = float(sum(counters["graph_break"].values()))
        if self._callback is not None:
            out["compile/recompiles"] = float(self.recompiles)
            out["compile/frame_recompiles_max"] = float(max(self._per_frame.values(), default=0))
        return out

    # ------------------------------------------------------------------ Dynamo's side

    def _on_start(self, args: Any) -> None:
        """Dynamo's compile-start callback: never raises (that would fail the compile)."""
        compile_id = str(getattr(args, "compile_id", ""))
        frame, _, nth = compile_id.rpartition("/")
        if not nth.isdigit() or int(nth) == 0:
            return
        self.recompiles += 1
        self._per_frame[frame] = max(self._per_frame.get(frame, 0), int(nth))
        self._guarded(lambda: self._after_recompile(frame, int(nth) + 1))

    def _after_recompile(self, frame: str, compiles: int) -> None:
        added = self._reasons_added()
        limit = _recompile_limit()
        if compiles < limit or frame in self._reported or not self._run.active:
            return
        self._reported.add(frame)
        code, reason = _pick(added, frame)
        fact = RecompileFact(
            step=int(self._run._step),
            function=str(getattr(code, "co_name", f"frame {frame}")),
            file=str(getattr(code, "co_filename", "?")),
            line=int(getattr(code, "co_firstlineno", 0) or 0),
            compiles=compiles,
            limit=limit,
            reason=clean_reason(reason),
        )
        message = (
            f"torch.compile compiled {fact.frame} {compiles} times (recompile limit {limit})"
            + (f"; last guard failure: {fact.reason}" if fact.reason else "")
        )
        self._run._failsafe.queue_event(RECOMPILE_LIMIT_EVENT, message, fact.as_event_data())

    def _reasons_added(self) -> list[tuple[Any, str]]:
        """``(code, first new reason)`` of each code object with reasons added since the last
        call: the frame that is recompiling now."""
        if self._broken:
            return []
        utils = sys.modules.get("torch._dynamo.utils")
        failures = getattr(utils, "guard_failures", None)
        if failures is None:
            return []
        added = []
        for code, reasons in list(failures.items()):
            seen = self._reason_lengths.get(code, 0)
            if len(reasons) < seen:  # torch._dynamo.reset() cleared it
                seen = 0
            if len(reasons) > seen:
                added.append((code, str(reasons[seen])))
            self._reason_lengths[code] = len(reasons)
        return added

    def _guarded(self, work: Any) -> None:
        if self._broken:
            return
        try:
            work()
        except Exception as exc:  # never into Dynamo: say it once, keep counting
            self._broken = True
            with contextlib.suppress(Exception):
                self._run._failsafe.report(
                    "compile_reasons",
                    "reading torch.compile's recompile reasons",
                    exc,
                    "compile/recompiles is still counted; the doctor's hint names no frame",
                )


def _pick(added: list[tuple[Any, str]], frame: str) -> tuple[Any, str]:
    """The code object of frame ``frame`` among those with new reasons: the one whose reason
    carries that frame's compile id (``F/N: ...``), else the only one."""
    for code, reason in added:
        if reason.startswith(f"{frame}/"):
            return code, reason
    if len(added) == 1:
        return added[0]
    return None, ""


def _recompile_limit() -> int:
    config = getattr(sys.modules.get("torch._dynamo"), "config", None)
    for name in ("recompile_limit", "cache_size_limit"):  # the older name
        value = getattr(config, name, None)
        if isinstance(value, int) and value >= 1:
            return value
    return DEFAULT_RECOMPILE_LIMIT
