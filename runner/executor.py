"""The ``Executor`` interface: what the dispatcher needs from a cluster scheduler.

The queue (claims, leases, retries, logs) stays in the store and in the one job loop
(:mod:`tracker.runner.job_loop`, run for a cluster by :mod:`tracker.runner.dispatcher`); an
executor only hands one attempt of one job to the
scheduler and reports what the scheduler says about it. Slurm is
:class:`tracker.runner.slurm.SlurmExecutor`; a Kubernetes-Jobs executor would map
``submit`` to creating a Job (the ``tag`` as an annotation), ``jobs`` to listing Jobs by a
label, ``cancel`` to deleting one, and ``output_paths`` to files on a shared volume (or a
log-fetching subclass). The local ``tracker worker`` is the loop's other executor: it runs
processes itself (:mod:`tracker.runner.worker`), so it needs no scheduler interface.

Every method may raise :class:`ExecutorError` (the scheduler's command failed; the message
carries its output). The dispatcher treats that as "try again on the next tick" for reads
and as a failed attempt for ``submit``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tracker.errors import TrackerError

__all__ = ["Executor", "ExecutorError", "ExternalJob", "Submission", "SubmitRequest"]


class ExecutorError(TrackerError):
    """The scheduler refused or failed a command (submit, list, cancel).

    ``transient``: the scheduler could not be reached or answered too late, so the same
    command later can succeed (a submission is then put back in the queue, not failed)."""

    code = "executor_error"

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class SubmitRequest:
    """One attempt of one job, for the scheduler.

    ``namespace`` (the store's id), ``job_id``, ``attempt`` and ``token`` (the attempt's lease
    token) are kept with the job in the scheduler (Slurm: the comment) so :meth:`Executor.jobs`
    can tie it back after a restart; ``env`` is the job's whole
    environment; ``output``/``error`` are where its stdout/stderr go (files the dispatcher reads).
    """

    namespace: str
    job_id: int
    attempt: int
    token: str
    name: str
    argv: Sequence[str]
    cwd: str | None
    env: Mapping[str, str]
    output: str
    error: str
    gpus: int = 0
    cpus: int | None = None
    memory_bytes: int | None = None
    timeout_s: float | None = None
    extra: tuple[str, ...] = ()


@dataclass(frozen=True)
class Submission:
    """A job the scheduler accepted: its id there."""

    external_id: str


@dataclass(frozen=True)
class ExternalJob:
    """A job as the scheduler reports it.

    ``phase``: ``pending``, ``running`` or ``ended``; ``reason`` why it waits (pending) or
    how it ended; ``failure`` the failure class the scheduler's state implies (``None``: judge
    by exit code and output; ``"exit"``: judge by output, a zero exit still fails);
    ``namespace``, ``job_id``, ``attempt``, ``token``: what was given at submit.
    ``near_limit``: it ended close to its time limit, where the scheduler sends the grace
    signal (a job killed by that signal timed out).
    """

    external_id: str
    phase: str
    state: str
    reason: str | None
    namespace: str
    job_id: int
    attempt: int
    token: str
    exit_code: int | None = None
    signal: int | None = None
    failure: str | None = None
    hint: str = ""
    near_limit: bool = False  # ended where the scheduler signals a job before its time limit
    requeued: bool = False  # back in the scheduler's queue: it reruns the old copy unless cancelled


class Executor(Protocol):
    """Hands attempts to a cluster scheduler; see the module docstring."""

    name: str
    # What a job recorded as ``python ...`` starts with: an interpreter's path, or
    # ``python`` when the executor's own launch script chooses one (Slurm's batch script:
    # the site template's, else the dispatcher's).
    interpreter: str

    def submit(self, request: SubmitRequest) -> Submission:
        """Submit one attempt. Raises ExecutorError (the scheduler refused it)."""
        ...

    def jobs(self) -> list[ExternalJob]:
        """Every job submitted through this executor that the scheduler knows (pending,
        running, recently ended), of every namespace."""
        ...

    def job(self, external_id: str) -> ExternalJob | None:
        """One job with its final details (exit code), or ``None`` once forgotten (not in
        the scheduler nor in its history). A job found only in a history that keeps no
        tag has an empty ``namespace`` and ``job_id`` 0: the caller asked by id."""
        ...

    def cancel(self, external_id: str) -> None:
        """Ask the scheduler to stop a job (its state then says when it ended)."""
        ...

    def output_paths(self, job_id: int, attempt: int) -> tuple[str, str]:
        """Where an attempt's stdout and stderr go (readable from the dispatcher's host)."""
        ...
