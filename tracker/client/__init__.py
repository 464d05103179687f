"""The client library: init / log / finish / save_checkpoint / watch, the writer and the sinks.

Series every run records without user code (the keys the health detectors read):

* ``sys/step_time_s`` -- wall seconds per step between ``log()`` calls that advance the step
  (divided by the step gap; no device sync); throughput is ``1 / sys/step_time_s``.
* ``sys/rss_bytes`` -- host RSS at the step of a ``log()`` call at most once a second, plus
  one sample at ``init()`` (step 0) and one at finish (the last step); the CUDA allocator's
  ``sys/gpu{i}/...`` counters with it. Both in :mod:`tracker.client.signals`; off with
  ``auto_signals=False`` or with the system metrics (``system_interval=None``).
* Console output of a run started by hand, teed into ``run_log_chunks`` (bounded; off under a
  worker or with ``capture_console=False``): :mod:`tracker.client.console`.
* Exit status: ``sys.exit(N)`` with N != 0 or an uncaught exception ends the run ``failed``
  with exit code N (1), classified on its console output: :mod:`tracker.client.lifecycle`.

With ``tracker.watch(model, optimizer, scaler, every=50)`` (:mod:`tracker.client.watch`):
``grad/global_norm``, ``grad/norm/<param>`` (top 5 by norm), ``param/global_norm``,
``update/ratio``, ``amp/loss_scale``, ``amp/skipped_steps``, ``compile/recompiles``,
``compile/graph_breaks``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tracker.client import announce, fork, lifecycle
from tracker.client.failsafe import strict_mode
from tracker.client.nonfinite import nonfinite_policy
from tracker.client.overflow import memory_cap_bytes
from tracker.client.run import Run, latest_verified_checkpoint, resolve_exit_timeout
from tracker.client.sinks import Sink, SqlSink, sink_for_uri
from tracker.entities import AttemptFence, RunInfo
from tracker.errors import InvalidInput, NoActiveRun
from tracker.rules.config import merge_config, normalize_config
from tracker.rules.tags import check_tags

ENV_RUN_ID = "TRACKER_RUN_ID"
ENV_JOB_ID = "TRACKER_JOB_ID"
ENV_ATTEMPT = "TRACKER_ATTEMPT"
ENV_CONFIG = "TRACKER_CONFIG"
ENV_PROJECT = "TRACKER_PROJECT"
ENV_RESUME = "TRACKER_RESUME_CHECKPOINT"


def init(
    project: str | None = None,
    name: str | None = None,
    config: Mapping[str, Any] | Any | None = None,
    tags: Sequence[str] = (),
    *,
    uri: str | None = None,
    sink: Sink | None = None,
    quiet: bool | None = None,
    **options: Any,
) -> Run:
    """Start a run (or attach to the one a queued job created) and make it the active run.

    ``options`` go to :class:`Run` (``flush_interval``, ``system_interval`` -- ``None``
    turns system metrics off --, ``log_gpu_memory``, ``checkpoint_dir``, ``max_memory_mb``
    -- the memory cap of unstored points in MiB, default ``$TRACKER_MAX_MEMORY_MB`` or 256;
    past it points go to disk --, ``auto_signals``
    -- step time and RSS per step, see :mod:`tracker.client.signals`; default: on when
    system metrics are --, ``capture_console`` -- tee stdout/stderr of a run started by hand
    into the store, default True, see :mod:`tracker.client.console` --,
    ``console_max_chars`` -- newest console characters a run keeps, default 4 Mi --,
    ``on_nonfinite``
    -- ``"stop"`` raises ``NonFiniteLossError`` from ``log()`` at the first persistent
    NaN/Inf of a loss, see :mod:`tracker.client.nonfinite` --, ``strict`` -- raise the
    tracker's own failures (an upload, the store, the disk, ...) instead of warning once and
    keeping the data, default ``$TRACKER_STRICT`` or off, see
    :mod:`tracker.client.failsafe` --, ...).
    Inside a job started by ``tracker worker``, the run id and the submitted config come
    from the environment; the submitted values override the ``config`` given here.

    Prints one line on stderr: the run, its store, its dashboard page when a ``tracker ui``
    serves that store (:mod:`tracker.client.announce`); ``quiet=True`` or ``TRACKER_QUIET=1``
    silences it. With no ``uri`` and no ``TRACKER_URI``, the store is found like git finds its
    repository (:mod:`tracker.discovery`).

    Raises:
        InvalidInput: a config value or tag cannot be stored (the message names it).
        StoreUnavailable / SchemaError: strict only (else an offline run is returned, see
            :mod:`tracker.client.offline`): the store cannot be opened or create the run;
            always: the run of a job a worker started cannot be attached to.
    """
    memory_cap_bytes(options.get("max_memory_mb"))  # a bad cap fails before a run exists
    nonfinite_policy(options.get("on_nonfinite", "record"))  # before any run is created
    strict_mode(options.get("strict"))  # a bad TRACKER_STRICT too
    previous = lifecycle.active()
    if previous is not None and not previous.finished:
        previous.finish()
    # Checked before the run is created: a bad value must not leave a run behind.
    options["exit_timeout"] = resolve_exit_timeout(options.get("exit_timeout"))
    cfg = normalize_config(dict(config) if isinstance(config, Mapping) else config or {})
    tag_list = check_tags(tags)
    project = project or os.environ.get(ENV_PROJECT) or "default"
    place = announce.place_before_open(uri, sink is not None)  # before it may be created
    rank = int(os.environ.get("RANK", "0") or 0)
    attrs = {"host": socket.gethostname(), "pid": os.getpid(), "git_commit": _git_commit()}
    env_run = os.environ.get(ENV_RUN_ID)
    command = [sys.executable, *sys.argv]  # shown, never launched
    try:
        sink = sink or sink_for_uri(uri)
        info = _create_or_attach(sink, env_run, rank, project, name, cfg, tag_list, command, attrs)
    except _CALLERS_ERRORS:
        raise
    except Exception as exc:
        if env_run or rank != 0 or strict_mode(options.get("strict")):
            raise  # strict, or a worker's job (its run exists; the worker reports it)
        # The store down at start: an offline run, kept in a spill file (tracker.client.offline)
        return _start_offline(exc, project, name, cfg, tag_list, command, attrs, options)
    if rank != 0:
        options["system_interval"] = None
    if rank == 0:  # before Run() starts the console capture: the line is for the terminal
        announce.announce(info.id, info.name, place, quiet)
    job = os.environ.get(ENV_JOB_ID)
    run = Run(sink, info, job_id=int(job) if job else None, active=rank == 0, **options)
    lifecycle.set_active(run)
    return run


# Raised by init() whatever ``strict`` says: the caller's own input (a config value, a tag, a
# URI of no known kind, a value the store refuses).
_CALLERS_ERRORS = (InvalidInput,)


def _create_or_attach(
    sink: Sink, env_run: str | None, rank: int, project: str, name: str | None,
    cfg: dict[str, Any], tags: list[str], command: list[str], attrs: dict[str, Any],
) -> RunInfo:  # fmt: skip
    """The run's info: created in the store (rank 0 of a run started by hand), attached to
    (a worker's job: its submitted config wins), or a follower rank's copy (stores nothing).

    Raises:
        whatever the sink raises (StoreUnavailable, SchemaError, a driver's error, ...).
    """
    if env_run and hasattr(sink, "fence"):  # SqlSink, HttpSink: writes fenced by attempt
        sink.fence = _job_attempt()  # type: ignore[attr-defined]
    if env_run:
        overrides = normalize_config(json.loads(os.environ.get(ENV_CONFIG) or "{}"))
        cfg = merge_config(cfg, overrides)
        if rank == 0:  # the job's run keeps the submitted argv as its command
            return sink.start_run(int(env_run), cfg, **attrs)
        return RunInfo(int(env_run), project, name or "", "running", cfg, tags, time.time())
    if rank != 0:
        return RunInfo(-1, project, name or "", "running", cfg, tags, time.time())
    return sink.create_run(project, name, cfg, tags, command=command, **attrs)


def _start_offline(
    exc: Exception, project: str, name: str | None, cfg: dict[str, Any], tags: list[str],
    command: list[str], attrs: dict[str, Any], options: dict[str, Any],
) -> Run:  # fmt: skip
    """The offline run of a store that failed at start (:mod:`tracker.client.offline`).

    Raises:
        OSError: its spill file cannot be written either (nothing could keep its data).
    """
    from tracker.client.failsafe import kept_in
    from tracker.client.offline import OFFLINE_RUN_ID, OfflineSink, header, spill_dir_of, spill_file

    path = spill_file(spill_dir_of(options.get("spill_dir")))
    sink = OfflineSink(path, header(project, name, cfg, tags, command=command, **attrs))
    info = RunInfo(OFFLINE_RUN_ID, project, name or "", "running", cfg, tags, time.time())
    run = Run(sink, info, job_id=None, active=True, **options)
    run._failsafe.report(
        "init", "creating the run in the store", exc,
        kept_in(path) + " (the run is created then; everything it logs goes there)",
    )  # fmt: skip
    lifecycle.set_active(run)
    return run


def active_run(what: str = "tracker.log()") -> Run:
    """The active run. Raises NoActiveRun (InheritedRunError in a forked child), naming
    ``what`` was called."""
    run = lifecycle.active()
    if run is None or run.finished:
        fork.raise_if_inherited(what)
        raise NoActiveRun(fork.no_run_message())
    return run


def resume_checkpoint() -> str | None:
    """The checkpoint a retried job should resume from, if the runner passed one and it exists
    (a file, or a directory such as a Hugging Face ``checkpoint-N/``)."""
    path = os.environ.get(ENV_RESUME)
    return path if path and os.path.exists(path) else None


def _job_attempt() -> AttemptFence | None:
    """The job attempt a worker started this process for (its writes are fenced by it)."""
    job, attempt = os.environ.get(ENV_JOB_ID), os.environ.get(ENV_ATTEMPT)
    if job and attempt and job.isdigit() and attempt.isdigit():
        return AttemptFence(int(job), int(attempt))
    return None


def _git_commit() -> str | None:
    if os.environ.get("TRACKER_SNAPSHOT_ID"):
        return None  # a job run from a code snapshot: its run has the snapshot's commit
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


__all__ = [
    "Run",
    "Sink",
    "SqlSink",
    "active_run",
    "init",
    "latest_verified_checkpoint",
    "resume_checkpoint",
]
