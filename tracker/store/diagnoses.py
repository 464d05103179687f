"""The doctor's data: read a run's series, run the health detectors, record diagnoses.

``diagnose_run`` reads every metric of one run (the last ``MAX_POINTS`` points of each;
``LIVE_POINTS`` in a live pass, where the evidence is recent), its checkpoints (optionally
re-hashing their files) and the frames ``tracker.watch`` saw reach torch.compile's
recompile limit (run events of kind ``recompile_limit``), runs
:func:`tracker.rules.health.diagnose` and records the result as run events of kind
``diagnosis``. Recording is idempotent: each diagnosis is one row per run and
``code:metric`` (the unique index ``uq_run_events_run_dedupe_key``), so running the doctor
again -- by hand, at finish, or in several housekeeping processes at once -- updates that
row instead of adding one. A final pass (the run has ended) also removes diagnoses that no
longer hold.

``sweep_live`` is the housekeeping pass over running runs: one query finds the runs with
points newer than the last pass, and only those are diagnosed (cheap when nothing moved).

Every point of a loss is judged for spikes by some pass, however fast the run logs. A pass
judges spikes in the newer half of what it reads (the older half is the memory, see
:func:`tracker.rules.health.diagnose`); a :class:`DoctorMemory` (kept by the process that
runs the passes: the run's own SQL sink, the housekeeping sweep) remembers, per series, the
last step a pass judged completely, and the next pass reads as far back as needed for the
points since then to fall in its newer half (doubling its read, at most
``MAX_SPIKE_POINTS``). And a final pass never retracts what it did not read: a diagnosis of
something that happened at a step (a loss spike, a non-finite stretch, a gradient
explosion: it stays true) found by an earlier pass before the first step the final pass
judged stays, with its onset (the final pass of a long run reads only its newest points).

Every read and write raises ``StoreUnavailable`` when the database cannot be reached, and
``NotFound`` for an unknown run.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa

from tracker import filedigest
from tracker.entities import RunEventInfo
from tracker.rules.health import (
    GRAD_EXPLOSION,
    LOSS_SPIKE,
    NONFINITE,
    THROUGHPUT_DROP,
    CheckpointFact,
    Diagnosis,
    Evidence,
    HealthLimits,
    diagnose,
    is_loss_key,
    series_of,
)
from tracker.rules.jsonvalues import decode_special
from tracker.rules.profile_summary import refine_throughput, summarize
from tracker.rules.recompile_reasons import RECOMPILE_LIMIT_EVENT, RecompileFact, fact_from_event
from tracker.store import models as m
from tracker.store.checkpoints import list_checkpoints, set_checkpoint_state
from tracker.store.engine import read_conn, write_begin
from tracker.store.metrics import sealed_points
from tracker.store.profiles import summaries_for_run
from tracker.store.rows import dialect_insert
from tracker.store.runs import get_run
from tracker.store.store import Store

__all__ = [
    "DIAGNOSIS",
    "LIVE_POINTS",
    "MAX_POINTS",
    "MAX_SPIKE_POINTS",
    "DoctorMemory",
    "LiveSweep",
    "diagnose_run",
    "diagnosis_json",
    "judge_run",
    "list_diagnoses",
    "read_run_series",
    "record_diagnoses",
]

DIAGNOSIS = "diagnosis"  # run_events.kind
MAX_POINTS = 20_000  # per metric: the newest points, enough for every detector's window
LIVE_POINTS = 5_000  # per metric in a live pass: the recent history, 4x cheaper to read
# per loss series: the most a pass reads so that every point since the last pass is judged
# for spikes (a run logging ~13,000 steps/s between live passes 10 s apart)
MAX_SPIKE_POINTS = 262_144
BEFORE_EVERY_STEP = -(2**63)  # a mark: no point judged yet


@dataclass
class DoctorMemory:
    """What the passes of one process judged, so the next judges every point since.

    ``marks[run_id][metric]``: the last step of the series whose spike judgment a pass
    completed (a live pass waits for ``spike_noise_points`` after a point). A series
    without a mark is read as usual (the newest points), unless ``whole_runs`` (the process
    has seen the run from its start: its own sink), where it is judged from its first point.
    """

    whole_runs: bool = False
    marks: dict[int, dict[str, int]] = field(default_factory=dict)

    def mark(self, run_id: int, metric: str) -> int | None:
        found = self.marks.get(run_id, {}).get(metric)
        if found is None and self.whole_runs:
            return BEFORE_EVERY_STEP
        return found


_LIVE_STATUSES = ("running",)


def read_run_series(
    store: Store, run_id: int, *, max_points: int = MAX_POINTS, until_step: int | None = None
) -> dict[str, list[tuple[int, float | None]]]:
    """Every metric of a run as ``(step, value)`` by step (NaN as ``None``), newest
    ``max_points`` per metric (``until_step``: of those at or before that step)."""
    return {name: read.points for name, read in _read_series(
        store, run_id, max_points=max_points, until_step=until_step, onsets=False
    ).items()}  # fmt: skip


Series = list[tuple[int, float | None]]


@dataclass(frozen=True)
class _Read:
    """One series as a pass read it: its newest points, whether they are only part of the
    series, and (see :func:`_stretch_start`) where a non-finite stretch they start in began."""

    points: Series
    partial: bool
    before: Series


def _read_series(
    store: Store,
    run_id: int,
    *,
    max_points: int,
    until_step: int | None,
    onsets: bool = True,
    marks: Callable[[str], int | None] | None = None,
) -> dict[str, _Read]:
    """Per metric, :func:`read_run_series`'s newest points and, with ``onsets``, when they
    start inside a stretch of non-finite values that began before them, where it began
    (:func:`_stretch_start`); else no points. ``marks(metric)``: for a loss, the last step
    an earlier pass judged for spikes; more points are read (twice as many each time, at
    most ``MAX_SPIKE_POINTS``) until those after it are in the newer half."""
    keys = sa.select(m.MetricSummaryRow.key_id, m.MetricKeyRow.name).join(
        m.MetricKeyRow, m.MetricKeyRow.id == m.MetricSummaryRow.key_id
    )
    out: dict[str, _Read] = {}
    with read_conn(store.engine) as conn:
        found = conn.execute(keys.where(m.MetricSummaryRow.run_id == run_id)).all()
        for key_id, name in found:
            mark = marks(name) if marks is not None and is_loss_key(name) else None
            wanted = MAX_SPIKE_POINTS if mark == BEFORE_EVERY_STEP else max_points
            points = _newest(conn, run_id, key_id, wanted, until_step)
            while mark is not None and len(points) >= wanted and wanted < MAX_SPIKE_POINTS:
                if points[len(points) // 2][0] <= mark:  # the newer half holds the rest
                    break
                wanted = min(2 * wanted, MAX_SPIKE_POINTS)
                points = _newest(conn, run_id, key_id, wanted, until_step)
            partial = len(points) >= wanted
            before: Series = []
            if onsets and partial and not _finite(points[0][1]):
                before = _stretch_start(conn, run_id, key_id, points[0], wanted)
            out[name] = _Read(points, partial, before)
    return out


def _newest(
    conn: sa.Connection, run_id: int, key_id: int, max_points: int, until_step: int | None
) -> Series:
    """The newest ``max_points`` points of a series at or before ``until_step``, by step."""
    sealed = sealed_points(conn, run_id, key_id, hi=until_step, newest=max_points)
    if sealed is not None:
        tail = slice(max(0, len(sealed) - max_points), None)
        return cast(Series, series_of(sealed.steps[tail], sealed.values[tail]))  # NaN, no None
    query = (
        sa.select(m.MetricPointRow.step, m.MetricPointRow.value)
        .where(m.MetricPointRow.run_id == run_id, m.MetricPointRow.key_id == key_id)
        .where(sa.true() if until_step is None else m.MetricPointRow.step <= until_step)
        .order_by(m.MetricPointRow.step.desc(), m.MetricPointRow.seq.desc())
        .limit(max_points)
    )
    return [(int(s), v) for s, v in reversed(conn.execute(query).all())]


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _read_back_to(conn: sa.Connection, run_id: int, key_id: int, step: int) -> int:
    """Where a read back from before ``step`` may start: ``step - 1``, or, past sealed
    chunks that hold no finite value (their headers' counts say so) and no head rows, the
    first step of the oldest of them (the newest chunk with a finite value is just before)."""
    c, p = m.MetricChunkRow, m.MetricPointRow
    this = (c.run_id == run_id, c.key_id == key_id)
    some_finite = c.count > c.nan_count + c.posinf_count + c.neginf_count
    finite = _one(conn, c.last_step, c.first_step.desc(), *this, c.first_step < step, some_finite)
    if finite is None:
        return step - 1
    following = _one(
        conn, c.first_step, c.first_step, *this, c.first_step > finite, c.first_step < step
    )
    if following is None:
        return step - 1
    head = _one(
        conn, p.step, p.step, p.run_id == run_id, p.key_id == key_id, p.step > finite, p.step < step
    )
    return step - 1 if head is not None else int(following)


def _one(conn: sa.Connection, column: Any, order: Any, *where: Any) -> Any:
    """``column`` of the first row by ``order`` that meets ``where`` (None when none does)."""
    return conn.execute(sa.select(column).where(*where).order_by(order).limit(1)).scalar()


ONSET_BLOCKS = 50  # blocks of a pass's points read back to find where a stretch began


def _stretch_start(
    conn: sa.Connection, run_id: int, key_id: int, first: tuple[int, float | None], block: int
) -> Series:
    """The series' last finite point before ``first`` (a pass's first point, not finite)
    and the first point after it: where the non-finite stretch that ``first`` is in began,
    so the doctor names that step, not the first one it read. Read back ``block`` points
    at a time, at most ``ONSET_BLOCKS`` blocks, past sealed chunks without a finite value
    (:func:`_read_back_to`). Without a finite point, the earliest point read back (the
    series starts non-finite, or the stretch is longer than the read-back); nothing when
    no point precedes ``first``."""
    after = first
    for _ in range(ONSET_BLOCKS):
        points = _newest(conn, run_id, key_id, block, _read_back_to(conn, run_id, key_id, after[0]))
        if not points:
            return [after] if after is not first else []
        for i in range(len(points) - 1, -1, -1):
            if _finite(points[i][1]):
                return [points[i], points[i + 1] if i + 1 < len(points) else after]
        after = points[0]
    return [after]


def _checkpoint_facts(store: Store, run_id: int, verify: bool) -> list[CheckpointFact]:
    facts = []
    for c in list_checkpoints(store, run_id):
        state = c.state
        if verify and state not in ("corrupt", "missing"):
            state = _verify_file(Path(c.path), c.sha256, c.bytes)
            if state != c.state:
                set_checkpoint_state(store, c.id, state)
        facts.append(CheckpointFact(c.step, c.path, state, c.created_at))
    return facts


def _recompile_facts(store: Store, run_id: int) -> list[RecompileFact]:
    """The frames that reached torch's recompile limit (malformed events are skipped)."""
    query = sa.select(m.RunEventRow.data).where(
        m.RunEventRow.run_id == run_id, m.RunEventRow.kind == RECOMPILE_LIMIT_EVENT
    )
    with read_conn(store.engine) as conn:
        found = [fact_from_event(data) for (data,) in conn.execute(query)]
    return [f for f in found if f is not None]


def _verify_file(path: Path, sha256: str, size: int) -> str:
    return filedigest.verify(path, size, sha256)


def diagnose_run(
    store: Store,
    run_id: int,
    *,
    final: bool | None = None,
    verify_checkpoints: bool = False,
    limits: HealthLimits | None = None,
    now: float | None = None,
    memory: DoctorMemory | None = None,
) -> list[Diagnosis]:
    """Diagnose one run from its stored data and record the result (idempotent).

    ``final`` defaults to whether the run has ended. ``verify_checkpoints`` re-hashes every
    checkpoint file not already known bad and records a mismatch as ``corrupt`` (or
    ``missing``). ``memory``: what earlier passes of this process judged (read and
    updated; see the module docstring). Returns what the pass found and, for a final pass,
    the stored diagnoses it kept (before the points it read): what the run's Health panel
    shows. Raises NotFound for an unknown run.
    """
    run = get_run(store, run_id)
    if final is None:
        final = run.status not in ("running", "queued")
    judged = _judge(
        store, run_id, final=final, verify_checkpoints=verify_checkpoints, limits=limits,
        until_step=None, memory=memory,
    )  # fmt: skip
    kept = record_diagnoses(
        store, run_id, judged.found, replace=final, now=now, judged_from=judged.judged_from
    )
    return sorted([*judged.found, *kept], key=lambda d: (d.step or 0, d.code))


def judge_run(
    store: Store,
    run_id: int,
    *,
    final: bool,
    verify_checkpoints: bool = False,
    limits: HealthLimits | None = None,
    until_step: int | None = None,
    memory: DoctorMemory | None = None,
) -> list[Diagnosis]:
    """What a pass of the doctor finds in one run's stored data, recording nothing: the
    final pass (``final``: the newest ``MAX_POINTS`` per metric) or a live one (the newest
    ``LIVE_POINTS``). ``until_step`` replays the pass as it was when the run had reached
    that step (the points, checkpoints and recompiles up to it), e.g. to measure what the
    live doctor showed while a run trained. A series read only in part (the run has more
    points than the pass reads) is named to :func:`~tracker.rules.health.diagnose` as such.
    ``memory``: see :func:`diagnose_run`.
    """
    return _judge(
        store, run_id, final=final, verify_checkpoints=verify_checkpoints, limits=limits,
        until_step=until_step, memory=memory,
    ).found  # fmt: skip


@dataclass(frozen=True)
class _Pass:
    """What one pass found, and, per diagnosis key of an event (a spike, a non-finite
    stretch, an explosion) on a series it read only in part, the first step it judged that
    series from (for :func:`record_diagnoses`)."""

    found: list[Diagnosis]
    judged_from: dict[str, int]


def _judge(
    store: Store,
    run_id: int,
    *,
    final: bool,
    verify_checkpoints: bool,
    limits: HealthLimits | None,
    until_step: int | None,
    memory: DoctorMemory | None,
) -> _Pass:
    max_points = MAX_POINTS if final else LIVE_POINTS
    marks = None if memory is None else functools.partial(memory.mark, run_id)
    read = _read_series(store, run_id, max_points=max_points, until_step=until_step, marks=marks)
    series = {key: r.points for key, r in read.items()}
    before = {key: r.before for key, r in read.items() if r.before}
    partial = {key for key, r in read.items() if r.partial}
    facts = _checkpoint_facts(store, run_id, verify_checkpoints)
    recompiled = _recompile_facts(store, run_id)
    if until_step is not None:
        facts = [f for f in facts if f.step <= until_step]
        recompiled = [f for f in recompiled if f.step <= until_step]
    recent = {key: max_points for key, points in series.items() if len(points) > max_points}
    found = diagnose(
        series, final=final, checkpoints=facts, recompiled=recompiled, limits=limits,
        partial=partial, before=before, recent=recent,
    )  # fmt: skip
    limits = limits or HealthLimits()
    if memory is not None and not final:
        _remember(memory, run_id, series, limits)
    judged_from = {}
    for key in partial:
        points, w = series[key], limits.history
        judged_from[f"{NONFINITE}:{key}"] = (before.get(key) or points)[0][0]
        judged_from[f"{GRAD_EXPLOSION}:{key}"] = points[min(w, len(points) - 1)][0]
        judged_from[f"{LOSS_SPIKE}:{key}"] = points[
            min(max(len(points) // 2, 2 * w), len(points) - 1)
        ][0]
    return _Pass(_with_profiles(store, run_id, found, until_step), judged_from)


def _remember(
    memory: DoctorMemory, run_id: int, series: Mapping[str, Series], limits: HealthLimits
) -> None:
    """After a live pass: per loss, the last step whose spike judgment it completed (a
    spike is reported once ``spike_noise_points`` finite points after it are seen)."""
    marks = memory.marks.setdefault(run_id, {})
    for key, points in series.items():
        if not is_loss_key(key):
            continue
        finite = [step for step, value in points if _finite(value)]
        if len(finite) > limits.spike_noise_points:
            marks[key] = finite[-1 - limits.spike_noise_points]


def _with_profiles(
    store: Store, run_id: int, found: list[Diagnosis], until_step: int | None
) -> list[Diagnosis]:
    """A throughput drop made precise by the run's profiles (where the slow steps' time
    went: :func:`~tracker.rules.profile_summary.refine_throughput`); read, and summarised
    once, only when there is a drop to explain."""
    if not any(d.code == THROUGHPUT_DROP for d in found):
        return found
    taken = summaries_for_run(store, run_id, summarize)
    if until_step is not None:
        taken = [t for t in taken if t[1] <= until_step]
    if not taken:
        return found
    return [refine_throughput(d, taken) for d in found]


def record_diagnoses(
    store: Store,
    run_id: int,
    diagnoses: Sequence[Diagnosis],
    *,
    replace: bool = False,
    now: float | None = None,
    judged_from: Mapping[str, int] | None = None,
) -> list[Diagnosis]:
    """Upsert one ``diagnosis`` event per ``code:metric``; with ``replace`` (the final
    pass), delete the run's other diagnoses (those that no longer hold), except what it
    did not read: a stored diagnosis whose key is in ``judged_from`` (an event on a series
    the pass read only in part) and whose onset is before that step stays as it is.
    Returns the stored diagnoses so kept, with ``replace`` (else none).

    Without ``replace`` (a live pass while the run trains) a diagnosis already reported
    keeps its onset and message -- a user watching the Health panel saw "from step 140"
    and must not see it move to 173 and back with each new point -- unless its severity
    rose (a warning that became an error is reported again). The final pass writes what
    the whole run shows."""
    now = time.time() if now is None else now
    events = m.RunEventRow
    with write_begin(store.engine) as conn:
        stored = _stored(conn, run_id)
        unread = {
            key
            for key, step in (judged_from or {}).items()
            if isinstance(stored.get(key, {}).get("step"), int) and stored[key]["step"] < step
        }
        for d in diagnoses:
            was = stored.get(d.key, {}).get("severity") if not replace else None
            if was is not None and _RANK.get(d.severity, 0) <= _RANK.get(str(was), 0):
                continue  # reported already: its onset stays
            if d.key in unread:
                continue  # an earlier onset this pass did not read
            insert = dialect_insert(conn)(events).values(
                run_id=run_id,
                at=now,
                kind=DIAGNOSIS,
                message=d.message,
                data=d.as_dict(),
                code=d.code,
                dedupe_key=d.key,
            )
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=["run_id", "dedupe_key"],
                    set_={"message": insert.excluded.message, "data": insert.excluded.data},
                )
            )
        if not replace:
            return []
        keep = [d.key for d in diagnoses] + sorted(unread)
        conn.execute(
            sa.delete(events).where(
                events.run_id == run_id,
                events.kind == DIAGNOSIS,
                events.dedupe_key.not_in(keep) if keep else sa.true(),
            )
        )
    return [_as_diagnosis(stored[key]) for key in sorted(unread)]


def _as_diagnosis(data: Mapping[str, Any]) -> Diagnosis:
    """A stored diagnosis (its ``as_dict``) as a pass returns one."""
    ev = data.get("evidence") or None
    evidence = None
    if ev:
        lo, hi = ev.get("window") or (0, 0)
        numbers = {k: _number(v) for k, v in ev.items() if k not in ("metric", "window", "values")}
        values = tuple(_number(v) for v in ev.get("values") or ())
        evidence = Evidence(str(ev.get("metric")), (int(lo), int(hi)), values, numbers)
    step = data.get("step")
    return Diagnosis(
        str(data.get("code")), str(data.get("severity")), step if isinstance(step, int) else None,
        str(data.get("message")), str(data.get("hint")), evidence,
    )  # fmt: skip


def _number(value: Any) -> float:
    """A float of a stored diagnosis's evidence (NaN and ±Inf in their wire form)."""
    if isinstance(value, int | float):
        return float(value)
    special = decode_special(value) if isinstance(value, str) else None
    return math.nan if special is None else special


_RANK = {"warning": 1, "error": 2}


def _stored(conn: sa.Connection, run_id: int) -> dict[str, dict[str, Any]]:
    """The run's diagnoses already stored: dedupe key -> data."""
    events = m.RunEventRow
    query = sa.select(events.dedupe_key, events.data).where(
        events.run_id == run_id, events.kind == DIAGNOSIS, events.code.is_not(None)
    )
    return {key: data or {} for key, data in conn.execute(query)}


def list_diagnoses(store: Store, run_id: int) -> list[RunEventInfo]:
    """The run's diagnosis events, by onset step. Raises NotFound for an unknown run."""
    get_run(store, run_id)
    query = sa.select(*m.RunEventRow.__table__.columns).where(
        m.RunEventRow.run_id == run_id,
        m.RunEventRow.kind == DIAGNOSIS,
        m.RunEventRow.code.is_not(None),  # the doctor's own (an event posted by hand has none)
    )
    with read_conn(store.engine) as conn:
        rows = [
            RunEventInfo(e.id, e.run_id, e.at, e.kind, e.message, e.data)
            for e in conn.execute(query)
        ]
    return sorted(rows, key=lambda e: ((e.data or {}).get("step") or 0, e.id))


@dataclass
class LiveSweep:
    """Diagnose running runs whose points moved since the previous pass (housekeeping).

    Keeps, in memory, the newest point time seen per run and what its passes judged (a
    :class:`DoctorMemory`); a fresh process re-diagnoses each running run once, which the
    unique index makes harmless.
    """

    store: Store
    limits: HealthLimits | None = None
    _seen: dict[int, int] = field(default_factory=dict, init=False)
    _memory: DoctorMemory = field(default_factory=DoctorMemory, init=False)

    def once(self, now: float | None = None) -> dict[int, list[Diagnosis]]:
        newest = (
            sa.select(m.RunRow.id, sa.func.max(m.MetricSummaryRow.last_wall_ms))
            .join(m.MetricSummaryRow, m.MetricSummaryRow.run_id == m.RunRow.id)
            .where(m.RunRow.status.in_(_LIVE_STATUSES))
            .group_by(m.RunRow.id)
        )
        with read_conn(self.store.engine) as conn:
            moved = {int(r): int(w) for r, w in conn.execute(newest) if self._seen.get(r) != w}
        out: dict[int, list[Diagnosis]] = {}
        for run_id, wall in moved.items():
            out[run_id] = diagnose_run(
                self.store, run_id, final=False, limits=self.limits, now=now, memory=self._memory
            )
            self._seen[run_id] = wall
        return out


def diagnosis_json(event: RunEventInfo) -> dict[str, Any]:
    """A stored diagnosis as the API and ``--json`` show it."""
    return {**(event.data or {}), "id": event.id, "detected_at": event.at}
