"""Slurm as a pure rule: the ``sbatch`` argv for a job, the checks on extra ``#SBATCH``
options, the wrapper script, the parsers of ``squeue``/``scontrol`` output and the map from
Slurm job states to ours. No I/O: :mod:`tracker.runner.slurm` runs the commands.

Nothing a user typed ever reaches a shell: ``sbatch`` gets an argv list, the batch script is
a fixed wrapper (the site template, then ``exec "$@"``) and the job's own argv follows the
script path as its arguments. Extra options (per job, or the dispatcher's ``--sbatch``) must
be ``--name`` or ``--name=value`` with a name on :data:`ALLOWED_OPTIONS`; the options the
dispatcher sets itself (output files, comment, export, ...) are refused with a message that
names the option.

A submitted job carries ``tracker:<store id>:<job id>:<attempt>:<lease token>`` in its Slurm
comment: after a restart the dispatcher finds its jobs there and adopts them (the token proves
the attempt still holds the job's lease), so nothing is submitted twice. The store id (a random
id kept in the store) keeps apart the jobs of two trackers that share a cluster account.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tracker.errors import InvalidInput

__all__ = [
    "ALLOWED_OPTIONS",
    "COMMENT_PREFIX",
    "SACCT_COMPLETION_FIELDS",
    "SACCT_FIELDS",
    "SQUEUE_FORMAT",
    "STATES",
    "SlurmJob",
    "SlurmRequest",
    "SlurmSite",
    "StateRule",
    "Tag",
    "batch_script",
    "check_extra_options",
    "comment",
    "is_transient_error",
    "near_time_limit",
    "parse_comment",
    "parse_exit_code",
    "parse_sacct",
    "parse_scontrol",
    "parse_slurm_time",
    "parse_squeue",
    "sacct_argv",
    "sbatch_argv",
    "state_rule",
    "time_limit",
]

COMMENT_PREFIX = "tracker:"
# Fields squeue prints for the dispatcher (``squeue -h -t all -O ...``), separated by "|":
# job id, state, reason, restart count, comment (last: it is free text).
SQUEUE_FORMAT = "JobID:|,State:|,Reason:|,RestartCnt:|,Comment:"

# Extra options a job or a site may add. Everything the dispatcher sets itself (job name,
# comment, output files, export, chdir, requeue, signal, time, resources) or that would run
# something else (wrap, uid) is absent on purpose.
ALLOWED_OPTIONS = frozenset(
    {
        "account", "acctg-freq", "begin", "constraint", "contiguous", "core-spec",
        "cores-per-socket",
        "cpu-freq", "cpus-per-gpu", "deadline", "distribution", "exclude", "exclusive",
        "extra-node-info", "gpu-bind", "gpu-freq", "gpus-per-node", "gpus-per-socket",
        "gpus-per-task", "hint", "licenses", "mail-type", "mail-user", "mcs-label", "mem-bind",
        "mem-per-cpu", "mem-per-gpu", "mincpus", "network", "nice", "nodefile", "nodelist",
        "nodes", "ntasks", "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-node",
        "ntasks-per-socket", "overcommit", "oversubscribe", "partition", "power", "prefer",
        "priority", "qos", "reservation", "sockets-per-node", "spread-job", "switches",
        "threads-per-core", "time-min", "tmp", "wckey",
    }
)  # fmt: skip
_OPTION = re.compile(r"--([a-z][a-z0-9-]*)(?:=(.*))?", re.DOTALL)
_MAX_OPTIONS = 64


@dataclass(frozen=True)
class SlurmSite:
    """The dispatcher's site-wide settings (``tracker dispatcher --partition ...``).

    ``template`` is the head of every batch script (``#SBATCH`` lines, ``module load``...);
    ``grace_s`` is how long before the time limit Slurm sends SIGTERM to the job.
    """

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    template: str | None = None
    extra: tuple[str, ...] = ()
    grace_s: int = 60


@dataclass(frozen=True)
class SlurmRequest:
    """One attempt of one job, as ``sbatch`` gets it."""

    namespace: str
    job_id: int
    attempt: int
    token: str
    name: str
    output: str
    error: str
    chdir: str | None = None
    gpus: int = 0
    cpus: int | None = None
    memory_bytes: int | None = None
    timeout_s: float | None = None
    extra: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tag:
    """What a Slurm comment says: which store, job, attempt and lease token."""

    namespace: str
    job_id: int
    attempt: int
    token: str


_TAG_PART = re.compile(r"[A-Za-z0-9_-]+")


def comment(namespace: str, job_id: int, attempt: int, token: str) -> str:
    """The Slurm comment that ties a Slurm job to one attempt of one of our jobs."""
    return f"{COMMENT_PREFIX}{namespace}:{job_id}:{attempt}:{token}"


def parse_comment(text: str | None) -> Tag | None:
    """The :class:`Tag` in a comment :func:`comment` wrote, else ``None`` (not ours)."""
    if not text or not text.startswith(COMMENT_PREFIX):
        return None
    parts = text[len(COMMENT_PREFIX) :].strip().split(":")
    if len(parts) != 4 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    if not _TAG_PART.fullmatch(parts[0]) or not _TAG_PART.fullmatch(parts[3]):
        return None
    return Tag(parts[0], int(parts[1]), int(parts[2]), parts[3])


SIGNAL_SLACK_S = 60  # Slurm may send --signal up to 60 s before the time asked for


def time_limit(timeout_s: float | None, grace_s: int = 0) -> str | None:
    """Slurm's ``--time`` for our timeout: the job's own time, then the grace period, then
    :data:`SIGNAL_SLACK_S`, in whole minutes rounded up (Slurm's granularity).

    The grace SIGTERM (``--signal=B:TERM@grace``) comes ``grace_s`` before the limit and up
    to :data:`SIGNAL_SLACK_S` earlier still, so a limit of the timeout alone sent it before
    the job had its time (``--timeout 1m`` was stopped after 6 s). With this limit the job
    runs at least ``timeout_s`` before the SIGTERM and has at least ``grace_s`` after it.
    """
    if timeout_s is None:
        return None
    seconds = math.ceil(timeout_s) + grace_s + SIGNAL_SLACK_S  # integers: no float rounding
    return str(max(1, -(-seconds // 60)))


def check_extra_options(options: Sequence[str], *, field: str = "sbatch") -> tuple[str, ...]:
    """Extra ``sbatch`` options, checked: each ``--name`` or ``--name=value`` with ``name``
    in :data:`ALLOWED_OPTIONS`, no newline or NUL. A leading ``#SBATCH`` is dropped, so lines
    copied from a batch script work.

    Raises:
        InvalidInput: an option is malformed or not allowed (the message names it).
    """
    if len(options) > _MAX_OPTIONS:
        raise InvalidInput(f"{field}: at most {_MAX_OPTIONS} extra options", field=field)
    out = []
    for raw in options:
        if not isinstance(raw, str):
            raise InvalidInput(f"{field} option {raw!r}: must be a string", field=field)
        text = raw.strip()
        if text.startswith("#SBATCH"):
            text = text[len("#SBATCH") :].strip()
        if any(c in text for c in "\n\r\0"):
            raise InvalidInput(f"{field} option {raw!r}: must be one line without NUL", field=field)
        match = _OPTION.fullmatch(text)
        if match is None:
            raise InvalidInput(
                f"{field} option {raw!r}: must be --name or --name=value (long form)", field=field
            )
        if match.group(1) not in ALLOWED_OPTIONS:
            raise InvalidInput(
                f"{field} option --{match.group(1)}: not allowed (the dispatcher sets it, or it "
                "could run something else); allowed: see the README's Slurm section",
                field=field,
            )
        out.append(text)
    return tuple(out)


PYTHON_ARG = "python"  # a job's recorded interpreter (``tracker submit train.py``)
STARTER_PATH = "TRACKER_STARTER_PATH"  # the PATH the job was handed, before the template

# After the template: a job recorded as ``python ...`` runs under the interpreter the
# template chose -- ``TRACKER_PYTHON`` when it set one, else the ``python`` on the PATH it
# changed (a venv's activate, ``conda activate``, ``module load``) -- and under the
# dispatcher's own interpreter when it chose none.
_CHOOSE_PYTHON = """if [ "$1" = {arg} ]; then
    shift
    if [ -n "${{TRACKER_PYTHON:-}}" ]; then
        set -- "$TRACKER_PYTHON" "$@"
    elif [ "$PATH" != "${{{starter}:-$PATH}}" ] \\
        && found="$(command -v python || command -v python3)"; then
        set -- "$found" "$@"
    else
        set -- {python} "$@"
    fi
fi
"""


def batch_script(template: str | None, python: str = "python3") -> str:
    """The batch script: the site template (``#!`` line and ``#SBATCH`` lines, module loads),
    then the choice of interpreter for a job recorded as ``python ...`` (``python``: the
    dispatcher's own, used when the template chose none; see ``_CHOOSE_PYTHON``), then
    ``exec "$@"`` -- the job's argv arrives as the script's arguments, never as text."""
    head = (template or "").rstrip("\n")
    if not head.startswith("#!"):
        head = "#!/bin/sh\n" + head if head else "#!/bin/sh"
    choose = _CHOOSE_PYTHON.format(arg=PYTHON_ARG, starter=STARTER_PATH, python=shlex.quote(python))
    return f'{head}\n{choose}exec "$@"\n'


def sbatch_argv(
    request: SlurmRequest, site: SlurmSite, script: str, argv: Sequence[str]
) -> list[str]:
    """The ``sbatch`` command line for one attempt: options, the script, then the job's argv.

    Later options win in sbatch, so the order is: ours, the site's extras, the job's extras
    (the checked ones cannot override ours: those names are not allowed).
    """
    out = [
        "sbatch",
        "--parsable",
        f"--job-name={request.name}",
        f"--comment={comment(request.namespace, request.job_id, request.attempt, request.token)}",
        f"--output={request.output}",
        f"--error={request.error}",
        "--export=ALL",
        "--requeue",
        f"--signal=B:TERM@{site.grace_s}",
    ]
    if request.chdir:
        out.append(f"--chdir={request.chdir}")
    for name, value in (("partition", site.partition), ("account", site.account),
                        ("qos", site.qos)):  # fmt: skip
        if value:
            out.append(f"--{name}={value}")
    if request.memory_bytes:
        out.append(f"--mem={max(1, math.ceil(request.memory_bytes / 1024**2))}M")
    if request.gpus:
        out.append(f"--gres=gpu:{request.gpus}")
    if request.cpus:
        out.append(f"--cpus-per-task={request.cpus}")
    limit = time_limit(request.timeout_s, site.grace_s)
    if limit is not None:
        out.append(f"--time={limit}")
    out += list(site.extra) + list(request.extra)
    out.append(script)
    out += list(argv)
    return out


# ---------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class SlurmJob:
    """A Slurm job as squeue/scontrol show it. ``exit_code``/``signal`` only from scontrol."""

    slurm_id: str
    state: str
    reason: str | None
    comment: str | None
    restarts: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    run_time_s: int | None = None
    time_limit_s: int | None = None


def _none(text: str | None) -> str | None:
    text = (text or "").strip()
    return None if text in ("", "(null)", "None", "N/A") else text


def _state(text: str) -> str:
    # scontrol may write "CANCELLED by 0"; squeue the bare word
    return text.strip().split(" ")[0].split("+")[0].upper()


def parse_squeue(text: str) -> list[SlurmJob]:
    """Lines of ``squeue -h -O`` with :data:`SQUEUE_FORMAT` (5 fields) or of
    ``squeue -h -o '%i|%T|%r|%k'`` (4 fields, no restart count). Blank lines are skipped.

    Raises:
        InvalidInput: a line has too few fields (names the line).
    """
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", 4)
        if len(parts) == 5 and parts[3].strip().isdigit():
            slurm_id, state, reason, restarts, note = parts
            count: int | None = int(restarts)
        elif len(parts) >= 4:
            slurm_id, state, reason = parts[:3]
            note, count = "|".join(parts[3:]), None
        else:
            raise InvalidInput(f"squeue line {line!r}: expected id|state|reason|comment")
        jobs.append(SlurmJob(slurm_id.strip(), _state(state), _none(reason), _none(note), count))
    return jobs


_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")
# Printed after ``Command=``, whose value is the job's argv as text (spaces, newlines, even
# " Key=" inside): for these the last occurrence is the real one, for the rest the first.
_AFTER_COMMAND = frozenset({"WorkDir", "Comment", "StdErr", "StdIn", "StdOut", "Power"})


def parse_scontrol(text: str) -> dict[str, str]:
    """``scontrol show job -o <id>``: ``Key=value`` pairs; values may hold spaces, so a value
    runs until the next `` Key=``. ``-o`` is one line, except that ``Command`` keeps the
    newlines of the job's arguments."""
    found = list(_KEY.finditer(text))
    out: dict[str, str] = {}
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        key = match.group(1)
        if key not in out or key in _AFTER_COMMAND:
            out[key] = text[match.end() : end].strip()
    return out


def parse_exit_code(text: str | None) -> tuple[int | None, int | None]:
    """Slurm's ``ExitCode=code:signal`` as ``(code, signal)`` (a 0 signal is ``None``)."""
    if not text or ":" not in text:
        return None, None
    code, _, sig = text.partition(":")
    try:
        return int(code), (int(sig) or None)
    except ValueError:
        return None, None


_SLURM_TIME = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)")


def parse_slurm_time(text: str | None) -> int | None:
    """Seconds of a Slurm duration (``MM:SS``, ``HH:MM:SS``, ``D-HH:MM:SS``); ``None`` for
    ``UNLIMITED``, ``NONE``, ``INVALID`` or anything else."""
    match = _SLURM_TIME.fullmatch((text or "").strip())
    if match is None:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def near_time_limit(job: SlurmJob, grace_s: int) -> bool:
    """Whether the job ended inside the window where Slurm sends the grace signal
    (``--signal=B:TERM@grace``, up to :data:`SIGNAL_SLACK_S` early) before its time limit:
    a job killed by that SIGTERM timed out, it was not killed from outside."""
    if job.run_time_s is None or job.time_limit_s is None:
        return False
    return job.run_time_s >= job.time_limit_s - grace_s - SIGNAL_SLACK_S


def job_from_scontrol(fields: Mapping[str, str]) -> SlurmJob | None:
    """A :class:`SlurmJob` from parsed ``scontrol`` fields, or ``None`` without ``JobId``."""
    if "JobId" not in fields:
        return None
    code, sig = parse_exit_code(fields.get("ExitCode"))
    restarts = fields.get("Restarts", "")
    return SlurmJob(
        run_time_s=parse_slurm_time(fields.get("RunTime")),
        time_limit_s=parse_slurm_time(fields.get("TimeLimit")),
        slurm_id=fields["JobId"],
        state=_state(fields.get("JobState", "UNKNOWN")),
        reason=_none(fields.get("Reason")),
        comment=_none(fields.get("Comment")),
        restarts=int(restarts) if restarts.isdigit() else None,
        exit_code=code,
        signal=sig,
        stdout=_none(fields.get("StdOut")),
        stderr=_none(fields.get("StdErr")),
    )


# Ended jobs from Slurm's history once slurmctld forgot them (MinJobAge passed): ``sacct``
# reads the accounting database when there is one; without it, ``sacct -c`` reads the
# job-completion log (JobCompType=jobcomp/filetxt), which keeps no comment.
SACCT_FIELDS = ("JobIDRaw", "State", "ExitCode", "Elapsed", "Timelimit", "Reason", "Comment")
SACCT_COMPLETION_FIELDS = ("JobID", "State", "ExitCode", "Elapsed", "Timelimit")


def sacct_argv(slurm_id: str, *, completion: bool) -> list[str]:
    """``sacct`` for one job's allocation line (``-X``), parsable, no header."""
    fields = SACCT_COMPLETION_FIELDS if completion else SACCT_FIELDS
    # -D: every record of a requeued job (one per time it ended), not only its newest
    argv = ["sacct", "-j", slurm_id, "-X", "-D", "-n", "-P", "-o", ",".join(fields)]
    return [*argv[:1], "-c", *argv[1:]] if completion else argv


def parse_sacct(text: str, slurm_id: str, *, completion: bool) -> SlurmJob | None:
    """The last record of ``slurm_id`` in :func:`sacct_argv`'s output (a requeued job has
    one per time it ended), or ``None`` when sacct knows no such job. A comment may hold
    ``|`` (it is the last field, so it keeps them)."""
    records = parse_sacct_records(text, slurm_id, completion=completion)
    return records[-1] if records else None


def parse_sacct_records(text: str, slurm_id: str, *, completion: bool) -> list[SlurmJob]:
    """Every record of ``slurm_id`` in :func:`sacct_argv`'s output, oldest first; lines of
    other jobs and malformed lines are skipped."""
    fields = SACCT_COMPLETION_FIELDS if completion else SACCT_FIELDS
    found: list[SlurmJob] = []
    for line in text.splitlines():
        parts = line.split("|", len(fields) - 1)
        if len(parts) != len(fields) or parts[0].strip() != slurm_id:
            continue
        row = dict(zip(fields, parts, strict=True))
        code, sig = parse_exit_code(row.get("ExitCode"))
        found.append(
            SlurmJob(
                slurm_id=slurm_id,
                state=_state(row["State"]),
                reason=_none(row.get("Reason")),
                comment=_none(row.get("Comment")),
                exit_code=code,
                signal=sig,
                run_time_s=parse_slurm_time(row.get("Elapsed")),
                time_limit_s=parse_slurm_time(row.get("Timelimit")),
            )
        )
    return found


_NODE_FAILURES = frozenset({"NODE_FAIL", "BOOT_FAIL"})


def requeue_cause(records: Sequence[SlurmJob]) -> str | None:
    """Why Slurm requeued a job, from its history (:func:`parse_sacct_records`): the state
    of its newest record that ended (``NODE_FAIL``, ``PREEMPTED``, ...), else ``None``."""
    for record in reversed(records):
        rule = STATES.get(record.state)
        if rule is not None and rule.phase == "ended" and record.state not in _REQUEUED:
            return record.state
    return None


# What Slurm's client commands say when the controller could not be reached or answered
# too late (down, restarting, overloaded): the same command a little later can succeed.
# Anything else (a bad partition, account, QOS or option, a policy limit) is the request's
# own fault, and asking again would be refused the same way.
TRANSIENT_MESSAGES = (
    "socket timed out",
    "unable to contact slurm controller",
    "connection refused",
    "communication connection failure",
    "zero bytes were transmitted",
    "temporarily unable",
    "resource temporarily unavailable",
    "slurm_persist_conn_open",
    "not responding",
    "slurmctld is busy",
)


def is_transient_error(message: str) -> bool:
    """Whether a Slurm command's error output says "try again later" (see above)."""
    text = message.lower()
    return any(part in text for part in TRANSIENT_MESSAGES)


# ------------------------------------------------------------------------- state map


@dataclass(frozen=True)
class StateRule:
    """What a Slurm state means for our job.

    ``phase``: ``pending`` (waits in Slurm; ``reason`` shown on the Queue page), ``running``,
    or ``ended``. For an ended job, ``failure`` is the failure class we record (``None``:
    judge by exit code and output, as for a local job; ``"exit"``: the same, but a zero exit
    still fails). ``retry`` says the class is retried by the retry policy regardless of
    ``retry_on_failure`` (node failures, preemption).
    """

    phase: str
    failure: str | None = None
    hint: str = ""


_PENDING = StateRule("pending")
_RUNNING = StateRule("running")
STATES: dict[str, StateRule] = {
    "PENDING": _PENDING,
    "CONFIGURING": _PENDING,
    "REQUEUED": StateRule("ended", "preempted", "Slurm requeued the job."),
    "REQUEUE_HOLD": StateRule("ended", "preempted", "Slurm requeued the job (held)."),
    "REQUEUE_FED": StateRule("ended", "preempted", "Slurm requeued the job."),
    "RESV_DEL_HOLD": _PENDING,
    "SPECIAL_EXIT": StateRule("ended", "exit", "Slurm held the job after a special exit."),
    "SUSPENDED": _RUNNING,
    "STOPPED": _RUNNING,
    "RUNNING": _RUNNING,
    "COMPLETING": _RUNNING,
    "RESIZING": _RUNNING,
    "SIGNALING": _RUNNING,
    "STAGE_OUT": _RUNNING,
    "COMPLETED": StateRule("ended"),
    "FAILED": StateRule("ended", "exit"),
    "BOOT_FAIL": StateRule("ended", "node_fail", "The Slurm node failed to boot; retried."),
    "DEADLINE": StateRule("ended", "timeout", "The job reached its Slurm deadline."),
    "TIMEOUT": StateRule("ended", "timeout", "Slurm stopped the job at its time limit."),
    "CANCELLED": StateRule("ended", "cancelled", "The job was cancelled in Slurm (scancel)."),
    "NODE_FAIL": StateRule("ended", "node_fail", "The Slurm node running the job failed."),
    "PREEMPTED": StateRule("ended", "preempted", "Slurm preempted the job."),
    "OUT_OF_MEMORY": StateRule(
        "ended",
        "host_oom",
        "Slurm killed the job: it used more memory than it asked for (--mem); ask for more.",
    ),
    "REVOKED": StateRule("ended", "cancelled", "Slurm revoked the job (federation)."),
}


_REQUEUED = frozenset({"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})


def state_rule(state: str, restarts: int | None = None, cause: str | None = None) -> StateRule:
    """The rule for a Slurm state. A job Slurm requeued (``restarts`` > 0: preemption,
    ``scontrol requeue``, a node failure with ``--requeue``) ended our attempt whatever its
    state now: ``node_fail`` when its history says a node failed (``cause``, from
    :func:`requeue_cause`), else ``preempted``; an unknown state counts as running (it is
    left to the next poll)."""
    if restarts:
        if cause in _NODE_FAILURES:
            return StateRule(
                "ended", "node_fail", f"The Slurm node running the job failed ({cause}); retried."
            )
        return StateRule("ended", "preempted", "Slurm requeued the job (preemption or requeue).")
    return STATES.get(_state(state), _RUNNING)


def was_requeued(state: str, restarts: int | None) -> bool:
    """Whether Slurm put the job back in its queue: our attempt ended, and Slurm runs the
    old copy again unless it is cancelled. A requeued job that has ended since (cancelled
    by the dispatcher that judged it) is not: a restarted dispatcher leaves it alone."""
    if _state(state) in _REQUEUED:
        return True
    return bool(restarts) and STATES.get(_state(state), _RUNNING).phase != "ended"
