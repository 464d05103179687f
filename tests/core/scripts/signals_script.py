"""A training script for the automatic-signals tests: ``signals_script.py URI MODE [ARG]``.

Prints ``RUN <id>`` first. Modes: steps, short, no-signals, exit N, caught-exit, raise, oom, quiet,
noisy N, watch, compile.
"""

from __future__ import annotations

import sys
import time

import tracker

uri, mode = sys.argv[1], sys.argv[2]
arg = sys.argv[3] if len(sys.argv) > 3 else ""
options = {"console_max_chars": 10_000} if mode == "noisy" else {}
if mode == "quiet":
    options["capture_console"] = False
if mode == "no-signals":  # system metrics off: the automatic signals follow
    run = tracker.init(project="signals", uri=uri, system_interval=None)
elif mode == "short":  # the defaults: system metrics (and so the automatic signals) on
    run = tracker.init(project="signals", uri=uri, **options)
else:  # the sampler thread off, the automatic signals asked for explicitly
    run = tracker.init(
        project="signals", uri=uri, system_interval=None, auto_signals=True, **options
    )
print(f"RUN {run.id}", flush=True)

if mode == "steps":  # 2.5 s of steps that take 50 ms each
    for step in range(50):
        time.sleep(0.05)
        tracker.log({"loss": 1.0 / (step + 1)}, step=step)
elif mode in ("short", "no-signals"):
    for step in range(3):
        tracker.log({"loss": 1.0}, step=step)
elif mode == "exit":
    tracker.log({"loss": 1.0}, step=0)

    def main() -> None:
        with open(__file__):  # a with block on the way out must not hide the exit
            sys.exit(int(arg))

    main()
elif mode == "caught-exit":

    def parse() -> None:
        try:
            sys.exit(2)
        except SystemExit:
            print("caught SystemExit(2), going on")

    parse()
    tracker.log({"loss": 1.0}, step=0)
elif mode == "raise":
    print("line one on stdout")
    print("line two on stderr", file=sys.stderr)
    raise ValueError("bad batch shape (3, 4)")
elif mode in ("oom", "quiet"):
    print("epoch 0 starting")
    raise RuntimeError(
        "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity)"
    )
elif mode == "noisy":
    for i in range(int(arg)):
        print(f"line {i:06d} " + "x" * 90)
elif mode == "ddp":  # ARG: the rendezvous file; RANK and WORLD_SIZE come from the env
    import os

    import torch
    import torch.distributed as dist
    from torch import nn

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"file://{arg}", rank=rank, world_size=world)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    model = nn.parallel.DistributedDataParallel(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    handle = tracker.watch(model, optimizer, every=5)
    print(f"WATCHING {type(handle).__name__}", flush=True)
    for step in range(20):
        optimizer.zero_grad()
        model(torch.randn(4, 8)).pow(2).mean().backward()
        optimizer.step()
        tracker.log({"loss": 1.0}, step=step)
    dist.destroy_process_group()
elif mode in ("watch", "compile"):
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3)
            self.head = nn.Linear(4 * 6 * 6, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.conv(x)).flatten(1)
            if mode == "compile":
                torch._dynamo.graph_break()
            return self.head(h)

    torch.manual_seed(0)
    model = Net()
    stepped = torch.compile(model, backend="eager", dynamic=False) if mode == "compile" else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    tracker.watch(stepped, optimizer, scaler, every=5, top=3)
    for step in range(20):
        optimizer.zero_grad()
        batch = 8 + (step % 4) if mode == "compile" else 8  # new shapes: recompiles
        x = torch.randn(batch, 1, 8, 8)
        if (arg == "nan" and step == 14) or (arg == "nan_from_5" and step >= 5):
            x[0, 0, 0, 0] = float("nan")
        loss = stepped(x).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        tracker.log({"loss": loss.item()}, step=step)
print("DONE", flush=True)
