"""``TrackerCallback``: a Hugging Face ``TrainerCallback`` that records into the tracker.

    from tracker.integrations.transformers import TrackerCallback

    callback = TrackerCallback(project="tiny-bert")
    args = TrainingArguments(..., report_to="none")
    trainer = Trainer(model, args, ..., callbacks=[callback])
    trainer.train(resume_from_checkpoint=callback.resume_checkpoint())

* At train begin the run starts with the config ``{"args": TrainingArguments.to_dict(),
  "model": model.config.to_dict()}`` (values the tracker cannot store as config become their
  ``str()``, see :func:`tracker.integrations.common.to_config`).
* ``on_log`` -> ``run.log`` at ``state.global_step``: the training logs (``loss``,
  ``learning_rate``, ``grad_norm``, ...) and the evaluation ones (``eval_loss``, ...), numbers
  only, keys mapped by :func:`tracker.integrations.common.map_key` -- the same values and
  steps as ``report_to="mlflow"``.
* ``on_save`` -> the ``checkpoint-<step>/`` folder recorded with
  :meth:`tracker.client.run.Run.record_checkpoint` (a directory digest, see
  :mod:`tracker.filedigest`) and the last value of every metric logged so far.
* ``on_train_end`` finishes the run (``finish=False`` keeps it open, e.g. for a final
  ``trainer.evaluate()``; call ``callback.finish()`` then).
* Only the world process zero records (``state.is_world_process_zero``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from transformers import TrainerCallback

from tracker.client.run import Run
from tracker.integrations.common import KeyMapper, numeric_metrics, to_config
from tracker.rules.config import merge_config

__all__ = ["TrackerCallback"]


class TrackerCallback(TrainerCallback):  # type: ignore[misc]  # an untyped base class
    """Record a ``transformers.Trainer`` run in the tracker.

    Args:
        project, name, config, tags: as for :func:`tracker.init` (``config`` is merged over
            the trainer's; inside a queued job the submitted config wins).
        uri: the store or dashboard URI (default ``$TRACKER_URI``).
        run: an existing run to record into (not finished by the callback).
        log_checkpoints: record each saved ``checkpoint-<step>/`` folder (default True).
        finish: finish the run at train end (default True).
        init_options: further keyword arguments for :func:`tracker.init`.
    """

    def __init__(
        self,
        project: str | None = None,
        name: str | None = None,
        config: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        *,
        uri: str | None = None,
        run: Run | None = None,
        log_checkpoints: bool = True,
        finish: bool = True,
        **init_options: Any,
    ) -> None:
        self._project = project
        self._name = name
        self._config = to_config(config)
        self._tags = tuple(tags)
        self._uri = uri
        self._init_options = init_options
        self.run = run
        self._owns_run = run is None
        self._log_checkpoints = log_checkpoints
        self._finish = finish
        self._keys = KeyMapper()
        self._last: dict[str, Any] = {}

    # ------------------------------------------------------------------ the run

    def _setup(self, args: Any, state: Any, model: Any) -> Run | None:
        if not state.is_world_process_zero:
            return None
        if self.run is not None and (self.run.finished or not self._owns_run):
            return self.run
        config = self._setup_config(args, model)
        if self.run is None:
            import tracker

            self.run = tracker.init(
                self._project, self._name, config, self._tags, uri=self._uri, **self._init_options
            )
        return self.run

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       **kwargs: Any) -> None:  # fmt: skip
        if self.run is None:
            self._setup(args, state, model)
        elif not self._owns_run and state.is_world_process_zero and self.run.active:
            merged = merge_config(self._setup_config(args, model), self.run.config)
            if merged != self.run.config:
                self.run.set_config(merged)

    def _setup_config(self, args: Any, model: Any) -> dict[str, Any]:
        config: dict[str, Any] = {"args": to_config(args.to_dict())}
        model_config = getattr(model, "config", None)
        if model_config is not None and hasattr(model_config, "to_dict"):
            config["model"] = to_config(model_config.to_dict())
        return merge_config(config, self._config)

    # ----------------------------------------------------------------- metrics

    def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None,
               model: Any = None, **kwargs: Any) -> None:  # fmt: skip
        if not state.is_world_process_zero or not logs:
            return
        run = self.run if self.run is not None else self._setup(args, state, model)
        if run is None or run.finished or not run.active:
            return
        values = numeric_metrics(logs, self._keys)
        if values:
            run.log(values, step=state.global_step)
            self._last.update(values)

    # ------------------------------------------------------------- checkpoints

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        run = self.run
        if not (self._log_checkpoints and state.is_world_process_zero and run is not None):
            return
        if run.finished or not run.active:
            return
        folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        if os.path.isdir(folder):
            run.record_checkpoint(folder, state.global_step, dict(self._last))

    def last_verified_checkpoint(self) -> str | None:
        """The newest ``checkpoint-<step>/`` of this callback's run (or, inside a job, of
        the job's run) that still matches its digest; None when there is none."""
        import tracker

        if self.run is not None:
            found = self.run.latest_checkpoint()
        elif os.environ.get("TRACKER_RUN_ID", "").isdigit():
            found = tracker.latest_checkpoint(int(os.environ["TRACKER_RUN_ID"]), uri=self._uri)
        else:
            return None
        return found.path if found is not None else None

    def resume_checkpoint(self) -> str | None:
        """The folder to pass as ``trainer.train(resume_from_checkpoint=...)``: the one the
        worker chose for a retried job, else :meth:`last_verified_checkpoint`; None for a
        fresh start."""
        import tracker

        return tracker.resume_checkpoint() or self.last_verified_checkpoint()

    # --------------------------------------------------------------- lifecycle

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._finish and state.is_world_process_zero:
            self.finish()

    def finish(self, status: str = "finished") -> None:
        """Finish the run (a run passed in is only flushed)."""
        run = self.run
        if run is None or run.finished or not run.active:
            return
        if self._owns_run:
            run.finish(status)
        else:
            run.flush()
