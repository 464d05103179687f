"""What a person reads about a run's profiles, one shape for the dashboard's API and the CLI:
a profile with its summary and the cause of slow steps (:func:`detail`), two profiles'
summaries compared (:func:`compare`), and where one rank's trace is (:func:`trace_of`).

The profile's life is :mod:`tracker.store.profiles`; the summary, its diff and the cause are
the pure rules of :mod:`tracker.rules.profile_summary`, computed on first read and kept.

A trace that cannot be summarised (not gzip'd JSON, not a Chrome trace, too large) is not an
error of the read: :func:`detail` answers the profile with ``summary_error`` saying why, so
the trace can still be downloaded and opened in Perfetto.

Raises: NotFound (no such run, profile or rank's trace), Conflict (:func:`compare` of a
profile that has no trace yet, or whose trace has no summary), StoreUnavailable.
"""

from __future__ import annotations

from typing import Any

from tracker.errors import Conflict, InvalidInput, NotFound, TooLarge
from tracker.rules.profile_summary import cause, diff, summarize
from tracker.store import profiles
from tracker.store.store import Store

__all__ = ["compare", "detail", "trace_of"]

_UNREADABLE = (InvalidInput, TooLarge, NotFound)  # what a stored trace's summary can meet


def _summary(store: Store, run_id: int, profile: profiles.Profile) -> dict[str, Any]:
    """The profile's summary and its cause as ``{"summary", "cause", "summary_error"}``."""
    out: dict[str, Any] = {"summary": None, "cause": None, "summary_error": None}
    if not profile.traces:
        return out
    try:
        found = profiles.summary(store, run_id, profile.id, summarize)
        why = cause(found)
    except _UNREADABLE as exc:
        out["summary_error"] = (
            f"no summary of profile {profile.id}: {exc.message} (the trace can still be "
            "downloaded and opened in Perfetto)"
        )
        return out
    out["summary"] = found
    out["cause"] = None if why is None else {"code": why[0], "hint": why[1]}
    return out


def detail(store: Store, run_id: int, profile_id: int) -> dict[str, Any]:
    """``{"profile": Profile.json(), "summary", "cause": {"code", "hint"} | None,
    "summary_error": str | None}``; the summary once some rank's trace is stored.

    Raises: NotFound (no such profile of run ``run_id``)."""
    profile = profiles.get_profile(store, run_id, profile_id)
    return {"profile": profile.json(), **_summary(store, run_id, profile)}


def compare(store: Store, run_id: int, a: int, b: int) -> dict[str, Any]:
    """``{"a": detail(a), "b": detail(b), "diff": diff(summary a, summary b)}`` (``b``
    against ``a``: see :func:`tracker.rules.profile_summary.diff`).

    Raises:
        NotFound: no profile ``a`` or ``b`` of run ``run_id``.
        Conflict: one of them has no summary (no trace yet, or an unreadable one).
    """
    both = {"a": detail(store, run_id, a), "b": detail(store, run_id, b)}
    for name, found in both.items():
        if found["summary"] is None:
            profile = found["profile"]
            why = found["summary_error"] or f"it is {profile['state']} and has no trace yet"
            raise Conflict(
                f"profile {profile['id']} cannot be compared: {why}; only a stored profile "
                "with a readable trace has a summary",
                field=name,
            )
    return {**both, "diff": diff(both["a"]["summary"], both["b"]["summary"])}


def trace_of(store: Store, run_id: int, profile_id: int, rank: int | None) -> dict[str, Any]:
    """The trace entry ``{"rank", "path", "bytes"}`` of ``rank`` (None: the lowest rank).

    Raises: NotFound (no such profile, or no trace of that rank)."""
    profile = profiles.get_profile(store, run_id, profile_id)
    traces = [t for t in profile.traces if rank is None or t["rank"] == rank]
    if not traces:
        which = "any rank's trace" if rank is None else f"a trace of rank {rank}"
        have = ", ".join(str(t["rank"]) for t in profile.traces) or "none"
        raise NotFound(
            f"profile {profile_id} of run {run_id} has no {which} (ranks stored: {have})",
            field="rank",
        )
    return dict(traces[0])
