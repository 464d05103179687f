"""``SlurmExecutor``: the :class:`tracker.runner.executor.Executor` for Slurm, through its
commands (``sbatch``, ``squeue``, ``scontrol``, ``scancel``) run as argv lists, never a shell.

The batch script is one file the executor writes once into its log directory: the site
template, then ``exec "$@"`` (:func:`tracker.rules.slurm.batch_script`); ``sbatch`` copies it
at submission, and the job's argv follows it as arguments. The job's environment is the
environment of the ``sbatch`` process (``--export=ALL``).

Output files live in ``log_dir`` (``job-<id>-<attempt>.out``/``.err``), which must be on a
filesystem the compute nodes and the dispatcher's host share (the dispatcher streams them
into the store). ``squeue -t all`` plus ``scontrol show job`` show ended jobs for
``MinJobAge`` seconds (Slurm's default 300), far longer than the dispatcher's poll interval;
a job slurmctld has already forgotten (a dispatcher down for longer, a controller restarted
without its state) is looked up in Slurm's history: ``sacct`` when accounting exists, else
``sacct -c`` over the job-completion log (``JobCompType=jobcomp/filetxt``). Only when neither
knows it is the job "forgotten" (the dispatcher then retries it as a node failure).
"""

from __future__ import annotations

import getpass
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from tracker.rules.slurm import (
    PYTHON_ARG,
    SQUEUE_FORMAT,
    SlurmJob,
    SlurmRequest,
    SlurmSite,
    Tag,
    batch_script,
    is_transient_error,
    job_from_scontrol,
    near_time_limit,
    parse_comment,
    parse_sacct,
    parse_sacct_records,
    parse_scontrol,
    parse_squeue,
    requeue_cause,
    sacct_argv,
    sbatch_argv,
    state_rule,
    was_requeued,
)
from tracker.runner.executor import ExecutorError, ExternalJob, Submission, SubmitRequest
from tracker.runner.job_env import without_starter

__all__ = ["SlurmExecutor"]

COMMAND_TIMEOUT_S = 60.0


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text() == text
    except FileNotFoundError:  # not written yet, or another dispatcher is replacing it
        return False


class SlurmExecutor:
    """Submit to and follow Slurm as the user the dispatcher runs as."""

    name = "slurm"
    interpreter = PYTHON_ARG  # the batch script chooses (batch_script: the template's, or ours)

    def __init__(
        self, site: SlurmSite, log_dir: str, *, env: Mapping[str, str] | None = None
    ) -> None:
        self.site = site
        self.log_dir = Path(log_dir).absolute()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ if env is None else env)  # for squeue/scontrol/scancel
        self.user = getpass.getuser()
        self.script = self.log_dir / "tracker-batch.sh"
        self._history: list[bool] = [False, True]  # sacct modes left to try: accounting, -c
        self._causes: dict[tuple[str, int], str | None] = {}  # (slurm id, restarts): cause
        text = batch_script(site.template, sys.executable)
        if not _holds(self.script, text):
            # A temporary file of this executor's own: dispatchers sharing a log folder
            # start at once (one renamed another's "tracker-batch.tmp" under its chmod)
            tmp = self.log_dir / f".tracker-batch.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            try:
                tmp.write_text(text)
                tmp.chmod(0o755)
                tmp.replace(self.script)
            finally:
                tmp.unlink(missing_ok=True)

    def _run(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
        try:
            done = subprocess.run(
                list(argv),
                env=dict(env if env is not None else self.env),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            raise ExecutorError(f"{argv[0]} could not run: {exc}", transient=True) from exc
        except OSError as exc:
            raise ExecutorError(f"{argv[0]} could not run: {exc}") from exc
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()[-2000:]
            raise ExecutorError(
                f"{argv[0]} failed (exit {done.returncode}): {said}",
                transient=is_transient_error(said),
            )
        return done.stdout

    def output_paths(self, job_id: int, attempt: int) -> tuple[str, str]:
        base = self.log_dir / f"job-{job_id}-{attempt}"
        return f"{base}.out", f"{base}.err"

    def submit(self, request: SubmitRequest) -> Submission:
        """``sbatch --parsable ...``; the job's id is the first field of its output.

        Raises ExecutorError when sbatch refuses the job (its message included).
        """
        slurm_request = SlurmRequest(
            namespace=request.namespace,
            job_id=request.job_id,
            attempt=request.attempt,
            token=request.token,
            name=request.name,
            output=request.output,
            error=request.error,
            chdir=request.cwd,
            gpus=request.gpus,
            cpus=request.cpus,
            memory_bytes=request.memory_bytes,
            timeout_s=request.timeout_s,
            extra=request.extra,
        )
        argv = sbatch_argv(slurm_request, self.site, str(self.script), request.argv)
        env = {**without_starter(self.env), **request.env}  # --export=ALL: the job's env
        out = self._run(argv, env).strip()
        external_id = out.split(";")[0].strip()
        if not external_id.isdigit():
            raise ExecutorError(f"sbatch printed no job id: {out!r}")
        return Submission(external_id)

    def jobs(self) -> list[ExternalJob]:
        out = self._run(["squeue", "-h", "-t", "all", "-u", self.user, "-O", SQUEUE_FORMAT])
        found = (self._external(j) for j in parse_squeue(out))
        return [j for j in found if j is not None]

    def job(self, external_id: str) -> ExternalJob | None:
        try:
            out = self._run(["scontrol", "show", "job", "-o", external_id])
        except ExecutorError as exc:
            if "Invalid job id" in exc.message:
                return self.history(external_id)  # slurmctld forgot it (MinJobAge passed)
            raise
        found = job_from_scontrol(parse_scontrol(out))
        return None if found is None else self._external(found)

    def history(self, external_id: str) -> ExternalJob | None:
        """An ended job from Slurm's history (``sacct``, else ``sacct -c``), or ``None``
        when neither has it. The completion log keeps no comment: the returned job's
        namespace is then empty and its job id 0 (the caller asked by id and knows them).

        A sacct mode this cluster does not have (accounting storage disabled, no
        completion log) is not tried again by this executor; other failures are.
        """
        for completion, out in self._sacct(external_id):
            found = parse_sacct(out, external_id, completion=completion)
            if found is not None:
                tagged = _external(found, self.site.grace_s)
                return tagged or _external(found, self.site.grace_s, tag=Tag("", 0, 0, ""))
        return None

    def _sacct(self, external_id: str) -> Iterator[tuple[bool, str]]:
        """sacct's output for one job, from each history mode this cluster has."""
        for completion in list(self._history):
            try:
                out = self._run(sacct_argv(external_id, completion=completion))
            except ExecutorError as exc:
                if "disabled" in exc.message or "JobComp" in exc.message:
                    self._history.remove(completion)  # not set up here: do not ask again
                continue
            yield completion, out

    def _external(self, job: SlurmJob) -> ExternalJob | None:
        cause = None
        if job.restarts and parse_comment(job.comment) is not None:
            cause = self._requeue_cause(job.slurm_id, job.restarts)
        return _external(job, self.site.grace_s, cause=cause)

    def _requeue_cause(self, external_id: str, restarts: int) -> str | None:
        """Why Slurm requeued the job (``NODE_FAIL``, ``PREEMPTED``...) from its history,
        asked once per requeue; ``None`` when no history has it (then: preempted)."""
        key = (external_id, restarts)
        if key not in self._causes:
            cause = None
            for completion, out in self._sacct(external_id):
                cause = requeue_cause(parse_sacct_records(out, external_id, completion=completion))
                if cause is not None:
                    break
            self._causes[key] = cause
        return self._causes[key]

    def cancel(self, external_id: str) -> None:
        self._run(["scancel", external_id])


def _external(
    job: SlurmJob, grace_s: int, tag: Tag | None = None, cause: str | None = None
) -> ExternalJob | None:
    tag = tag or parse_comment(job.comment)
    if tag is None:
        return None
    rule = state_rule(job.state, job.restarts, cause)
    return ExternalJob(
        external_id=job.slurm_id,
        phase=rule.phase,
        state=job.state,
        reason=job.reason,
        namespace=tag.namespace,
        job_id=tag.job_id,
        attempt=tag.attempt,
        token=tag.token,
        exit_code=job.exit_code,
        signal=job.signal,
        failure=rule.failure,
        hint=rule.hint,
        near_limit=near_time_limit(job, grace_s),
        requeued=was_requeued(job.state, job.restarts),
    )
