"""Why did a training job or run fail? A pure classifier over its exit status and output tail.

``classify`` never raises and never reads anything: the worker passes the exit code, the
signal, the last few KiB of stderr and what it observed (peak GPU memory, host memory
pressure, its own timeout or cancel); the client passes, for a run started by hand, its exit
code and the tail of its captured console output (``tracker/client/console.py``). It lives
in ``tracker.rules`` so both can use it (the client may not import the runner).
The result (``tracker.entities.Failure``) is a stable
class string and a hint that tells the user what to try next; whether it is retried is
decided by the retry policy (:mod:`tracker.runner.retry`).

``killed_by_signal`` is the class of a process stopped by SIGKILL/SIGTERM from outside the
job; it is not the run status ``killed`` (see ``tracker.entities.RunStatus``).

Order of evidence: the runner's own verdict (cancelled, timed out) first; then SIGKILL and
SIGTERM, which leave no traceback to read; then what stderr says (CUDA OOM, device assert,
NCCL, gloo, non-finite loss, a Python traceback); then any other signal; then the bare exit
code.

``missing_module``: the job's environment lacks a module (``No module named 'x.y'``, as the
final exception of a traceback, inside the message of an exception that wraps it, or printed
bare by ``python -m x``). The hint names the module and says how to get it: ``pip install``
with the distribution's name where it differs from the import name (``PIL`` -> ``pillow``)
and, when one of the tracker's own extras brings it, that extra (``tracker[media]``).
``import_error`` is left for an installed module that lacks a name (``cannot import name``:
a version mismatch).

torchrun (``torch.distributed.run``) ends every failure with its own ``ChildFailedError``
traceback, and the other ranks die of the first one's death ("Connection closed by peer",
SIGTERM). When that traceback is there, only the output of the rank its "Root Cause (first
observed failure)" names (the lines prefixed ``[rankN]:``) is classified, and the hint says
which rank failed first.
"""

from __future__ import annotations

import re
import signal as _signal
from dataclasses import dataclass

__all__ = [
    "CANCELLED",
    "CUDA_OOM",
    "DEVICE_ASSERT",
    "EXIT_CODE",
    "FAILURE_CLASSES",
    "GLOO",
    "HOST_OOM",
    "IMPORT_ERROR",
    "KILLED_BY_SIGNAL",
    "MISSING_FILE",
    "MISSING_MODULE",
    "NCCL",
    "NODE_FAIL",
    "NONFINITE_LOSS",
    "PREEMPTED",
    "PYTHON_EXCEPTION",
    "TIMEOUT",
    "Failure",
    "PythonError",
    "classify",
    "install_hint",
    "last_python_error",
    "missing_module_name",
    "torchrun_root_cause",
]

CUDA_OOM = "cuda_oom"
NCCL = "nccl"
GLOO = "gloo"
DEVICE_ASSERT = "device_assert"
NONFINITE_LOSS = "nonfinite_loss"
HOST_OOM = "host_oom"
KILLED_BY_SIGNAL = "killed_by_signal"
TIMEOUT = "timeout"
CANCELLED = "cancelled"
# A sweep's pruner stopped the trial (tracker.store.sweeps): not a failure of its code.
PRUNED = "pruned"
IMPORT_ERROR = "import_error"
MISSING_FILE = "missing_file"
MISSING_MODULE = "missing_module"
PYTHON_EXCEPTION = "python_exception"
EXIT_CODE = "exit_code"
# Set by a cluster scheduler's executor (tracker.rules.slurm), never read from output.
PREEMPTED = "preempted"
NODE_FAIL = "node_fail"
FAILURE_CLASSES = (
    CUDA_OOM,
    NCCL,
    DEVICE_ASSERT,
    NONFINITE_LOSS,
    HOST_OOM,
    KILLED_BY_SIGNAL,
    TIMEOUT,
    CANCELLED,
    IMPORT_ERROR,
    MISSING_FILE,
    PYTHON_EXCEPTION,
    EXIT_CODE,
    GLOO,
    PREEMPTED,
    NODE_FAIL,
    MISSING_MODULE,
    PRUNED,
)


@dataclass(frozen=True)
class Failure:
    """Why an attempt failed: a failure class (the constants above) and a one-line hint that
    says what to try next. Whether it is retried is the retry policy's decision
    (``tracker.runner.retry``), not the failure's. Re-exported as ``tracker.entities.Failure``."""

    cls: str
    hint: str


_GIB = 1024**3
_MAX_DETAIL = 300


@dataclass(frozen=True)
class PythonError:
    """The final exception of the last traceback: ``type_name: message`` and where it rose."""

    type_name: str
    message: str
    location: str | None = None

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}" if self.message else self.type_name


# --------------------------------------------------------------------- traceback parsing

# torchrun (PyTorch >= 2.3) prefixes every line of a rank's output with "[rank0]: ".
_RANK_PREFIX = re.compile(r"^\[(?:default)?rank\d+\]: ?")
_TRACEBACK_HEADER = "Traceback (most recent call last):"
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::(?: (.*))?)?$")
_EXC_LINE_LOOSE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): ?(.*)$")
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+)(?:, in (.+))?$')


def _clean_lines(stderr_tail: str) -> list[str]:
    return [_RANK_PREFIX.sub("", line.rstrip("\r")) for line in stderr_tail.splitlines()]


def _shorten(text: str, limit: int = _MAX_DETAIL) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def last_python_error(stderr_tail: str) -> PythonError | None:
    """The exception that ended the last Python traceback in ``stderr_tail``, if any.

    Chained exceptions print several tracebacks; the last one is the exception that escaped.
    The exception line is the first unindented line after the traceback's frames. When the
    tail was cut before any traceback header, the last line shaped like ``SomeError: text``
    is used instead.
    """
    lines = _clean_lines(stderr_tail)
    header = max(
        (i for i, line in enumerate(lines) if line.strip() == _TRACEBACK_HEADER), default=None
    )
    if header is None:
        for line in reversed(lines):
            m = _EXC_LINE_LOOSE.match(line.strip())
            if m:
                return PythonError(m.group(1), _shorten(m.group(2)))
        return None
    location = None
    for line in lines[header + 1 :]:
        frame = _FRAME.match(line)
        if frame:
            name = f" in {frame.group(3)}" if frame.group(3) else ""
            location = f"{frame.group(1)}:{frame.group(2)}{name}"
            continue
        if not line.strip() or line[:1].isspace():
            continue  # source lines, carets, "[Previous line repeated ...]"
        m = _EXC_LINE.match(line.strip())
        if m:
            return PythonError(m.group(1), _shorten(m.group(2) or ""), location)
        return PythonError(_shorten(line), "", location)
    return None


# ---------------------------------------------------------------------- stderr patterns

_CUDA_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|HIP out of memory"
)
_TRIED = re.compile(r"Tried to allocate ([\d.]+ [KMGT]?i?B)")
_CAPACITY = re.compile(r"total capacity of ([\d.]+ [KMGT]?i?B)")
_DEVICE_ASSERT = re.compile(r"device-side assert(?:ion)? triggered", re.IGNORECASE)
_NCCL_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout|NCCL.{0,80}tim(?:ed )?out", re.IGNORECASE
)
_NCCL_ERROR = re.compile(
    r"NCCL error|nccl(?:Internal|System|Unhandled\w*|Invalid\w*|Remote)Error|ProcessGroupNCCL"
    r"|DistBackendError"
)
_NCCL_OP = re.compile(r"OpType=(\w+)")
_NCCL_RAN_FOR = re.compile(r"ran for (\d+) milliseconds")
_NCCL_RANK = re.compile(r"\[Rank (\d+)\]")
_NONFINITE_TYPES = ("NonFiniteLossError",)
_NONFINITE_TEXT = re.compile(
    r"\bloss\b[^\n]{0,40}?\b(?:nan|inf|infinite|infinity|non-?finite)\b", re.IGNORECASE
)
_DATALOADER_KILLED = re.compile(
    r"DataLoader worker \(pids?[^)]*\) (?:is killed by signal: Killed|exited unexpectedly)"
)
_HOST_KILLED = re.compile(r"^\s*Killed\s*$|Out of memory: Kill|oom-kill", re.MULTILINE)
# "No module named 'x.y'" (Python 3) and "No module named x.y" (Python 2, some C extensions)
_NO_MODULE = re.compile(r"No module named (?:'([^'\s]+)'|([A-Za-z_][\w.]*))")
# Import names whose distribution on PyPI is named differently (``pip install <value>``).
_DISTRIBUTIONS: dict[str, str] = {
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "yaml": "pyyaml",
    "cv2": "opencv-python",
    "bs4": "beautifulsoup4",
    "pynvml": "nvidia-ml-py",
    "psycopg": "psycopg[binary]",
    "psycopg2": "psycopg2-binary",
    "pytorch_lightning": "pytorch-lightning",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "dotenv": "python-dotenv",
    "jwt": "PyJWT",
    "git": "GitPython",
    "hydra": "hydra-core",
    "faiss": "faiss-cpu",
    "zmq": "pyzmq",
    "serial": "pyserial",
    "Crypto": "pycryptodome",
    "OpenSSL": "pyOpenSSL",
    "fitz": "pymupdf",
    "docx": "python-docx",
    "google.protobuf": "protobuf",
}
# Import names the tracker's own extras bring (pyproject.toml [project.optional-dependencies];
# tests/unit/test_failure_modules.py checks the two agree).
_EXTRAS: dict[str, str] = {
    "flask": "server",
    "gunicorn": "server",
    "apscheduler": "runner",
    "tzlocal": "runner",
    "optuna": "runner",
    "cmaes": "runner",
    "psycopg": "postgres",
    "pynvml": "gpu",
    "torch": "torch",
    "lightning": "integrations",
    "transformers": "integrations",
    "accelerate": "integrations",
    "boto3": "s3",
    "PIL": "media",
}
_CANNOT_IMPORT = re.compile(r"cannot import name '([^']+)'(?: from '([^']+)')?")
_NO_SUCH_FILE = re.compile(r"No such file or directory: '([^']+)'|can't open file '([^']+)'")


def _cuda_oom(text: str, peak_gpu_bytes: int | None) -> Failure:
    facts = []
    tried = _TRIED.search(text)
    if tried:
        facts.append(f"tried to allocate {tried.group(1)}")
    if peak_gpu_bytes is not None and peak_gpu_bytes >= 0:
        facts.append(f"peak allocated {peak_gpu_bytes / _GIB:.2f} GiB")
    capacity = _CAPACITY.search(text)
    if capacity:
        facts.append(f"GPU total {capacity.group(1)}")
    seen = f" ({'; '.join(facts)})" if facts else ""
    return Failure(
        CUDA_OOM,
        f"CUDA ran out of GPU memory{seen}. Try a smaller batch size (with gradient "
        "accumulation to keep the effective batch), gradient checkpointing or mixed precision; "
        "if much memory is reserved but unallocated, set "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
    )


def _nccl(text: str) -> Failure:
    if _NCCL_TIMEOUT.search(text):
        op = _NCCL_OP.search(text)
        ran = _NCCL_RAN_FOR.search(text)
        rank = _NCCL_RANK.search(text)
        what = f"collective {op.group(1)}" if op else "a collective operation"
        after = f" after {int(ran.group(1)) / 1000:g} s" if ran else ""
        where = f" on rank {rank.group(1)}" if rank else ""
        head = f"NCCL {what} timed out{after}{where}: another rank probably died or hung"
        head += " (look for the first error in every rank's log) or ranks ran different code paths"
    else:
        head = "NCCL reported an error: a rank may have died, or the network/GPUs are misconfigured"
    return Failure(
        NCCL,
        f"{head}. Rerun with NCCL_DEBUG=INFO (and TORCH_DISTRIBUTED_DEBUG=DETAIL) to see which.",
    )


_GLOO_TIMEOUT = re.compile(r"gloo.{0,200}?Timed out waiting (\d+)ms for (\w+) operation")
_GLOO_PEER = re.compile(r"gloo.{0,200}?Connection closed by peer")


def _gloo(text: str) -> Failure | None:
    timeout = _GLOO_TIMEOUT.search(text)
    if timeout:
        ms, op = int(timeout.group(1)), timeout.group(2)
        return Failure(
            GLOO,
            f"A gloo collective ({op}) timed out after {ms / 1000:g} s: another rank hung or "
            "died before reaching it (read the other ranks' first error), or the ranks ran "
            "different code paths. Raise the timeout of init_process_group only if a rank is "
            "legitimately slow (e.g. saving a checkpoint).",
        )
    if _GLOO_PEER.search(text):
        return Failure(
            GLOO,
            "A gloo connection was closed by a peer rank: that rank crashed first; its own "
            "error is the one to fix (look for the first traceback among the ranks' logs).",
        )
    return None


# torchrun's summary: "Root Cause (first observed failure):\n[0]:\n  time : ...\n  rank : 1"
_CHILD_FAILED = "ChildFailedError"
_ROOT_CAUSE = re.compile(
    r"Root Cause \(first observed failure\):(?:\n.*){0,4}?\n\s*rank\s*:\s*(\d+)"
)
_RANK_LINE = re.compile(r"^\[(?:default)?rank(\d+)\]:(.*)$")


def torchrun_root_cause(text: str) -> tuple[int, str] | None:
    """The first failing rank torchrun names, and that rank's own output (its ``[rankN]:``
    lines, unprefixed), or ``None`` when ``text`` is not a torchrun failure or the rank's
    output cannot be told apart."""
    if _CHILD_FAILED not in text:
        return None
    found = _ROOT_CAUSE.search(text)
    if found is None:
        return None
    rank = int(found.group(1))
    own = [m.group(2) for line in text.splitlines() if (m := _RANK_LINE.match(line.rstrip("\r")))
           and int(m.group(1)) == rank]  # fmt: skip
    if not own:  # older torch, or output redirected: torchrun's head holds the rank's error
        head = text[: text.rfind(_TRACEBACK_HEADER)] if _TRACEBACK_HEADER in text else ""
        return (rank, head) if head.strip() else None
    return rank, "\n".join(line[1:] if line.startswith(" ") else line for line in own)


def _from_stderr(
    text: str, error: PythonError | None, peak_gpu_bytes: int | None
) -> Failure | None:
    if _DEVICE_ASSERT.search(text):
        return Failure(
            DEVICE_ASSERT,
            "A CUDA kernel hit a device-side assert (often an index out of range, e.g. a label "
            ">= num_classes in a loss or an embedding index). CUDA reports it late and at the "
            "wrong line: rerun on CPU or with CUDA_LAUNCH_BLOCKING=1 to see the real error.",
        )
    if _CUDA_OOM.search(text):
        return _cuda_oom(text, peak_gpu_bytes)
    if _NCCL_TIMEOUT.search(text) or _NCCL_ERROR.search(text):
        return _nccl(text)
    gloo = _gloo(text)
    if gloo is not None:
        return gloo
    nonfinite = _nonfinite(text, error)
    if nonfinite:
        return nonfinite
    if _DATALOADER_KILLED.search(text):
        return Failure(
            HOST_OOM,
            "A DataLoader worker was killed, most likely by the host's out-of-memory killer. "
            "Lower num_workers or prefetch_factor, or avoid copying large Python lists into "
            "each worker.",
        )
    if error is not None:
        return _from_python_error(error)
    if missing_module_name(text) is not None:  # `python -m pkg` prints no traceback
        return _import_failure(text)
    return _missing_file(text)


def _nonfinite(text: str, error: PythonError | None) -> Failure | None:
    # With a traceback, only its final exception counts: an earlier "loss: nan" log line
    # does not explain a later ValueError.
    if error is not None:
        short_type = error.type_name.rsplit(".", 1)[-1]
        m = _NONFINITE_TEXT.search(str(error))
        if short_type not in _NONFINITE_TYPES and m is None:
            return None
        evidence = str(error)
    else:
        m = _NONFINITE_TEXT.search(text)
        if m is None and not any(t in text for t in _NONFINITE_TYPES):
            return None
        evidence = m.group(0) if m else ""
    said = f" ({_shorten(evidence, 120)})" if evidence else ""
    return Failure(
        NONFINITE_LOSS,
        f"The loss became NaN or Inf{said}. Lower the learning rate, add gradient clipping, "
        "check the inputs for NaN, or use bf16 / a GradScaler instead of plain fp16.",
    )


def missing_module_name(text: str) -> str | None:
    """The module a ``No module named ...`` message names (dotted, as written), or ``None``."""
    found = _NO_MODULE.search(text)
    if found is None:
        return None
    return found.group(1) or found.group(2)


def install_hint(module: str) -> str:
    """How to get the importable ``module``: ``pip install <distribution>`` for its top-level
    package (``PIL`` -> ``pillow``), plus the tracker extra that brings it, if one does."""
    top = module.split(".", 1)[0]
    parts = module.split(".")
    prefixes = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
    dist = next((_DISTRIBUTIONS[p] for p in prefixes if p in _DISTRIBUTIONS), top)
    if "[" in dist:
        dist = f"'{dist}'"  # brackets are a glob pattern to zsh
    extra = _EXTRAS.get(top)
    brought = f" (or pip install 'tracker[{extra}]', which brings it)" if extra else ""
    return f"pip install {dist}{brought}"


def _import_failure(text: str) -> Failure:
    name = missing_module_name(text)
    if name is not None:
        top = name.split(".", 1)[0]
        which = f"'{name}'" + (f" (package '{top}')" if top != name else "")
        return Failure(
            MISSING_MODULE,
            f"Python module {which} is not installed in the job's environment: "
            f"{install_hint(name)}; or run the job with the interpreter that has it.",
        )
    cannot = _CANNOT_IMPORT.search(text)
    what = "a name"
    if cannot:
        what = f"'{cannot.group(1)}'" + (f" from '{cannot.group(2)}'" if cannot.group(2) else "")
    return Failure(
        IMPORT_ERROR,
        f"Import failed: cannot import {what} ({_shorten(text, 160)}); check the installed "
        "package versions.",
    )


def _from_python_error(error: PythonError) -> Failure:
    short_type = error.type_name.rsplit(".", 1)[-1]
    if short_type in ("ModuleNotFoundError", "ImportError"):
        return _import_failure(str(error))
    if missing_module_name(error.message) is not None:  # wrapped: "UploadError: ... No module"
        return _import_failure(error.message)
    if short_type == "FileNotFoundError":
        found = _missing_file(str(error))
        if found:
            return found
    where = f" (at {error.location})" if error.location else ""
    return Failure(PYTHON_EXCEPTION, f"{error}{where}")


def _missing_file(text: str) -> Failure | None:
    matches = list(_NO_SUCH_FILE.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    path = m.group(1) or m.group(2)
    return Failure(
        MISSING_FILE,
        f"File not found: '{path}'. Relative paths resolve against the job's working "
        "directory; check the path and that the data is mounted on this host.",
    )


# ---------------------------------------------------------------------------- signals


def _signal_name(signum: int) -> str:
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


_SIGNAL_NOTES: dict[int, str] = {
    _signal.SIGSEGV: " (segmentation fault: a crash in native code such as a C++/CUDA extension)",
    _signal.SIGABRT: " (abort: usually a failed check in native code; see the lines above it)",
    _signal.SIGINT: " (interrupted, as by Ctrl-C)",
}


def _effective_signal(exit_code: int | None, signum: int | None) -> int | None:
    if signum is not None:
        return signum
    if exit_code is not None and exit_code < 0:
        return -exit_code  # subprocess reports death by signal N as returncode -N
    if exit_code is not None and 128 < exit_code <= 128 + 64:
        return exit_code - 128  # shells report it as 128 + N
    return None


def _killed(signum: int, text: str, host_oom_suspected: bool) -> Failure:
    if signum == _signal.SIGKILL and (host_oom_suspected or _HOST_KILLED.search(text)):
        return Failure(
            HOST_OOM,
            "The process was killed (SIGKILL) while the host was out of memory. Lower "
            "DataLoader num_workers, the batch size or in-memory caching, or run on a host "
            "with more RAM.",
        )
    return Failure(
        KILLED_BY_SIGNAL,
        f"The process was killed by {_signal_name(signum)} from outside the job (another "
        "user, a cluster scheduler's preemption, or a system shutdown).",
    )


def classify(
    exit_code: int | None,
    signal: int | None,
    stderr_tail: str,
    *,
    peak_gpu_bytes: int | None = None,
    host_oom_suspected: bool = False,
    timed_out: bool = False,
    cancelled: bool = False,
) -> Failure | None:
    """Classify how a job ended; ``None`` when it succeeded (exit 0, no signal, no flag).

    ``signal`` is the signal that ended the process if known; otherwise a negative
    ``exit_code`` (``-N``) or one of ``129..192`` (``128 + N``) is read as signal ``N``.
    Never raises.
    """
    text = stderr_tail or ""
    if cancelled:
        return Failure(CANCELLED, "The job was cancelled.")
    if timed_out:
        return Failure(
            TIMEOUT,
            "The job ran past its time limit and was stopped. Raise --timeout, or save "
            "checkpoints so a retry resumes instead of starting over.",
        )
    signum = _effective_signal(exit_code, signal)
    if exit_code == 0 and signum is None:
        return None
    if signum in (_signal.SIGKILL, _signal.SIGTERM):
        return _killed(signum, text, host_oom_suspected)
    root = torchrun_root_cause(text)
    if root is not None:
        rank, own = root
        found = _from_stderr(own, last_python_error(own), peak_gpu_bytes)
        if found is not None:
            return Failure(found.cls, f"rank {rank} failed first: {found.hint}")
    found = _from_stderr(text, last_python_error(text), peak_gpu_bytes)
    if found is not None:
        return found
    if signum is not None:
        why = _SIGNAL_NOTES.get(signum, "")
        return Failure(EXIT_CODE, f"The process was terminated by {_signal_name(signum)}{why}.")
    if exit_code is None:
        return Failure(EXIT_CODE, "The process ended without an exit status.")
    return Failure(EXIT_CODE, f"The process exited with code {exit_code}.")
