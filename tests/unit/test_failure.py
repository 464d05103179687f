from __future__ import annotations

import signal

import pytest

from tracker.entities import Failure
from tracker.rules.failure import (
    FAILURE_CLASSES,
    PythonError,
    classify,
    last_python_error,
)
from tracker.runner.retry import is_retryable

OOM_TAIL = """\
Epoch 3:  41%|████      | 412/1000 [02:13<03:10,  3.09it/s]
Traceback (most recent call last):
  File "/home/u/proj/train.py", line 88, in <module>
    main()
  File "/home/u/proj/train.py", line 71, in main
    loss.backward()
  File "/opt/venv/lib/python3.11/site-packages/torch/_tensor.py", line 522, in backward
    torch.autograd.backward(
  File "/opt/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 266, in backward
    Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total \
capacity of 79.10 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process \
has 78.03 GiB memory in use. Of the allocated memory 74.52 GiB is allocated by PyTorch, and \
2.91 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large \
try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See \
documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
"""

NCCL_TAIL = """\
[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=4417, OpType=ALLREDUCE, NumelIn=25557032, NumelOut=25557032, Timeout(ms)=600000) \
ran for 600000 milliseconds before timing out.
[rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 1] Timeout at NCCL work: 4417, last enqueued \
NCCL work: 4417, last completed NCCL work: 4416.
[rank1]:[E ProcessGroupNCCL.cpp:577] [Rank 1] Some NCCL operations have failed or timed out. Due \
to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on \
corrupted/incomplete data.
[rank1]:[E ProcessGroupNCCL.cpp:583] [Rank 1] To avoid data inconsistency, we are taking the \
entire process down.
terminate called after throwing an instance of 'c10::DistBackendError'
"""

NCCL_ERROR_TAIL = """\
Traceback (most recent call last):
  File "train.py", line 30, in <module>
    dist.all_reduce(t)
torch.distributed.DistBackendError: NCCL error in: \
../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, \
unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
"""

DEVICE_ASSERT_TAIL = """\
../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], \
thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.
Traceback (most recent call last):
  File "train.py", line 51, in <module>
    print(loss.item())
          ^^^^^^^^^^^
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace \
below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""

NONFINITE_TAIL = """\
step 1200 loss 2.3101
Traceback (most recent call last):
  File "train.py", line 90, in <module>
    tracker.log({"loss": loss}, step=step)
  File "/opt/venv/lib/python3.11/site-packages/tracker/client/run.py", line 140, in log
    raise NonFiniteLossError(key, value, step)
tracker.errors.NonFiniteLossError: metric 'loss' is NaN at step 1201 (abort_on_nonfinite=True)
"""

DETECTRON_TAIL = """\
Traceback (most recent call last):
  File "tools/train_net.py", line 161, in <module>
    launch(main)
FloatingPointError: Loss became infinite or NaN at iteration=3!
loss_dict = {'loss_cls': nan, 'loss_box_reg': nan}
"""

CHAINED_TAIL = """\
Traceback (most recent call last):
  File "data.py", line 10, in load
    return cache[key]
           ~~~~~^^^^^
KeyError: 'train'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "train.py", line 5, in <module>
    load("train")
  File "data.py", line 12, in load
    raise ValueError("bad shape: expected (N, 3, 32, 32), got (N, 32, 32, 3)")
ValueError: bad shape: expected (N, 3, 32, 32), got (N, 32, 32, 3)
"""

CAUSE_TAIL = """\
Traceback (most recent call last):
  File "train.py", line 3, in <module>
    import yaml
ModuleNotFoundError: No module named 'yaml'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "train.py", line 5, in <module>
    raise RuntimeError("config loader unavailable") from exc
RuntimeError: config loader unavailable
"""

IMPORT_TAIL = """\
Traceback (most recent call last):
  File "/home/u/proj/examples/train.py", line 4, in <module>
    import torchvision.transforms.v2 as T
ModuleNotFoundError: No module named 'torchvision'
"""

CANNOT_IMPORT_TAIL = """\
Traceback (most recent call last):
  File "train.py", line 2, in <module>
    from transformers import LlamaForCausalLM
ImportError: cannot import name 'LlamaForCausalLM' from 'transformers' \
(/venv/transformers/__init__.py)
"""

FILE_TAIL = """\
Traceback (most recent call last):
  File "train.py", line 20, in <module>
    df = open(args.data)
         ^^^^^^^^^^^^^^^
FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv'
"""

NO_SCRIPT_TAIL = (
    "python: can't open file '/jobs/42/trian.py': [Errno 2] No such file or directory\n"
)

DATALOADER_TAIL = """\
Traceback (most recent call last):
  File "train.py", line 40, in <module>
    for batch in loader:
RuntimeError: DataLoader worker (pid 41234) is killed by signal: Killed.
"""

RANK_PREFIXED_TAIL = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "train.py", line 12, in <module>
[rank0]:     model(x)
[rank0]: AssertionError: input must be 4-D
"""

TRUNCATED_TAIL = """\
    raise TypeError(f"expected Tensor, got {type(x)}")
TypeError: expected Tensor, got <class 'list'>
wandb: Waiting for W&B process to finish... (failed 1).
"""

LOG_NAN_THEN_OTHER_ERROR = """\
step 10 loss nan
Traceback (most recent call last):
  File "train.py", line 9, in <module>
    check(x)
ValueError: bad shape
"""

CASES = [
    # (id, kwargs for classify, expected class, retried by the policy without retry_on_failure,
    #  fragments that the hint contains)
    ("oom", dict(exit_code=1, signal=None, stderr_tail=OOM_TAIL), "cuda_oom", False,
     ["tried to allocate 2.00 GiB", "GPU total 79.10 GiB", "smaller batch",
      "gradient checkpointing", "expandable_segments:True"]),
    ("oom-peak", dict(exit_code=1, signal=None, stderr_tail=OOM_TAIL, peak_gpu_bytes=77 * 2**30),
     "cuda_oom", False, ["peak allocated 77.00 GiB"]),
    ("oom-plain", dict(exit_code=1, signal=None, stderr_tail="RuntimeError: CUDA out of memory."),
     "cuda_oom", False, ["CUDA ran out of GPU memory."]),
    ("nccl-timeout", dict(exit_code=-6, signal=None, stderr_tail=NCCL_TAIL), "nccl", False,
     ["ALLREDUCE", "after 600 s", "rank 1", "NCCL_DEBUG=INFO", "died"]),
    ("nccl-error", dict(exit_code=1, signal=None, stderr_tail=NCCL_ERROR_TAIL), "nccl", False,
     ["NCCL reported an error", "NCCL_DEBUG=INFO"]),
    ("device-assert", dict(exit_code=1, signal=None, stderr_tail=DEVICE_ASSERT_TAIL),
     "device_assert", False, ["CUDA_LAUNCH_BLOCKING=1", "on CPU"]),
    ("nonfinite-own", dict(exit_code=1, signal=None, stderr_tail=NONFINITE_TAIL),
     "nonfinite_loss", False, ["NaN or Inf", "NonFiniteLossError", "learning rate"]),
    ("nonfinite-detectron", dict(exit_code=1, signal=None, stderr_tail=DETECTRON_TAIL),
     "nonfinite_loss", False, ["Loss became infinite or NaN"]),
    ("nonfinite-no-traceback", dict(exit_code=2, signal=None, stderr_tail="error: loss is nan\n"),
     "nonfinite_loss", False, ["loss is nan"]),
    ("chained", dict(exit_code=1, signal=None, stderr_tail=CHAINED_TAIL), "python_exception",
     False, ["ValueError: bad shape: expected (N, 3, 32, 32)", "data.py:12 in load"]),
    ("cause", dict(exit_code=1, signal=None, stderr_tail=CAUSE_TAIL), "python_exception", False,
     ["RuntimeError: config loader unavailable"]),
    ("import", dict(exit_code=1, signal=None, stderr_tail=IMPORT_TAIL), "missing_module", False,
     ["'torchvision'", "pip install torchvision"]),
    ("cannot-import", dict(exit_code=1, signal=None, stderr_tail=CANNOT_IMPORT_TAIL),
     "import_error", False, ["'LlamaForCausalLM' from 'transformers'"]),
    ("file", dict(exit_code=1, signal=None, stderr_tail=FILE_TAIL), "missing_file", False,
     ["'data/train.csv'"]),
    ("no-script", dict(exit_code=2, signal=None, stderr_tail=NO_SCRIPT_TAIL), "missing_file",
     False, ["'/jobs/42/trian.py'"]),
    ("dataloader-killed", dict(exit_code=1, signal=None, stderr_tail=DATALOADER_TAIL), "host_oom",
     True, ["num_workers"]),
    ("rank-prefixed", dict(exit_code=1, signal=None, stderr_tail=RANK_PREFIXED_TAIL),
     "python_exception", False, ["AssertionError: input must be 4-D", "train.py:12"]),
    ("truncated", dict(exit_code=1, signal=None, stderr_tail=TRUNCATED_TAIL), "python_exception",
     False, ["TypeError: expected Tensor, got <class 'list'>"]),
    ("log-nan-then-error", dict(exit_code=1, signal=None, stderr_tail=LOG_NAN_THEN_OTHER_ERROR),
     "python_exception", False, ["ValueError: bad shape"]),
    ("sigkill-host-oom-flag", dict(exit_code=None, signal=9, stderr_tail="",
     host_oom_suspected=True), "host_oom", True, ["out of memory", "num_workers"]),
    ("exit137-killed-line", dict(exit_code=137, signal=None, stderr_tail="epoch 1\nKilled\n"),
     "host_oom", True, ["SIGKILL"]),
    ("returncode-minus9", dict(exit_code=-9, signal=None, stderr_tail=""), "killed_by_signal", True,
     ["SIGKILL"]),
    ("sigterm", dict(exit_code=143, signal=None, stderr_tail=""), "killed_by_signal", True,
     ["SIGTERM"]),
    ("sigkill-beats-traceback", dict(exit_code=-9, signal=None, stderr_tail=CHAINED_TAIL),
     "killed_by_signal", True, ["SIGKILL"]),
    ("timeout", dict(exit_code=-15, signal=None, stderr_tail="", timed_out=True), "timeout", True,
     ["time limit", "--timeout"]),
    ("cancelled", dict(exit_code=-15, signal=15, stderr_tail=OOM_TAIL, cancelled=True),
     "cancelled", False, ["cancelled"]),
    ("cancel-beats-timeout", dict(exit_code=0, signal=None, stderr_tail="", cancelled=True,
     timed_out=True), "cancelled", False, []),
    ("segfault", dict(exit_code=-11, signal=None, stderr_tail="Segmentation fault"), "exit_code",
     False, ["SIGSEGV", "native code"]),
    ("abort-with-device-assert", dict(exit_code=134, signal=None, stderr_tail=DEVICE_ASSERT_TAIL),
     "device_assert", False, ["CUDA_LAUNCH_BLOCKING=1"]),
    ("plain-exit", dict(exit_code=3, signal=None, stderr_tail="usage: train.py [-h]\n"),
     "exit_code", False, ["exited with code 3"]),
    ("exit-255", dict(exit_code=255, signal=None, stderr_tail=""), "exit_code", False,
     ["exited with code 255"]),
    ("unknown-status", dict(exit_code=None, signal=None, stderr_tail=""), "exit_code", False,
     ["without an exit status"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "cls", "retryable", "fragments"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_classify(kwargs: dict, cls: str, retryable: bool, fragments: list[str]) -> None:
    failure = classify(**kwargs)
    assert failure is not None
    assert failure.cls == cls
    assert failure.cls in FAILURE_CLASSES
    assert is_retryable(failure.cls, retry_on_failure=False) is retryable
    for fragment in fragments:
        assert fragment in failure.hint, (fragment, failure.hint)


@pytest.mark.parametrize("tail", ["", OOM_TAIL, "all good\n"])
def test_exit_zero_is_success(tail: str) -> None:
    assert classify(0, None, tail) is None


def test_python_exception_hint_is_exactly_type_message_and_location() -> None:
    tail = (
        'Traceback (most recent call last):\n  File "t.py", line 1, in <module>\n'
        "ValueError: bad shape\n"
    )
    assert classify(1, None, tail) == Failure(
        "python_exception", "ValueError: bad shape (at t.py:1 in <module>)"
    )


def test_signal_argument_wins_over_exit_code_and_128_plus_n() -> None:
    assert classify(1, signal.SIGTERM, "").cls == "killed_by_signal"
    assert classify(130, None, "").hint.startswith("The process was terminated by SIGINT")
    assert "signal 99" in classify(None, 99, "").hint


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (CHAINED_TAIL, PythonError(
            "ValueError", "bad shape: expected (N, 3, 32, 32), got (N, 32, 32, 3)",
            "data.py:12 in load")),
        (CAUSE_TAIL, PythonError("RuntimeError", "config loader unavailable",
                                 "train.py:5 in <module>")),
        ('Traceback (most recent call last):\n  File "a.py", line 2, in f\n'
         "KeyboardInterrupt\n", PythonError("KeyboardInterrupt", "", "a.py:2 in f")),
        ("Traceback (most recent call last):\n  File \"a.py\", line 2, in f\n"
         "    x()\nRuntimeError:\n", PythonError("RuntimeError", "", "a.py:2 in f")),
        (TRUNCATED_TAIL, PythonError("TypeError", "expected Tensor, got <class 'list'>")),
        ("no errors here\n", None),
        ("Traceback (most recent call last):\n", None),
    ],
)  # fmt: skip
def test_last_python_error(tail: str, expected: PythonError | None) -> None:
    assert last_python_error(tail) == expected


def test_last_python_error_shortens_long_messages() -> None:
    error = last_python_error("ValueError: " + "x" * 5000)
    assert error is not None and len(error.message) <= 300 and error.message.endswith("…")
    assert str(PythonError("KeyError", "")) == "KeyError"


def test_every_class_has_a_stable_name() -> None:
    assert FAILURE_CLASSES == (
        "cuda_oom", "nccl", "device_assert", "nonfinite_loss", "host_oom", "killed_by_signal",
        "timeout", "cancelled", "import_error", "missing_file", "python_exception", "exit_code",
        "gloo", "preempted", "node_fail", "missing_module", "pruned",
    )  # fmt: skip
