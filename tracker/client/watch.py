"""``tracker.watch(model, optimizer=None, scaler=None, every=50)``: training-health series.

Every ``every``-th optimizer step (counted by an optimizer step hook), it logs on the active
run, at the step the run logs next (the last logged step + 1, i.e. the step a loop that logs
after ``optimizer.step()`` is on):

* ``grad/global_norm`` -- L2 norm of all gradients (read before the step, after a GradScaler
  unscaled them), and ``grad/norm/<param name>`` for the **top 5** parameters by gradient norm
  at that step (``top=``; a non-finite norm ranks first, so the parameter where a NaN starts
  is named). Only the offenders are stored, not a fixed set: a model with 1,000 tensors would
  otherwise add 1,000 series. Names are those of the original module (a ``torch.compile``'d
  or DDP-wrapped model is unwrapped: no ``_orig_mod.``/``module.`` prefix).
* ``param/global_norm`` -- L2 norm of all parameters before the step.
* ``update/ratio`` -- ||parameters after - before|| / ||parameters before|| over the step
  (needs the optimizer; the parameters are copied once on watched steps only).
* ``amp/loss_scale`` and ``amp/skipped_steps`` (cumulative steps a GradScaler skipped for
  inf/NaN gradients) when ``scaler`` is given and enabled: read after ``scaler.update()``,
  every ``every``-th update and after every update that followed a skipped step, so the
  series keeps going when every step is skipped (GradScaler then never calls
  ``optimizer.step()``, the other series' clock).
* With ``histograms=True`` (off by default): the distribution of every parameter
  (``weights/<param name>``) and of its gradient (``grads/<param name>``) as histograms
  (``Run.log_histogram``, 64 bins) on watched steps; on a GPU reduced on the device without
  a sync (see ``tracker.client.media.prepare_device_histogram``), on the CPU copied and
  counted in the encoder thread.
* ``compile/recompiles`` and ``compile/graph_breaks`` (cumulative) when ``torch._dynamo`` was
  already imported: graph breaks from ``torch._dynamo.utils.counters["graph_break"]``,
  recompiles from Dynamo's compile-start callbacks (a compile id ``F/N`` with N > 0 is the
  N-th recompile of frame F), counted from the ``watch()`` call on; and a run event
  ``recompile_limit`` when a frame reaches torch's recompile limit, naming the frame and the
  guard failure torch gave as the reason (:mod:`tracker.client.compile_watch`), which the
  doctor's ``recompiles`` hint quotes.

Cost: a Python call per optimizer step (a counter); on a watched step the norms are computed
on the device with ``torch._foreach_norm`` and read back with **one** device sync. Without an
optimizer, the count is of the model's forward calls and the gradients are whatever the
parameters hold at that forward (none, if the loop zeroes them before it: pass the optimizer).

Distributed: under ``torch.distributed`` with rank != 0, and on a follower run, ``watch()``
returns a watch that does nothing. torch is imported only when ``watch()`` is called.

Failure modes: ``watch()`` raises ``InvalidInput`` (naming the argument) for a model that is
not an ``nn.Module``, an ``every`` < 1, or an optimizer without step hooks; a failure while
computing the norms is reported once as a run event (``warning``) and the watch stops.
"""

from __future__ import annotations

import math
import re
import sys
import time
from typing import Any

from tracker.client.compile_watch import CompileWatch
from tracker.client.values import convert_value, is_tensor
from tracker.errors import InvalidInput
from tracker.rules.keys import MAX_KEY_LENGTH, check_key

DEFAULT_TOP = 5


class Watch:
    """What ``watch()`` returns: ``remove()`` takes the hooks off (also done at finish)."""

    def __init__(self) -> None:
        self._handles: list[Any] = []
        self.steps = 0  # optimizer steps (or forward calls) seen
        self.active = False

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.active = False


class _Watcher(Watch):
    def __init__(
        self, run: Any, module: Any, optimizer: Any, scaler: Any, every: int, top: int,
        histograms: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        import torch

        self._histograms = histograms
        self._torch = torch
        self._run = run
        self._every = every
        self._top = top
        self._named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._optimizer = optimizer
        self._scaler = scaler if scaler is not None and _scaler_enabled(scaler) else None
        self._scaler_steps = 0
        self._skipped_logged = 0
        self._optimizer_steps = 0
        self._before: Any = None  # (param norms, grad stuff) of a watched step in progress
        self._compile = CompileWatch(run)
        self.active = True
        if optimizer is not None:
            if not hasattr(optimizer, "register_step_pre_hook"):
                raise InvalidInput(
                    "watch(optimizer=...): needs a torch.optim.Optimizer (with step hooks), "
                    f"not a {type(optimizer).__name__}",
                    field="optimizer",
                )
            self._handles.append(optimizer.register_step_pre_hook(self._pre_step))
            self._handles.append(optimizer.register_step_post_hook(self._post_step))
        else:
            self._handles.append(module.register_forward_pre_hook(self._on_forward))
        if self._scaler is not None:
            self._wrap_scaler(self._scaler)
        if self._compile.start():
            self._handles.append(_Undo(self._compile.remove))

    # ------------------------------------------------------------------ hooks

    def _on_forward(self, module: Any, args: Any) -> None:
        self.steps += 1
        if self.steps % self._every == 0 and self._ok():
            if self._histograms:
                self._guarded(self._log_histograms)
            self._guarded(lambda: self._emit(self._measure(), None))

    def _pre_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.steps += 1
        self._optimizer_steps += 1
        if self.steps % self._every == 0 and self._ok():
            self._guarded(self._start_watched_step)

    def _post_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        before, self._before = self._before, None
        if before is not None:
            self._guarded(lambda: self._finish_watched_step(before))

    def _ok(self) -> bool:
        run = self._run
        return self.active and run.active and not run.finished

    def _guarded(self, work: Any) -> None:
        try:
            work()
        except Exception as exc:  # a health read must never break training: report, stop
            self.remove()
            try:
                self._run.event("warning", f"watch() stopped: {type(exc).__name__}: {exc}")
            except Exception as report_exc:  # the store is down too: say it on stderr
                sys.stderr.write(f"tracker: watch() stopped: {exc!r} ({report_exc!r})\n")

    # ------------------------------------------------------------------ measuring

    def _log_histograms(self) -> None:
        """Weights and gradients of every parameter as histograms, at the run's next step."""
        run = self._run
        step = run._step
        for name, p in self._named:
            suffix = _grad_key(name).removeprefix("grad/norm/")
            run.log_histogram(f"weights/{suffix}", p.detach(), step=step)
            if p.grad is not None and not p.grad.is_sparse:
                run.log_histogram(f"grads/{suffix}", p.grad.detach(), step=step)

    def _start_watched_step(self) -> None:
        if self._histograms:
            self._log_histograms()
        measured = self._measure()
        params = [p for _, p in self._named]
        snapshot = [p.detach().clone() for p in params]
        self._before = (measured, snapshot)

    def _finish_watched_step(self, before: Any) -> None:
        measured, snapshot = before
        torch = self._torch
        params = [p.detach() for _, p in self._named]
        with torch.no_grad():
            deltas = torch._foreach_sub(params, snapshot)
            update = _global(torch, torch._foreach_norm(deltas))
        self._emit(measured, update)

    def _measure(self) -> dict[str, Any]:
        """Norms as device tensors (no sync yet)."""
        torch = self._torch
        with torch.no_grad():
            params = [p.detach() for _, p in self._named]
            grads = [
                (name, p.grad.detach())
                for name, p in self._named
                if p.grad is not None and not p.grad.is_sparse
            ]
            out: dict[str, Any] = {"param": _global(torch, torch._foreach_norm(params))}
            if grads:
                norms = torch._foreach_norm([g for _, g in grads])
                out["grad_names"] = [name for name, _ in grads]
                out["grad_norms"] = torch.stack([n.to(norms[0].device) for n in norms])
        return out

    def _emit(self, measured: dict[str, Any], update: Any) -> None:
        torch = self._torch
        tensors = [measured["param"].float().reshape(1)]
        if update is not None:
            tensors.append(update.float().reshape(1).to(tensors[0].device))
        if "grad_norms" in measured:
            tensors.append(measured["grad_norms"].float().to(tensors[0].device))
        values = torch.cat(tensors).tolist()  # the one device sync of a watched step
        items: dict[str, float] = {"param/global_norm": values.pop(0)}
        param_norm = items["param/global_norm"]
        if update is not None:
            norm = values.pop(0)
            items["update/ratio"] = norm / param_norm if param_norm else math.inf
        if "grad_norms" in measured:
            items.update(_grad_items(measured["grad_names"], values, self._top))
        items.update(self._compile.counters())
        run = self._run
        run._put((run._step, time.time(), items, False))

    # ------------------------------------------------------------------ AMP

    def _wrap_scaler(self, scaler: Any) -> None:
        """Count ``scaler.step()`` calls and read the scale after ``scaler.update()``
        (instance attributes, removed by ``remove()``)."""
        original_step, original_update = scaler.step, scaler.update

        def step(*args: Any, **kwargs: Any) -> Any:
            self._scaler_steps += 1
            return original_step(*args, **kwargs)

        def update(*args: Any, **kwargs: Any) -> Any:
            out = original_update(*args, **kwargs)
            if self._ok():
                self._guarded(self._after_update)
            return out

        scaler.step = step
        scaler.update = update

        def unwrap() -> None:
            for name, ours in (("step", step), ("update", update)):
                if scaler.__dict__.get(name) is ours:
                    delattr(scaler, name)

        self._handles.append(_Undo(unwrap))

    def _after_update(self) -> None:
        """The scale and the skipped steps, every ``every``-th update and after each skip.

        Skips are host counts (GradScaler's own check of the gradients already synced); the
        scale stays a device tensor until the writer reads it (no sync here)."""
        skipped = max(self._scaler_steps - self._optimizer_steps, 0)
        if skipped == self._skipped_logged and self._scaler_steps % self._every:
            return
        scale = getattr(self._scaler, "_scale", None)
        if scale is None:
            return
        self._skipped_logged = skipped
        value = convert_value("amp/loss_scale", scale.detach().clone().reshape(()))
        items = {"amp/loss_scale": value, "amp/skipped_steps": float(skipped)}
        run = self._run
        run._put((run._step, time.time(), items, is_tensor(value)))


class _Undo:
    """A hook handle that runs ``undo`` once on ``remove()``."""

    def __init__(self, undo: Any) -> None:
        self._undo = undo

    def remove(self) -> None:
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()


def _global(torch: Any, norms: list[Any]) -> Any:
    if not norms:
        return torch.zeros(())
    device = norms[0].device
    return torch.linalg.vector_norm(torch.stack([n.float().to(device) for n in norms]))


def _grad_items(names: list[str], norms: list[float], top: int) -> dict[str, float]:
    """``grad/global_norm`` and the ``top`` largest per-parameter norms (non-finite first)."""
    total = math.sqrt(math.fsum(n * n for n in norms)) if norms else 0.0
    if any(not math.isfinite(n) for n in norms):
        total = math.nan if any(math.isnan(n) for n in norms) else math.inf
    ranked = sorted(
        zip(names, norms, strict=True),
        key=lambda item: math.inf if not math.isfinite(item[1]) else item[1],
        reverse=True,
    )
    items = {"grad/global_norm": total}
    for name, norm in ranked[:top]:
        items[_grad_key(name)] = norm
    return items


def _grad_key(name: str) -> str:
    """``grad/norm/<name>`` as a valid metric key (a ModuleDict key may hold any character)."""
    key = f"grad/norm/{name}"
    try:
        return check_key(key)
    except InvalidInput:
        cleaned = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9_.\-]+", "_", name))
        key = f"grad/norm/{cleaned.strip('._') or 'param'}"[:MAX_KEY_LENGTH].rstrip("/")
        try:
            return check_key(key)
        except InvalidInput:
            return "grad/norm/param"


def _scaler_enabled(scaler: Any) -> bool:
    enabled = getattr(scaler, "is_enabled", None)
    return bool(enabled()) if callable(enabled) else True


def _unwrap(model: Any) -> Any:
    """The module whose parameter names the user wrote (torch.compile and DDP unwrapped)."""
    for _ in range(4):
        inner = getattr(model, "_orig_mod", None)
        if inner is None and type(model).__name__ in (
            "DistributedDataParallel",
            "DataParallel",
            "FullyShardedDataParallel",
        ):
            inner = getattr(model, "module", None)
        if inner is None:
            return model
        model = inner
    return model


def _distributed_rank() -> int:
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return 0
    try:
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # a broken process group: not provably rank 0, so watch nothing
        return -1
    return 0


def watch(
    model: Any,
    optimizer: Any = None,
    scaler: Any = None,
    every: int = 50,
    *,
    top: int = DEFAULT_TOP,
    run: Any = None,
    histograms: bool = False,
) -> Watch:
    """Log gradient, parameter, update, AMP and compile health every ``every`` steps.

    See the module docstring for the keys. Returns a :class:`Watch` (``remove()`` unhooks).

    Raises:
        NoActiveRun: no run is active and none is given.
        InvalidInput: ``model`` is not an ``nn.Module``, ``every`` or ``top`` < 1, or the
            optimizer has no step hooks.
    """
    if type(every) is not int or every < 1:
        raise InvalidInput(f"watch(every={every!r}): every must be an int >= 1", field="every")
    if type(top) is not int or top < 1:
        raise InvalidInput(f"watch(top={top!r}): top must be an int >= 1", field="top")
    if run is None:
        from tracker.client import active_run

        run = active_run()
    import torch

    if not isinstance(model, torch.nn.Module):
        raise InvalidInput(
            f"watch(model=...): needs a torch.nn.Module, not a {type(model).__name__}",
            field="model",
        )
    if not run.active or _distributed_rank() != 0:
        return Watch()
    watcher = _Watcher(run, _unwrap(model), optimizer, scaler, every, top, bool(histograms))
    run._watches.append(watcher)
    return watcher


__all__ = ["DEFAULT_TOP", "Watch", "watch"]
