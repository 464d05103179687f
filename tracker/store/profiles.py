"""Profiles of running runs: a request to profile the next N steps, its traces, its summary.

A person asks (``Profile N steps`` on a running run's page, ``tracker profile RUN``): one row
in ``profiles``, state ``requested``. The run's client learns of it from its next heartbeat's
answer (:func:`control`: no thread of its own, nothing to poll while idle), profiles its next
``steps`` ``log()``-delimited steps, stores each rank's trace as the artifact
:func:`trace_path` and reports (:func:`report`): ``started``, then ``stored`` or ``failed``.
The state goes requested -> running -> stored | failed. At most one profile is open
(requested or running) per run; a request for a run that is not running is refused, and an
open one whose run ended is closed as failed when next read.

The summary (where the time goes: :mod:`tracker.rules.profile_summary`) is computed here on
the server from the lowest rank's trace, once, when first read, and kept in the row: the
training process never pays for it.

Raises: InvalidInput (bad steps, ranks or report; nothing written), NotFound (no such run or
profile), Conflict (the run is not running, or has an open profile), StoreUnavailable.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from tracker.errors import Conflict, InvalidInput, NotFound, TooLarge
from tracker.rules.profiles import MAX_STEPS, MAX_TRACE_BYTES, check_request, trace_path
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.store import Store

__all__ = [
    "MAX_STEPS",
    "MAX_TRACE_BYTES",
    "MAX_TRACE_JSON_BYTES",
    "OPEN",
    "Profile",
    "check_request",
    "control",
    "get_profile",
    "list_profiles",
    "read_trace",
    "report",
    "request_profile",
    "summaries_for_run",
    "summary",
    "trace_path",
    "unsummarised",
]

MAX_TRACE_JSON_BYTES = 1024 * 1024 * 1024  # decompressed: a bound on what a summary reads
OPEN = ("requested", "running")
EVENTS = ("started", "stored", "failed")
ENDED_FIRST = "the run ended before the profile was taken"


@dataclass(frozen=True)
class Profile:
    id: int
    run_id: int
    steps: int
    ranks: str
    state: str
    requested_at: float
    requested_by: str | None
    started_at: float | None
    ended_at: float | None
    first_step: int | None
    last_step: int | None
    expected: int | None
    traces: list[dict[str, Any]]
    message: str | None
    has_summary: bool

    def json(self) -> dict[str, Any]:
        return asdict(self)


_COLUMNS = [c for c in m.ProfileRow.__table__.c if c.name != "summary"]
_HAS_SUMMARY = m.ProfileRow.summary.is_not(None).label("has_summary")


def _select() -> Any:
    return sa.select(*_COLUMNS, _HAS_SUMMARY)


def _row_profile(row: Any) -> Profile:
    data = dict(row._mapping)
    return Profile(**{**data, "traces": list(data["traces"] or [])})


def request_profile(
    store: Store, run_id: int, steps: Any, ranks: Any = "0", *, by: str | None = None
) -> Profile:
    """Ask run ``run_id``'s client to profile its next ``steps`` steps.

    Raises:
        InvalidInput: see :func:`check_request`.
        NotFound: no run ``run_id``.
        Conflict: the run is not running, or already has an open profile (one at a time).
    """
    steps, ranks = check_request(steps, ranks)
    now = store.now()
    with write_begin(store.engine) as conn:
        status = conn.execute(  # the run's row locked: two requests at once queue here
            sa.select(m.RunRow.status).where(m.RunRow.id == run_id).with_for_update()
        ).scalar()
        if status is None:
            raise NotFound(f"no run {run_id}", field="run_id")
        if status != "running":
            raise Conflict(
                f"run {run_id} is {status}: only a running run can be profiled", field="run_id"
            )
        open_one = conn.execute(
            _select().where(m.ProfileRow.run_id == run_id, m.ProfileRow.state.in_(OPEN))
        ).first()
        if open_one is not None:
            raise Conflict(
                f"run {run_id} already has profile {open_one.id} {open_one.state}: one "
                "profile at a time per run",
                field="run_id",
            )
        new_id = conn.execute(
            sa.insert(m.ProfileRow)
            .values(
                run_id=run_id,
                steps=steps,
                ranks=ranks,
                state="requested",
                requested_at=now,
                requested_by=by,
                traces=[],
            )
            .returning(m.ProfileRow.id)
        ).scalar_one()
        return _row_profile(conn.execute(_select().where(m.ProfileRow.id == new_id)).one())


def control(store: Store, run_id: int) -> dict[str, Any] | None:
    """What a run's heartbeat answers its client: the open profile request, if any, as
    ``{"profile": {"id", "steps", "ranks"}}``; None when there is nothing to do (the common
    case: one indexed read)."""
    with read_conn(store.engine) as conn:
        row = conn.execute(
            sa.select(m.ProfileRow.id, m.ProfileRow.steps, m.ProfileRow.ranks).where(
                m.ProfileRow.run_id == run_id, m.ProfileRow.state.in_(OPEN)
            )
        ).first()
    if row is None:
        return None
    return {"profile": {"id": row.id, "steps": row.steps, "ranks": row.ranks}}


def _check_report(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidInput("a profile report must be a JSON object", field="body")
    event = body.get("event")
    if event not in EVENTS:
        raise InvalidInput(
            f"event must be one of {', '.join(EVENTS)}, got {event!r}", field="event"
        )
    rank = body.get("rank", 0)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < 65536:
        raise InvalidInput(f"rank must be an integer from 0 to 65535, got {rank!r}", field="rank")
    out: dict[str, Any] = {"event": event, "rank": rank}
    for name in ("first_step", "last_step", "bytes", "world_size"):
        value = body.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise InvalidInput(f"{name} must be a non-negative integer, got {value!r}", field=name)
        out[name] = value
    message = body.get("message")
    if message is not None and not isinstance(message, str):
        raise InvalidInput(
            f"message must be a string, got {type(message).__name__}", field="message"
        )
    out["message"] = None if message is None else message[:2000]
    return out


def report(store: Store, run_id: int, profile_id: int, body: Any) -> Profile:
    """The client's news about profile ``profile_id`` of run ``run_id``: ``body`` is
    ``{"event": "started" | "stored" | "failed", "rank": int, "first_step", "last_step",
    "bytes", "world_size", "message"}``. ``stored`` means the rank's trace is stored at
    :func:`trace_path`; the profile is ``stored`` once every expected rank's trace is (one
    for ``ranks="0"``, ``world_size`` for ``"all"``). A report on a closed profile changes
    nothing (a retry after a lost answer is harmless).

    Raises:
        InvalidInput: a malformed report.
        NotFound: no such profile of this run.
    """
    news = _check_report(body)
    now = store.now()
    with write_begin(store.engine) as conn:
        found = conn.execute(
            sa.select(*m.ProfileRow.__table__.c)
            .where(m.ProfileRow.id == profile_id, m.ProfileRow.run_id == run_id)
            .with_for_update()
        ).first()
        if found is None:
            raise NotFound(f"run {run_id} has no profile {profile_id}", field="profile_id")
        row = SimpleNamespace(**found._mapping)
        if row.state in OPEN:
            _apply(row, news, now)
            conn.execute(
                sa.update(m.ProfileRow)
                .where(m.ProfileRow.id == profile_id)
                .values(
                    state=row.state,
                    started_at=row.started_at,
                    ended_at=row.ended_at,
                    first_step=row.first_step,
                    last_step=row.last_step,
                    expected=row.expected,
                    traces=row.traces,
                    message=row.message,
                )
            )
        return _row_profile(conn.execute(_select().where(m.ProfileRow.id == profile_id)).one())


def _apply(row: Any, news: dict[str, Any], now: float) -> None:
    """``news`` applied to the (detached) ``row``'s fields."""
    event, rank = news["event"], news["rank"]
    if row.expected is None:
        row.expected = max(1, news.get("world_size") or 1) if row.ranks == "all" else 1
    if row.started_at is None:
        row.started_at = now
    if row.state == "requested":
        row.state = "running"
    for name, pick in (("first_step", min), ("last_step", max)):
        value = news.get(name)
        if value is not None:
            seen = getattr(row, name)
            setattr(row, name, value if seen is None else pick(seen, value))
    if event == "stored":
        traces = [t for t in (row.traces or []) if t.get("rank") != rank]
        traces.append({"rank": rank, "path": trace_path(row.id, rank), "bytes": news["bytes"]})
        row.traces = sorted(traces, key=lambda t: t["rank"])
        if len(row.traces) >= row.expected:
            row.state, row.ended_at = "stored", now
    elif event == "failed":
        row.message = f"rank {rank}: {news['message'] or 'failed'}"
        row.state = "stored" if row.traces else "failed"
        row.ended_at = now


def _close_ended(store: Store, run_id: int) -> None:
    """Open profiles of run ``run_id`` that it ended before taking: failed (stored when
    some rank's trace came)."""
    with write_begin(store.engine) as conn:
        status = conn.execute(sa.select(m.RunRow.status).where(m.RunRow.id == run_id)).scalar()
        if status is None or status == "running":
            return
        rows = conn.execute(
            sa.select(m.ProfileRow.id, m.ProfileRow.traces).where(
                m.ProfileRow.run_id == run_id, m.ProfileRow.state.in_(OPEN)
            )
        ).all()
        for pid, traces in rows:
            conn.execute(
                sa.update(m.ProfileRow)
                .where(m.ProfileRow.id == pid, m.ProfileRow.state.in_(OPEN))
                .values(
                    state="stored" if traces else "failed",
                    message=ENDED_FIRST
                    if not traces
                    else "the run ended before every rank's trace came",
                    ended_at=store.now(),
                )
            )


def _read(store: Store, run_id: int, where: Any) -> list[Profile]:
    """Run ``run_id``'s profiles that ``where`` selects, newest first; open ones of an
    ended run are closed first (one cheap read finds whether there are any)."""
    with read_conn(store.engine) as conn:
        stale = conn.execute(
            sa.select(m.ProfileRow.id)
            .join(m.RunRow, m.RunRow.id == m.ProfileRow.run_id)
            .where(
                m.ProfileRow.run_id == run_id,
                m.ProfileRow.state.in_(OPEN),
                m.RunRow.status != "running",
            )
        ).first()
    if stale is not None:
        _close_ended(store, run_id)
    with read_conn(store.engine) as conn:
        rows = conn.execute(
            _select().where(m.ProfileRow.run_id == run_id, where).order_by(m.ProfileRow.id.desc())
        ).all()
    return [_row_profile(r) for r in rows]


def list_profiles(store: Store, run_id: int) -> list[Profile]:
    """Run ``run_id``'s profiles, newest first (open ones of an ended run closed first)."""
    return _read(store, run_id, sa.true())


def get_profile(store: Store, run_id: int, profile_id: int) -> Profile:
    """Raises NotFound: no such profile of run ``run_id``."""
    found = _read(store, run_id, m.ProfileRow.id == profile_id)
    if not found:
        raise NotFound(f"run {run_id} has no profile {profile_id}", field="profile_id")
    return found[0]


def read_trace(store: Store, run_id: int, profile_id: int, rank: int | None = None) -> Any:
    """The parsed trace JSON of one rank (default: the lowest) of a stored profile.

    Raises:
        NotFound: no such profile, or it has no trace (yet).
        TooLarge: the trace decompresses to more than :data:`MAX_TRACE_JSON_BYTES`.
        InvalidInput: the artifact is not gzip'd JSON.
    """
    from tracker.store.artifacts import open_artifact

    profile = get_profile(store, run_id, profile_id)
    traces = [t for t in profile.traces if rank is None or t["rank"] == rank]
    if not traces:
        which = "any rank's" if rank is None else f"rank {rank}'s"
        raise NotFound(f"profile {profile_id} of run {run_id} has no {which} trace", field="rank")
    with open_artifact(store, run_id, traces[0]["path"]) as raw:
        try:
            with gzip.GzipFile(fileobj=raw) as unzipped:
                data = unzipped.read(MAX_TRACE_JSON_BYTES + 1)
        except (OSError, EOFError) as exc:
            raise InvalidInput(
                f"the trace {traces[0]['path']!r} is not gzip'd: {exc}", field="trace"
            ) from exc
    if len(data) > MAX_TRACE_JSON_BYTES:
        raise TooLarge(
            f"the trace {traces[0]['path']!r} is over {MAX_TRACE_JSON_BYTES >> 20} MiB "
            "decompressed: download it and open it in Perfetto",
            field="trace",
        )
    try:
        return json.loads(data)
    except ValueError as exc:
        raise InvalidInput(
            f"the trace {traces[0]['path']!r} is not JSON: {exc}", field="trace"
        ) from exc


def summary(
    store: Store, run_id: int, profile_id: int, summarize: Callable[[Any], dict[str, Any]]
) -> dict[str, Any]:
    """The profile's summary: kept in the row, or computed with ``summarize`` from its
    lowest rank's trace and kept (several readers at once compute the same thing).

    Raises: what :func:`read_trace` and ``summarize`` raise.
    """
    with read_conn(store.engine) as conn:
        kept = conn.execute(
            sa.select(m.ProfileRow.summary).where(
                m.ProfileRow.id == profile_id, m.ProfileRow.run_id == run_id
            )
        ).scalar()
    if kept is not None:
        return dict(kept)
    result = summarize(read_trace(store, run_id, profile_id))
    with write_begin(store.engine) as conn:
        conn.execute(
            sa.update(m.ProfileRow).where(m.ProfileRow.id == profile_id).values(summary=result)
        )
    return result


def unsummarised(store: Store, limit: int = 10) -> list[tuple[int, int]]:
    """``(run_id, profile_id)`` of stored profiles without a summary yet, oldest first: what
    the periodic work summarises ahead of the first reader (:mod:`tracker.periodic`)."""
    with read_conn(store.engine) as conn:
        rows = conn.execute(
            sa.select(m.ProfileRow.run_id, m.ProfileRow.id)
            .where(m.ProfileRow.state == "stored", m.ProfileRow.summary.is_(None))
            .order_by(m.ProfileRow.id)
            .limit(limit)
        ).all()
    return [(int(r[0]), int(r[1])) for r in rows]


def summaries_for_run(
    store: Store, run_id: int, summarize: Callable[[Any], dict[str, Any]]
) -> list[tuple[int, int, dict[str, Any]]]:
    """``(first_step, last_step, summary)`` of run ``run_id``'s stored profiles, oldest
    first, for the doctor; a profile whose trace cannot be read is left out."""
    out = []
    for profile in reversed(list_profiles(store, run_id)):
        if profile.state != "stored" or profile.first_step is None:
            continue
        try:
            found = summary(store, run_id, profile.id, summarize)
        except (NotFound, InvalidInput, TooLarge):
            continue
        out.append((profile.first_step, profile.last_step or profile.first_step, found))
    return out
