"""A profile of every rank of a real distributed job (issue 32): a two-rank CPU DDP job
(torchrun, gloo; tests/runner/scripts/ddp_profiled.py) runs on the local worker, asks for a
profile of all its ranks after a few steps (the real request path), then of rank 0 alone.
Rank 1 is a follower: it hears the request by polling the store, not by heartbeating. Both
ranks' traces are stored, and rank 0's summary counts DDP's gloo all-reduce as
communication; the rank-0 request gets rank 0's trace only."""

from __future__ import annotations

import gzip
import json
import sys
from typing import Any

import pytest

from tests.support.runner import SCRIPTS, Procs
from tracker.rules.profile_summary import summarize
from tracker.rules.profiles import trace_path
from tracker.store import Store, profiles
from tracker.store import jobs as store_jobs
from tracker.store.artifacts import open_artifact

pytest.importorskip("torch")

# PostgreSQL stores keep artifacts (the traces) under an artifact root, which jobs inherit
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("artifact_root")]


def _trace(store: Store, run_id: int, path: str) -> dict[str, Any]:
    with open_artifact(store, run_id, path) as fh:
        raw = fh.read()
    assert raw[:2] == b"\x1f\x8b", f"{path} is not gzip'd"
    trace: dict[str, Any] = json.loads(gzip.decompress(raw))
    return trace


def _step_marks(trace: dict[str, Any]) -> set[str]:
    return {
        e["name"]
        for e in trace["traceEvents"]
        if str(e.get("name", "")).startswith("ProfilerStep#")
    }


@pytest.mark.timeout(180)
def test_a_ddp_job_profiles_every_rank_then_rank_0(store: Store, procs: Procs) -> None:
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", "2", str(SCRIPTS / "ddp_profiled.py")]  # fmt: skip
    done = procs.run("submit", "--json", "--", *argv)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    worker = procs.worker("--gpus", "none", "--exit-when-idle")
    assert worker.wait(150, "the DDP job to end") == 0, worker.output()
    info = store_jobs.get_job(store, job["id"])
    assert (info.status, info.failure_class) == ("succeeded", None), info.failure_hint
    run_id = job["run_id"]

    found = profiles.list_profiles(store, run_id)  # newest first
    states = [(p.ranks, p.state, p.expected, p.message) for p in found]
    assert states == [("0", "stored", 1, None), ("all", "stored", 2, None)], states
    only_0, every = found
    assert (every.ranks, every.state, every.expected) == ("all", "stored", 2), every.message
    assert [t["rank"] for t in every.traces] == [0, 1]
    for t in every.traces:
        assert t["path"] == trace_path(every.id, t["rank"])
        trace = _trace(store, run_id, t["path"])
        # torch.profiler's own record of the process that wrote it: that rank, under gloo
        took = trace["distributedInfo"]
        assert (took["rank"], took["world_size"], took["backend"]) == (t["rank"], 2, "gloo")
        marks = _step_marks(trace)
        assert marks == {f"ProfilerStep#{i}" for i in range(5)}, (t["rank"], marks)

    split = profiles.summary(store, run_id, every.id, summarize)["time_split"]
    rank0 = _trace(store, run_id, every.traces[0]["path"])
    names = {str(e.get("name", "")) for e in rank0["traceEvents"]}
    comm_ops = sorted(n for n in names if "all_reduce" in n or "allreduce" in n)
    # the script runs no collective of its own: the communication is DDP's gradient all-reduce
    assert comm_ops, "no all-reduce op in rank 0's trace"
    assert split["communication"]["share"] > 0, (split, comm_ops)
    assert split["compute"]["share"] > 0, split

    assert (only_0.ranks, only_0.state, only_0.expected) == ("0", "stored", 1), only_0.message
    assert [t["rank"] for t in only_0.traces] == [0]
    trace = _trace(store, run_id, only_0.traces[0]["path"])
    assert trace["distributedInfo"]["rank"] == 0
    assert _step_marks(trace) == {f"ProfilerStep#{i}" for i in range(5)}
