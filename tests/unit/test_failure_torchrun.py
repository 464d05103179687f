"""torchrun failures: the first failing rank's real error, not torchrun's ChildFailedError;
gloo timeouts; CUDA errors (recorded GPU tracebacks) inside a rank's prefixed output.

The two fixtures are the real stderr of ``torchrun --nproc-per-node 2`` on CPU (gloo),
recorded with torch 2.13 (paths replaced): one rank raising, one rank hanging past the
process group's timeout."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_failure import DEVICE_ASSERT_TAIL, OOM_TAIL
from tracker.rules.failure import classify, torchrun_root_cause

FIXTURES = Path(__file__).parent / "fixtures"
RANK1_RAISES = (FIXTURES / "torchrun_rank1_valueerror.txt").read_text()
GLOO_TIMEOUT = (FIXTURES / "torchrun_gloo_timeout.txt").read_text()
SUMMARY = RANK1_RAISES[RANK1_RAISES.index("W1201") :]  # torchrun's own part of the output


def _prefixed(rank: int, text: str) -> str:
    return "".join(f"[rank{rank}]: {line}\n" for line in text.splitlines())


def test_first_failing_rank_error_instead_of_child_failed_error() -> None:
    failure = classify(1, None, RANK1_RAISES)
    assert failure is not None and failure.cls == "python_exception"
    assert failure.hint.startswith("rank 1 failed first: ValueError: rank 1 could not read")
    assert "ChildFailedError" not in failure.hint
    assert "Connection closed by peer" not in failure.hint  # rank 0 died of rank 1's death


def test_gloo_timeout_of_the_root_rank() -> None:
    failure = classify(1, None, GLOO_TIMEOUT)
    assert failure is not None and failure.cls == "gloo"
    assert failure.hint.startswith(
        "rank 0 failed first: A gloo collective (recv) timed out after 3 s"
    )


@pytest.mark.parametrize(
    ("tail", "cls"), [(OOM_TAIL, "cuda_oom"), (DEVICE_ASSERT_TAIL, "device_assert")]
)
def test_gpu_errors_inside_a_rank(tail: str, cls: str) -> None:
    text = (
        _prefixed(0, "ok")
        + _prefixed(3, tail)
        + SUMMARY.replace("rank      : 1 (local_rank: 1)", "rank      : 3 (local_rank: 3)")
    )
    failure = classify(1, None, text)
    assert failure is not None and failure.cls == cls
    assert failure.hint.startswith("rank 3 failed first:")


def test_root_cause_without_prefixes_reads_the_head() -> None:
    text = "Traceback (most recent call last):\n  File \"t.py\", line 1\nKeyError: 'x'\n" + SUMMARY
    root = torchrun_root_cause(text)
    assert root is not None and root[0] == 1 and "KeyError" in root[1]
    failure = classify(1, None, text)
    assert failure is not None and failure.hint == "rank 1 failed first: KeyError: 'x' (at t.py:1)"


def test_not_torchrun() -> None:
    assert torchrun_root_cause("ValueError: x") is None
    assert classify(1, None, "ValueError: x") is not None
