"""A run's profiles as the terminal shows them (``tracker profile``): pure, the JSON in, lines
out. The shapes are ``GET /api/v1/runs/<id>/profiles[/<pid>]``'s (``web/API.md``:
Profiles), which :mod:`tracker.store.profile_views` builds for both the CLI and the API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["SPLIT_LABELS", "detail_lines", "list_rows", "progress_line", "steps_text"]

SPLIT_LABELS = {
    "compute": "compute",
    "communication": "communication",
    "memory_copies": "memory copies",
    "dataloader": "dataloader wait",
    "idle": "idle",
}


def _pct(share: Any) -> str:
    """A share as a percentage: whole numbers from 10 %, one decimal below (a small op's
    0.8 % is not 0 %), ``<0.1 %`` for what is not nothing but rounds to it."""
    if not isinstance(share, int | float):
        return "-"
    pct = share * 100
    if 0 < pct < 0.05:
        return "<0.1 %"
    return f"{pct:.0f} %" if pct >= 10 or pct == 0 else f"{pct:.1f} %"


def steps_text(profile: Mapping[str, Any]) -> str:
    """``120..139`` once the run said which steps, else ``next 20``."""
    first, last = profile.get("first_step"), profile.get("last_step")
    if first is None:
        return f"next {profile['steps']}"
    return f"{first}..{last if last is not None else first + profile['steps'] - 1}"


def progress_line(profile: Mapping[str, Any]) -> str:
    """What ``--wait`` prints when the profile's state (or its steps) change."""
    state = profile["state"]
    if state == "requested":
        return "requested; waiting for the run's heartbeat (up to ~10 s)"
    if state == "running":
        return f"profiling steps {steps_text(profile)}"
    if state == "stored":
        extra = f" ({profile['message']})" if profile.get("message") else ""
        ranks = ", ".join(str(t["rank"]) for t in profile.get("traces", []))
        return f"stored: steps {steps_text(profile)}, trace of rank {ranks}{extra}"
    return f"failed: {profile.get('message') or 'no reason given'}"


def list_rows(profiles: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """Rows for ``ID STATE STEPS REQUESTED BY TRACES``."""
    from tracker.cli.common import fmt_time

    return [
        [p["id"], p["state"], steps_text(p), fmt_time(p["requested_at"]),
         p.get("requested_by") or "-",
         ", ".join(f"rank {t['rank']}" for t in p.get("traces", [])) or "-"]
        for p in profiles
    ]  # fmt: skip


def _split_line(summary: Mapping[str, Any]) -> str:
    split = summary.get("time_split") or {}
    parts = [f"{label} {_pct(split.get(key, {}).get('share'))}" for key, label in
             SPLIT_LABELS.items()]  # fmt: skip
    return "time split: " + ", ".join(parts)


def _sync_lines(summary: Mapping[str, Any]) -> list[str]:
    syncs = summary.get("host_syncs") or {}
    by_op = ", ".join(f"{op} x{n}" for op, n in (syncs.get("by_op") or {}).items())
    lines = [f"host syncs: {syncs.get('per_step', 0):.3g} per step" + (f" ({by_op})" if by_op
                                                                       else "")]  # fmt: skip
    lines += [f"  {f['frame']}: {f['op']} x{f['count']}" for f in syncs.get("frames") or []]
    return lines


def _gpu_line(summary: Mapping[str, Any]) -> str:
    gpu = summary.get("gpu")
    if gpu is None:
        return "GPU: no GPU kernels in the trace (a CPU run)"
    kernels, copies = gpu.get("kernel_ms", 0), gpu.get("memcpy_ms", 0)
    return (f"GPU: idle {_pct(gpu.get('idle_share'))} of the profiled span, kernels "
            f"{kernels:,.1f} ms, memcpy {copies:,.1f} ms")  # fmt: skip


def _ops_lines(summary: Mapping[str, Any], limit: int = 10) -> list[str]:
    ops = list(summary.get("top_ops") or [])[:limit]
    if not ops:
        return []
    width = max(len(o["name"]) for o in ops)
    out = ["top ops by self time:", f"  {'op'.ljust(width)}  {'calls':>7}  {'self ms':>10}  share"]
    out += [f"  {o['name'].ljust(width)}  {o['calls']:>7}  {o['self_ms']:>10,.2f}  "
            f"{_pct(o['share'])}" for o in ops]  # fmt: skip
    return out


def detail_lines(found: Mapping[str, Any]) -> list[str]:
    """A profile's detail: the cause's hint first, then the step time, the time split, host
    syncs, the GPU and the top ops; or why there is no summary (yet)."""
    p = found["profile"]
    head = f"profile {p['id']} of run {p['run_id']}: {p['state']}, steps {steps_text(p)}"
    lines = [head + (f" ({p['message']})" if p.get("message") else "")]
    summary = found.get("summary")
    if summary is None:
        lines.append(found.get("summary_error") or "no summary yet: no trace is stored")
        return lines
    why = found.get("cause")
    lines.append(f"cause: {why['hint']}" if why else "cause: none found (no dominant stall)")
    steps = summary["steps"]
    lines.append(f"step time: median {steps['median_ms']:,.2f} ms over {steps['count']} steps")
    lines += [_split_line(summary), *_sync_lines(summary), _gpu_line(summary)]
    lines += _ops_lines(summary)
    return lines
