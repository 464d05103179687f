"""The pure Slurm rules: sbatch argv, extra options, comments, squeue/scontrol parsing, states."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.errors import InvalidInput
from tracker.rules.slurm import (
    ALLOWED_OPTIONS,
    SIGNAL_SLACK_S,
    STATES,
    SlurmJob,
    SlurmRequest,
    SlurmSite,
    Tag,
    batch_script,
    check_extra_options,
    comment,
    is_transient_error,
    job_from_scontrol,
    near_time_limit,
    parse_comment,
    parse_exit_code,
    parse_sacct,
    parse_sacct_records,
    parse_scontrol,
    parse_slurm_time,
    parse_squeue,
    requeue_cause,
    sacct_argv,
    sbatch_argv,
    state_rule,
    time_limit,
    was_requeued,
)

REQUEST = SlurmRequest(
    namespace="ab12", job_id=7, attempt=2, token="tok", name="tracker-7",
    output="/logs/job-7-2.out", error="/logs/job-7-2.err",
)  # fmt: skip


def test_sbatch_argv_minimal() -> None:
    argv = sbatch_argv(REQUEST, SlurmSite(), "/logs/batch.sh", ["python", "train.py"])
    assert argv == [
        "sbatch", "--parsable", "--job-name=tracker-7", "--comment=tracker:ab12:7:2:tok",
        "--output=/logs/job-7-2.out", "--error=/logs/job-7-2.err", "--export=ALL", "--requeue",
        "--signal=B:TERM@60", "/logs/batch.sh", "python", "train.py",
    ]  # fmt: skip


def test_sbatch_argv_every_resource_and_site_option() -> None:
    request = SlurmRequest(
        namespace="n", job_id=1, attempt=1, token="t", name="x", output="o", error="e",
        chdir="/proj/dir with space", gpus=2, cpus=8, memory_bytes=3 * 1024**3 + 1,
        timeout_s=3601, extra=("--constraint=a100",),
    )  # fmt: skip
    site = SlurmSite(partition="gpu", account="lab", qos="high", extra=("--exclude=n3",),
                     grace_s=120)  # fmt: skip
    argv = sbatch_argv(request, site, "s.sh", ["python", "t.py", "--lr=$(rm -rf /)"])
    assert argv[argv.index("s.sh") :] == ["s.sh", "python", "t.py", "--lr=$(rm -rf /)"]
    options = argv[: argv.index("s.sh")]
    for expected in ("--chdir=/proj/dir with space", "--partition=gpu", "--account=lab",
                     "--qos=high", "--mem=3073M", "--gres=gpu:2", "--cpus-per-task=8",
                     "--time=64", "--signal=B:TERM@120"):  # fmt: skip
        assert expected in options
    # site extras, then the job's: the job's own win in sbatch (later options override)
    assert options[-2:] == ["--exclude=n3", "--constraint=a100"]


@pytest.mark.parametrize(
    ("timeout", "grace", "expected"),
    [(None, 60, None), (0, 0, "1"), (1, 0, "2"), (60, 0, "2"), (61, 0, "3"), (60, 60, "3"),
     (20, 10, "2"), (7200, 60, "122"), (7200 - 120, 60, "120"), (7081, 60, "121"), (1e-9, 0, "2")],
)  # fmt: skip
def test_time_limit_is_timeout_then_grace_then_signal_slack(
    timeout: float | None, grace: int, expected: str | None
) -> None:
    assert time_limit(timeout, grace) == expected


@given(
    timeout=st.floats(min_value=0, max_value=1e7, allow_nan=False),
    grace=st.integers(min_value=0, max_value=86_400),
)
def test_grace_signal_never_comes_before_the_timeout(timeout: float, grace: int) -> None:
    limit_s = int(time_limit(timeout, grace) or 0) * 60
    # Slurm sends the SIGTERM between grace + SIGNAL_SLACK_S and grace before the limit
    assert limit_s - grace - SIGNAL_SLACK_S >= timeout
    assert limit_s - grace - SIGNAL_SLACK_S < math.ceil(timeout) + 60  # less than a minute more
    job = SlurmJob("1", "FAILED", None, None, run_time_s=math.ceil(timeout), time_limit_s=limit_s)
    assert near_time_limit(job, grace) is (math.ceil(timeout) >= limit_s - grace - SIGNAL_SLACK_S)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["--constraint=a100"], ("--constraint=a100",)),
        (["#SBATCH --exclusive"], ("--exclusive",)),
        (["  --nodes=2 "], ("--nodes=2",)),
        (["--mail-user=a b@c"], ("--mail-user=a b@c",)),
        ([], ()),
    ],
)
def test_extra_options_accepted(given: list[str], expected: tuple[str, ...]) -> None:
    assert check_extra_options(given) == expected


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("--output=/etc/passwd", "--output"),
        ("--comment=x", "--comment"),
        ("--wrap=rm -rf /", "--wrap"),
        ("--uid=0", "--uid"),
        ("--export=NONE", "--export"),
        ("-p gpu", "-p gpu"),
        ("--constraint=a\n#SBATCH --uid=0", "one line"),
        ("constraint=a", "long form"),
        ("--Constraint=a", "long form"),
    ],
)
def test_extra_options_refused_naming_the_option(given: str, named: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_extra_options([given])
    assert named in caught.value.message and caught.value.field == "sbatch"


def test_allow_list_excludes_what_the_dispatcher_sets() -> None:
    ours = {"output", "error", "comment", "job-name", "export", "chdir", "requeue", "signal",
            "time", "parsable", "wrap", "gres", "mem", "cpus-per-task"}  # fmt: skip
    assert not ours & ALLOWED_OPTIONS


def test_comment_round_trip_and_foreign_comments() -> None:
    text = comment("ab12", 7, 2, "0f3e")
    assert parse_comment(text) == Tag("ab12", 7, 2, "0f3e")
    for foreign in (None, "", "(null)", "tracker:", "tracker:a:1:2", "tracker:a:x:2:t",
                    "tracker:a:1:2:t:extra", "tracker:a b:1:2:t", "other:a:1:2:t"):  # fmt: skip
        assert parse_comment(foreign) is None, foreign


def test_batch_script_is_the_template_then_exec_of_the_arguments() -> None:
    assert batch_script(None).startswith("#!/bin/sh\nif ")
    site = "#!/bin/bash\n#SBATCH --constraint=a100\nmodule load cuda\n"
    assert batch_script(site).startswith(site)  # #SBATCH lines before any command
    assert batch_script("module load cuda").startswith("#!/bin/sh\nmodule load cuda\n")
    for text in (None, site):
        assert batch_script(text).endswith('\nexec "$@"\n')


SHIM = """#!/bin/sh
echo "the template's python" >&2
exec {python} "$@"
"""


@pytest.mark.parametrize(
    ("template", "chosen"),
    [
        (None, "ours"),  # no template: the dispatcher's interpreter
        ("#!/bin/sh\n#SBATCH --nice=0\nexport SITE=x\n", "ours"),  # it chose no python
        ('#!/bin/sh\nexport PATH="{bin}:$PATH"\n', "shim"),  # a venv's activate does this
        ("#!/bin/sh\nTRACKER_PYTHON={bin}/python\n", "shim"),  # said outright
        ('#!/bin/sh\nexport PATH="{bin}:$PATH"\nTRACKER_PYTHON={python}\n', "ours"),  # it wins
    ],
)
def test_the_template_chooses_the_python_of_a_python_job(
    tmp_path: Path, template: str | None, chosen: str
) -> None:
    """Run by a real sh, as sbatch runs it: a job recorded as ``python ...`` starts under the
    interpreter the template set (TRACKER_PYTHON, or the python of the PATH it changed),
    else under the dispatcher's; any other program is left alone."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "python"
    shim.write_text(SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    text = template.format(bin=bin_dir, python=sys.executable) if template else None
    script = tmp_path / "batch.sh"
    script.write_text(batch_script(text, sys.executable))
    env = {"PATH": os.environ["PATH"], "TRACKER_STARTER_PATH": os.environ["PATH"]}
    code = "import sys; print(sys.argv[1:])"
    ran = subprocess.run(["sh", str(script), "python", "-c", code, "a b", "$HOME"],
                         env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "['a b', '$HOME']\n"  # arguments arrive as they were, never as text
    assert ("the template's python" in ran.stderr) == (chosen == "shim"), ran.stderr
    other = subprocess.run(["sh", str(script), "echo", "python"], env=env,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (other.stdout, other.returncode) == ("python\n", 0)


def test_parse_squeue_five_and_four_fields() -> None:
    text = (
        "12|RUNNING|None|0|tracker:n:1:1:t\n"
        "13|PENDING|Resources|1|tracker:n:2:1:t\n"
        "\n"
        "14|PENDING|JobHeldUser|0|(null)\n"
        "15|COMPLETED|None|a|comment|with|bars\n"
    )
    jobs = parse_squeue(text)
    assert [(j.slurm_id, j.state, j.reason, j.restarts, j.comment) for j in jobs] == [
        ("12", "RUNNING", None, 0, "tracker:n:1:1:t"),
        ("13", "PENDING", "Resources", 1, "tracker:n:2:1:t"),
        ("14", "PENDING", "JobHeldUser", 0, None),
        ("15", "COMPLETED", None, None, "a|comment|with|bars"),
    ]
    with pytest.raises(InvalidInput, match="squeue line"):
        parse_squeue("12|RUNNING")


SCONTROL = (
    "JobId=1 JobName=w.sh UserId=root(0) JobState=FAILED Reason=NonZeroExitCode "
    "Dependency=(null) Requeue=1 Restarts=2 BatchFlag=1 ExitCode=3:0 RunTime=00:00:03 "
    "Command=/tmp/w.sh sh -c echo hi; exit 3 WorkDir=/tmp/my dir "
    "Comment=tracker:n:4:1:tok  StdErr=/tmp/o.txt StdIn=/dev/null StdOut=/tmp/o.txt Power= \n"
)


def test_parse_scontrol_values_with_spaces() -> None:
    fields = parse_scontrol(SCONTROL)
    assert fields["Command"] == "/tmp/w.sh sh -c echo hi; exit 3"
    assert fields["WorkDir"] == "/tmp/my dir"
    assert fields["Power"] == "" and fields["ExitCode"] == "3:0"
    job = job_from_scontrol(fields)
    assert job is not None
    assert (job.slurm_id, job.state, job.reason, job.restarts, job.exit_code, job.signal) == (
        "1", "FAILED", "NonZeroExitCode", 2, 3, None,
    )  # fmt: skip
    assert job.comment == "tracker:n:4:1:tok" and job.stdout == "/tmp/o.txt"
    assert job_from_scontrol(parse_scontrol("")) is None


def test_parse_scontrol_command_with_newlines_and_keys_inside() -> None:
    text = (
        "JobId=5 JobState=COMPLETED Reason=None Restarts=0 ExitCode=0:0 Command=/b.sh python -c \n"
        "import os\nx = 1 JobState=FAKE Comment=fake\n WorkDir=/w Comment=tracker:n:1:1:t "
        "StdErr=/e StdIn=/dev/null StdOut=/o Power=\n"
    )
    job = job_from_scontrol(parse_scontrol(text))
    assert job is not None
    assert (job.state, job.comment, job.stdout, job.exit_code) == (
        "COMPLETED", "tracker:n:1:1:t", "/o", 0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0:0", (0, None)), ("3:0", (3, None)), ("0:9", (0, 9)), ("0:15", (0, 15)),
     (None, (None, None)), ("", (None, None)), ("x:y", (None, None))],
)  # fmt: skip
def test_parse_exit_code(text: str | None, expected: tuple[int | None, int | None]) -> None:
    assert parse_exit_code(text) == expected


@pytest.mark.parametrize(
    ("state", "restarts", "phase", "failure"),
    [
        ("PENDING", 0, "pending", None),
        ("CONFIGURING", None, "pending", None),
        ("RUNNING", 0, "running", None),
        ("COMPLETING", 0, "running", None),
        ("SUSPENDED", 0, "running", None),
        ("COMPLETED", 0, "ended", None),
        ("FAILED", 0, "ended", "exit"),
        ("TIMEOUT", 0, "ended", "timeout"),
        ("DEADLINE", 0, "ended", "timeout"),
        ("CANCELLED", 0, "ended", "cancelled"),
        ("CANCELLED by 0", 0, "ended", "cancelled"),
        ("NODE_FAIL", 0, "ended", "node_fail"),
        ("BOOT_FAIL", 0, "ended", "node_fail"),
        ("PREEMPTED", 0, "ended", "preempted"),
        ("OUT_OF_MEMORY", 0, "ended", "host_oom"),
        ("REQUEUED", 0, "ended", "preempted"),
        ("PENDING", 1, "ended", "preempted"),  # scontrol requeue: pending again, restarted
        ("RUNNING", 2, "ended", "preempted"),  # requeued and already running again
        ("SOMETHING_NEW", 0, "running", None),  # unknown: left to the next poll
    ],
)
def test_state_map(state: str, restarts: int | None, phase: str, failure: str | None) -> None:
    rule = state_rule(state, restarts)
    assert (rule.phase, rule.failure) == (phase, failure)
    if rule.failure not in (None, "exit"):
        assert rule.hint


def test_every_state_failure_is_a_known_class() -> None:
    from tracker.rules.failure import FAILURE_CLASSES

    for rule in STATES.values():
        assert rule.failure in (None, "exit", *FAILURE_CLASSES)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("00:00:53", 53), ("01:00", 60), ("1-02:03:04", 93784), ("UNLIMITED", None),
     ("INVALID", None), (None, None), ("", None), ("10", None)],
)  # fmt: skip
def test_parse_slurm_time(text: str | None, seconds: int | None) -> None:
    assert parse_slurm_time(text) == seconds


@pytest.mark.parametrize(
    ("run", "limit", "grace", "near"),
    [(53, 60, 10, True), (3600 - 70, 3600, 10, True), (3600 - 71, 3600, 10, False),
     (3600 - 200, 3600, 10, False), (3600 - 200, 3600, 300, True), (50, None, 10, False),
     (None, 60, 10, False)],
)  # fmt: skip
def test_near_time_limit(run: int | None, limit: int | None, grace: int, near: bool) -> None:
    job = SlurmJob("1", "FAILED", None, None, run_time_s=run, time_limit_s=limit)
    assert near_time_limit(job, grace) is near


def test_sacct_argv_accounting_and_completion_log() -> None:
    acct = sacct_argv("42", completion=False)
    assert acct[:3] == ["sacct", "-j", "42"] and "-c" not in acct
    assert acct[-1] == "JobIDRaw,State,ExitCode,Elapsed,Timelimit,Reason,Comment"
    comp = sacct_argv("42", completion=True)
    assert comp[:2] == ["sacct", "-c"] and comp[-1] == "JobID,State,ExitCode,Elapsed,Timelimit"


def test_parse_sacct_accounting_line_keeps_a_comment_with_bars() -> None:
    text = (
        "41|COMPLETED|0:0|00:00:03|00:10:00|None|x\n"
        "42|CANCELLED by 0|0:15|00:01:02|01:00:00|None|tracker:ab:7:1:t|k\n"
    )
    job = parse_sacct(text, "42", completion=False)
    assert job == SlurmJob(
        "42", "CANCELLED", None, "tracker:ab:7:1:t|k", exit_code=0, signal=15,
        run_time_s=62, time_limit_s=3600,
    )  # fmt: skip


def test_parse_sacct_completion_log_takes_the_last_record_of_a_requeued_job() -> None:
    text = (
        "7|NODE_FAIL|0:0|00:00:09|UNLIMITED\n"
        "8|FAILED|1:0|00:00:01|UNLIMITED\n"
        "7|FAILED|3:0|00:00:02|UNLIMITED\n"
    )
    job = parse_sacct(text, "7", completion=True)
    assert job is not None and (job.state, job.exit_code, job.comment) == ("FAILED", 3, None)
    assert parse_sacct(text, "9", completion=True) is None  # not in the history
    assert parse_sacct("", "7", completion=True) is None
    assert parse_sacct("garbage without bars\n", "7", completion=True) is None


@pytest.mark.parametrize(
    ("history", "cause"),
    [
        ("7|NODE_FAIL|0:0|00:00:09|UNLIMITED\n", "NODE_FAIL"),
        ("7|NODE_FAIL|0:0|00:00:09|UNLIMITED\n7|PENDING|0:0|00:00:00|UNLIMITED\n", "NODE_FAIL"),
        ("7|BOOT_FAIL|0:0|00:00:00|UNLIMITED\n", "BOOT_FAIL"),
        ("7|NODE_FAIL|0:0|00:00:09|UNLIMITED\n7|PREEMPTED|0:0|00:00:03|UNLIMITED\n", "PREEMPTED"),
        ("7|REQUEUED|0:0|00:00:09|UNLIMITED\n", None),  # scontrol requeue: no failure seen
        ("8|NODE_FAIL|0:0|00:00:09|UNLIMITED\n", None),  # another job's
        ("", None),
    ],
)
def test_requeue_cause_from_the_history(history: str, cause: str | None) -> None:
    assert requeue_cause(parse_sacct_records(history, "7", completion=True)) == cause


@pytest.mark.parametrize(
    ("state", "restarts", "cause", "failure", "requeued"),
    [
        ("PENDING", 1, "NODE_FAIL", "node_fail", True),  # --requeue after a node failure
        ("RUNNING", 1, "BOOT_FAIL", "node_fail", True),
        ("PENDING", 1, "PREEMPTED", "preempted", True),
        ("PENDING", 1, None, "preempted", True),  # no history: as before
        ("NODE_FAIL", 0, None, "node_fail", False),  # not requeued: Slurm's own state
        ("REQUEUED", 0, None, "preempted", True),
        ("COMPLETED", 0, "NODE_FAIL", None, False),  # a cause without a restart is ignored
        ("CANCELLED", 1, "NODE_FAIL", "node_fail", False),  # ended since: nothing to cancel
        ("CANCELLED", 1, None, "preempted", False),
        ("RUNNING", 2, None, "preempted", True),
    ],
)
def test_requeued_job_is_a_node_failure_when_its_history_says_so(
    state: str, restarts: int, cause: str | None, failure: str | None, requeued: bool
) -> None:
    rule = state_rule(state, restarts, cause)
    assert rule.failure == failure
    assert was_requeued(state, restarts) is requeued


@given(st.text(max_size=300), st.text(alphabet="0123456789", min_size=1, max_size=4))
def test_sacct_records_never_raise_on_any_output(text: str, slurm_id: str) -> None:
    for completion in (False, True):
        records = parse_sacct_records(text, slurm_id, completion=completion)
        assert all(r.slurm_id == slurm_id for r in records)
        assert requeue_cause(records) in (None, *STATES)


# The first of each kind as sbatch 22.05 printed it here (SlurmctldPort pointing nowhere;
# -p nope); the others as Slurm's sources spell them.
UNREACHABLE = [
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
    "(connect failure)",
    "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
    "sbatch: error: Batch job submission failed: Zero Bytes were transmitted or received",
    "squeue: error: slurm_receive_msg: Socket timed out on send/recv operation",
]
REFUSED = [
    "sbatch: error: invalid partition specified: nope\n"
    "sbatch: error: Batch job submission failed: Invalid partition name specified",
    "sbatch: error: Batch job submission failed: Invalid account or account/partition "
    "combination specified",
    "sbatch: error: Batch job submission failed: Requested node configuration is not available",
    "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy "
    "(job submit limit, user's size and/or time limits)",
    "",
]


@pytest.mark.parametrize("said", UNREACHABLE)
def test_an_unreachable_controller_is_transient(said: str) -> None:
    assert is_transient_error(said)


@pytest.mark.parametrize("said", REFUSED)
def test_a_refused_request_is_not_transient(said: str) -> None:
    assert not is_transient_error(said)
