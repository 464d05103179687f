"""Fail the way real training jobs fail, for the failure classification tests."""

from __future__ import annotations

import os
import signal
import sys

OOM = """Traceback (most recent call last):
  File "train.py", line 42, in <module>
    logits = model(images)
  File "torch/nn/modules/module.py", line 1751, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total \
capacity of 79.15 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process \
has 78.08 GiB memory in use. Of the allocated memory 76.52 GiB is allocated by PyTorch, and \
1.02 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large \
try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.
"""
NCCL = """[rank1]:[E1130 02:13:44.123456 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught \
collective operation timeout: WorkNCCL(SeqNum=118, OpType=ALLREDUCE, NumelIn=2048, \
NumelOut=2048, Timeout(ms)=600000) ran for 600023 milliseconds before timing out.
[rank1]:[E1130 02:13:44.125000 ProcessGroupNCCL.cpp:1785] [PG 0 Rank 1] Exception (either an \
error or timeout) detected by watchdog at work: 118, last enqueued NCCL work: 118.
terminate called after throwing an instance of 'c10::DistBackendError'
"""


def main() -> None:
    mode = sys.argv[1]
    print(f"step 1 loss 0.5 ({mode})", flush=True)
    if mode == "oom":
        sys.stderr.write(OOM)
        sys.exit(1)
    if mode == "nccl":
        sys.stderr.write(NCCL)
        sys.stderr.flush()
        os.abort()  # the watchdog ends the process with SIGABRT
    if mode == "exception":
        raise ValueError("bad value 42 in batch 7")
    if mode == "exit137":
        os._exit(137)
    if mode == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
