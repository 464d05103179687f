"""``TrackerLogger``: a Lightning logger that records into the tracker (no MLflow needed).

    from tracker.integrations.lightning import TrackerLogger

    logger = TrackerLogger(project="digits")
    trainer = L.Trainer(logger=logger, callbacks=[ModelCheckpoint(...)])
    trainer.fit(model, data, ckpt_path=logger.resume_checkpoint())

* ``log_hyperparams`` -> the run's config (see :func:`tracker.integrations.common.to_config`).
* ``log_metrics`` -> ``run.log`` at the step Lightning passes (the trainer's global step in
  training; Lightning adds ``epoch``), keys mapped by
  :func:`tracker.integrations.common.map_key`.
* Every file ``ModelCheckpoint`` saves -> a checkpoint row through
  :meth:`tracker.client.run.Run.record_checkpoint` (size, sha256, the step it was saved at and
  the last value of every metric logged so far).
* ``resume_checkpoint()`` -> the path a retried job resumes from (the worker's
  ``TRACKER_RESUME_CHECKPOINT``, else the run's newest checkpoint that still matches its
  sha256), or None for a fresh run.
* Distributed: only global rank 0 creates the run and logs. Inside a job started by
  ``tracker worker`` the other ranks attach to the job's run as followers, whose system
  sampler reports their own GPU memory (``sys/rank{r}/gpu{i}/...``); outside a job they
  record nothing.
* ``finalize`` finishes the run: ``finished``, or ``failed`` when Lightning reports a failure.
"""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Mapping, Sequence
from typing import Any

from lightning.fabric.utilities.rank_zero import rank_zero_only
from lightning.pytorch.loggers.logger import Logger

from tracker.client.run import Run
from tracker.integrations.common import KeyMapper, numeric_metrics, to_config
from tracker.rules.config import merge_config

__all__ = ["TrackerLogger"]


class TrackerLogger(Logger):
    """Record a Lightning run in the tracker.

    Args:
        project, name, config, tags: as for :func:`tracker.init` (``config`` is merged with
            the module's hyperparameters; inside a queued job the submitted config wins).
        uri: the store or dashboard URI (default ``$TRACKER_URI``).
        run: an existing run to record into instead of starting one (it is not finished
            by the logger).
        log_checkpoints: record ``ModelCheckpoint`` files (default True).
        finish: finish the run when training ends (default True).
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
        super().__init__()
        self._project = project
        self._run_name = name
        self._config = to_config(config)
        self._tags = tuple(tags)
        self._uri = uri
        self._init_options = init_options
        self._run = run
        self._owns_run = run is None
        self._log_checkpoints = log_checkpoints
        self._finish = finish
        self._keys = KeyMapper()
        self._last: dict[str, Any] = {}  # the last value of every key logged (checkpoint rows)
        self._last_step = 0
        self._recorded: dict[str, float] = {}  # checkpoint path -> mtime recorded

    # ------------------------------------------------------------------ identity

    @property
    def name(self) -> str:
        return self._run.project if self._run is not None else (self._project or "default")

    @property
    def version(self) -> int | str:
        return self._run.id if self._run is not None else ""

    @property
    def run(self) -> Run | None:
        """The run (None before the first use on rank 0, and on other ranks outside a job)."""
        return self._run

    @property
    def experiment(self) -> Run | None:
        """The tracker run, started on first use on global rank 0."""
        if self._run is None:
            self._start()
        return self._run

    def _start(self) -> None:
        import tracker

        rank = getattr(rank_zero_only, "rank", 0)  # the global rank Lightning set
        if rank != 0:
            if not os.environ.get("TRACKER_RUN_ID"):
                return  # outside a job there is no run to attach to
            os.environ.setdefault("RANK", str(rank))  # a follower: its own memory keys
        self._run = tracker.init(
            self._project,
            self._run_name,
            self._config,
            self._tags,
            uri=self._uri,
            **self._init_options,
        )

    # ------------------------------------------------------------------- logging

    def log_hyperparams(
        self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any
    ) -> None:
        config = {**self._config, **to_config(params)}
        if self._run is None:  # the usual case: the run starts with the hyperparameters
            self._config = config
            self._start()
            return
        run = self._run
        if run.active and config:
            merged = merge_config(config, run.config)  # a job's submitted config wins
            if merged != run.config:
                run.set_config(merged)

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        run = self.experiment
        if run is None or not run.active:
            return
        values = numeric_metrics(metrics, self._keys)
        if not values:
            return
        run.log(values, step=step)
        self._last.update(values)
        self._last_step = step if step is not None else self._last_step + 1

    # --------------------------------------------------------------- checkpoints

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        run = self.experiment
        if not self._log_checkpoints or run is None or not run.active:
            return
        path = getattr(checkpoint_callback, "_last_checkpoint_saved", None) or getattr(
            checkpoint_callback, "last_model_path", ""
        )
        if not path or not os.path.isfile(path):
            return
        mtime = os.stat(path).st_mtime
        if self._recorded.get(path) == mtime:
            return  # already recorded (a link, or the same file reported twice)
        step = getattr(checkpoint_callback, "_last_global_step_saved", None)
        metrics = dict(self._last)
        score = getattr(checkpoint_callback, "current_score", None)
        monitor = getattr(checkpoint_callback, "monitor", None)
        if monitor and score is not None:
            metrics.update(numeric_metrics({monitor: score}, self._keys))
        run.record_checkpoint(path, step if isinstance(step, int) else self._last_step, metrics)
        self._recorded[path] = mtime

    def last_verified_checkpoint(self) -> str | None:
        """The newest checkpoint of this logger's run (or, inside a job, of the job's run)
        whose file still matches its sha256; None when there is none."""
        import tracker

        if self._run is not None:
            found = self._run.latest_checkpoint()
        elif os.environ.get("TRACKER_RUN_ID", "").isdigit():
            found = tracker.latest_checkpoint(int(os.environ["TRACKER_RUN_ID"]), uri=self._uri)
        else:
            return None
        return found.path if found is not None else None

    def resume_checkpoint(self) -> str | None:
        """The checkpoint to pass as ``trainer.fit(ckpt_path=...)``: the one the worker chose
        for a retried job, else :meth:`last_verified_checkpoint`; None for a fresh start."""
        import tracker

        return tracker.resume_checkpoint() or self.last_verified_checkpoint()

    # ----------------------------------------------------------------- lifecycle

    def save(self) -> None:
        """Points are written by the run's writer thread; nothing to do here."""

    def finalize(self, status: str) -> None:
        run = self._run
        if run is None or not run.active or run.finished:
            return
        if not (self._finish and self._owns_run):
            run.flush()
            return
        if status == "success" or status == "finished":
            run.finish("finished")
        else:
            run.finish("failed", error=f"Lightning ended with status {status!r}")
