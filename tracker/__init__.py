"""Experiment tracking for PyTorch training.

    import tracker
    run = tracker.init(project="digits", config={"lr": 3e-4})
    tracker.log({"train/loss": loss}, step=step)
    tracker.save_checkpoint({"model": model.state_dict()}, step=step)
    tracker.finish()

``import tracker`` stays cheap: it imports neither torch nor the dashboard or runner
packages; the store and client load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracker.errors import (
    CheckpointError,
    FlushTimeout,
    InheritedRunError,
    InvalidInput,
    InvalidMetricKey,
    InvalidMetricType,
    InvalidMetricValue,
    NoActiveRun,
    NonFiniteLossError,
    NotFound,
    StoreUnavailable,
    TrackerError,
    UploadError,
    WriterError,
)

if TYPE_CHECKING:
    from tracker.client.run import Run
    from tracker.entities import CheckpointInfo

__version__ = "0.1.0"

_client: Any = None  # tracker.client, once loaded (see _active_run)


def _active_run(what: str = "tracker.log()") -> Run:
    """The active run (tracker.client.active_run). The client module is looked up once: an
    import statement in ``log()`` cost ~1.5 us a call (a package's names go through
    importlib), more than the call itself."""
    global _client
    if _client is None:
        from tracker import client

        _client = client
    return _client.active_run(what)  # type: ignore[no-any-return]


def init(*args: Any, **kwargs: Any) -> Run:
    """Start a run; see :func:`tracker.client.init` for the arguments and errors."""
    from tracker import client

    return client.init(*args, **kwargs)


def log(metrics: dict[str, Any], step: int | None = None) -> None:
    """Log metrics on the active run; see :meth:`tracker.client.run.Run.log`."""
    _active_run().log(metrics, step)


def flush(timeout: float | None = None) -> None:
    _active_run("tracker.flush()").flush(timeout)


def finish(status: str = "finished", **kwargs: Any) -> None:
    """Finish the active run (also happens at exit). No-op when no run is active.

    Raises InheritedRunError in a forked child of a process with an active run (a child
    never finishes its parent's run; see ``tracker.client.fork``)."""
    from tracker.client import fork, lifecycle

    run = lifecycle.active()
    if run is not None:
        run.finish(status, **kwargs)
    else:
        fork.raise_if_inherited("tracker.finish()")


def save_checkpoint(obj: Any, step: int | None = None, metrics: dict[str, Any] | None = None,
                    path: str | None = None) -> CheckpointInfo | None:  # fmt: skip
    """Save a checkpoint atomically on the active run; see :meth:`Run.save_checkpoint`
    (None when the disk or the store failed and the run is not strict)."""
    return _active_run().save_checkpoint(obj, step, metrics, path)


def latest_checkpoint(
    run: Run | int | None = None, *, uri: str | None = None
) -> CheckpointInfo | None:
    """The newest checkpoint of a run whose file exists and matches its sha256, or None."""
    from tracker.client import active_run, latest_verified_checkpoint, sink_for_uri

    if run is None:
        run = active_run()
    if isinstance(run, int):
        sink = sink_for_uri(uri)
        try:
            return latest_verified_checkpoint(sink, run)
        finally:
            sink.close()
    return run.latest_checkpoint()


def resume_checkpoint() -> str | None:
    """Path of the checkpoint a retried job should resume from (set by the worker), or None."""
    from tracker.client import resume_checkpoint as _resume

    return _resume()


def watch(model: Any, optimizer: Any = None, scaler: Any = None, every: int = 50,
          **kwargs: Any) -> Any:  # fmt: skip
    """Log gradient/parameter/update/AMP/compile health; see :func:`tracker.client.watch.watch`."""
    from tracker.client.watch import watch as _watch

    return _watch(model, optimizer, scaler, every, **kwargs)


def log_artifact(path: Any, name: str | None = None) -> None:
    """Store a file or a directory on the active run; see :meth:`Run.log_artifact`."""
    _active_run("tracker.log_artifact()").log_artifact(path, name)


def log_text(name: str, text: str) -> None:
    """Store a text as an artifact of the active run; see :meth:`Run.log_text`."""
    _active_run("tracker.log_text()").log_text(name, text)


def log_dict(name: str, obj: Any) -> None:
    """Store a dict as JSON or YAML (by ``name``'s extension); see :meth:`Run.log_dict`."""
    _active_run("tracker.log_dict()").log_dict(name, obj)


def log_image(key: str, image: Any, step: int | None = None, caption: str | None = None,
              **kwargs: Any) -> None:  # fmt: skip
    """Store an image (array, tensor, PIL image, file, batch as a grid); see
    :meth:`Run.log_image`."""
    _active_run("tracker.log_image()").log_image(key, image, step, caption, **kwargs)


def log_figure(key: str, figure: Any, step: int | None = None) -> None:
    """Store a matplotlib or plotly figure; see :meth:`Run.log_figure`."""
    _active_run("tracker.log_figure()").log_figure(key, figure, step)


def log_histogram(key: str, values: Any, step: int | None = None, bins: int = 64) -> None:
    """Store a distribution as counts and edges; see :meth:`Run.log_histogram`."""
    _active_run("tracker.log_histogram()").log_histogram(key, values, step, bins)


def __getattr__(name: str) -> Any:
    if name == "config":
        from tracker.client import lifecycle

        run = lifecycle.active()
        return run.config if run is not None else {}
    if name == "run":
        from tracker.client import lifecycle

        return lifecycle.active()
    raise AttributeError(f"module 'tracker' has no attribute {name!r}")


__all__ = [
    "CheckpointError",
    "FlushTimeout",
    "InheritedRunError",
    "InvalidInput",
    "InvalidMetricKey",
    "InvalidMetricType",
    "InvalidMetricValue",
    "NoActiveRun",
    "NonFiniteLossError",
    "NotFound",
    "StoreUnavailable",
    "TrackerError",
    "UploadError",
    "WriterError",
    "finish",
    "flush",
    "init",
    "latest_checkpoint",
    "log",
    "log_artifact",
    "log_dict",
    "log_figure",
    "log_histogram",
    "log_image",
    "log_text",
    "resume_checkpoint",
    "save_checkpoint",
    "watch",
]
