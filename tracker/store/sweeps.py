"""Sweeps that learn: Bayesian search and early stopping through the queue.

A sweep (``sweeps`` row) is a search space (``-c`` override texts), a budget (``trials``,
``parallel``), a sampler and a pruner (``tracker.rules.sweep_search``) and the job spec every
trial shares. Its trials (``sweep_trials`` rows) are ordinary jobs: priority, GPUs,
retries, snapshots and Slurm all apply, and the training script is unchanged -- it gets a
trial's params as config overrides, like any ``-c``.

The controller is :func:`control_once`, a task of the periodic work of every process that is
up (``tracker.periodic``), not a daemon of its own. One pass, for each running sweep:

1. ended trials: a trial whose job ended is ``complete`` with its objective (the metric's
   last value, or its best with ``objective='best'``), ``failed`` (the job failed, crashed,
   timed out or was cancelled, or never logged the metric) or stays ``pruned``;
2. pruning: each running trial's metric values so far are shown to the pruner; a trial it
   stops is marked ``pruned`` at that step and its job cancelled through the queue -- the
   job then ends with status and class ``pruned`` (``tracker.store.pruned``), never retried;
3. new trials: while fewer than ``parallel`` trials are in flight and fewer than ``trials``
   exist, the sampler picks the next params and the trial row and its job are inserted in
   one transaction. The key (sweep, number) makes that exactly once: two controllers that
   pick trial ``n`` at the same time insert one row and one job; the loser rolls back.
4. a sweep whose budget is spent and whose trials all ended is ``finished``.

Everything the decisions need is in the store, so a controller killed at any moment is
replaced by the next pass of any process, with no trial lost or queued twice.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.entities import FINAL_JOB_STATUSES, JobSpec, SweepInfo, TrialInfo
from tracker.errors import Conflict, InvalidInput, NotFound, StoreUnavailable
from tracker.rules.sweep import parse_overrides, set_path
from tracker.rules.sweep_search import (
    CHECKED,
    SweepSettings,
    TrialRecord,
    check_space,
    fixed_config,
    grid_size,
)
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.jobs import cancel, check_snapshot, check_spec, insert_job
from tracker.store.metrics import sealed_points
from tracker.store.schedules import spec_from_dict, spec_to_dict

if TYPE_CHECKING:
    from tracker.store.store import Store

log = logging.getLogger(__name__)

__all__ = [
    "MAX_INTERMEDIATE",
    "check_sweep",
    "control_once",
    "create_sweep",
    "get_sweep",
    "list_sweeps",
    "resume_sweep",
    "settings_of",
    "stop_sweep",
    "sweep_tag",
    "trials",
]

MAX_INTERMEDIATE = 1000  # metric values kept per ended trial (thinned evenly beyond)
SWEEP_STATUSES = ("running", "stopped", "finished")


def sweep_tag(sweep_id: int) -> str:
    """The tag every trial's job and run carries (the runs table filters by it)."""
    return f"sweep-{sweep_id}"


# ----------------------------------------------------------------------------- create


def check_sweep(
    spec: JobSpec, overrides: Sequence[str], settings: SweepSettings, *, name: str | None = None
) -> tuple[JobSpec, SweepSettings, list[str]]:
    """The rules of a new sweep, without the store (``tracker sweep --uri http://...`` checks
    them before uploading anything): returns the checked spec, the settings (a grid's budget
    at most its size) and the override texts searched.

    Raises:
        SweepSpecError (InvalidInput): an option or ``-c`` breaks a rule (naming it).
        InvalidInput: a field of ``spec`` or the name breaks a rule.
    """
    settings = settings.check()
    parsed = parse_overrides(list(overrides))
    check_space(parsed, settings.method)
    if settings.method == "grid":
        settings = replace(settings, trials=min(settings.trials, grid_size(parsed)))
    spec = check_spec(spec)
    _trial_config(spec.config, parsed, {})  # a -c that cannot be set fails here, not later
    if name is not None and (not name.strip() or len(name) > 200):
        raise InvalidInput("name: 1 to 200 characters", field="name")
    return spec, settings, [o.text for o in parsed]


def create_sweep(
    store: Store,
    spec: JobSpec,
    overrides: Sequence[str],
    settings: SweepSettings,
    *,
    name: str | None = None,
    now: float | None = None,
) -> SweepInfo:
    """Store a sweep; its controller queues the trials (the next periodic pass, or
    :func:`control_once` at once).

    Raises:
        SweepSpecError (InvalidInput): an option or ``-c`` breaks a rule (the message names
            it), e.g. a grid over a distribution or no searched key.
        InvalidInput: a field of ``spec`` breaks a rule; its ``snapshot_id`` names no
            stored snapshot.
        StoreUnavailable: the database cannot be reached.
    """
    spec, settings, space = check_sweep(spec, overrides, settings, name=name)
    now = store.now() if now is None else now
    with write_begin(store.engine) as conn:
        check_snapshot(conn, spec.snapshot_id)  # every trial would fail to queue without it
        sweep_id = conn.execute(
            sa.insert(m.SweepRow)
            .values(
                name=name or _default_name(spec, settings),
                project=spec.project,
                status="running",
                method=settings.method,
                metric=settings.metric,
                goal=settings.goal,
                objective=settings.objective,
                trials=settings.trials,
                parallel=settings.parallel,
                prune=settings.prune,
                seed=settings.seed,
                space=space,
                spec=spec_to_dict(spec),
                created_at=now,
            )
            .returning(m.SweepRow.id)
        ).scalar_one()
    return get_sweep(store, sweep_id)


def _default_name(spec: JobSpec, settings: SweepSettings) -> str:
    script = next((a for a in spec.argv[1:] if a.endswith(".py")), spec.argv[0])
    script = script.rsplit("/", 1)[-1]
    return f"{script} {settings.method} {settings.goal} {settings.metric}"[:200]


def _trial_config(
    base: Mapping[str, Any], parsed: Sequence[Any], params: Mapping[str, Any]
) -> dict[str, Any]:
    config = dict(base)
    for key, value in {**fixed_config(parsed), **params}.items():
        config = set_path(config, key, value)
    return config


# ----------------------------------------------------------------------------- reads


def settings_of(row: Any) -> SweepSettings:
    """The search settings a stored sweep (a ``sweeps`` row or a SweepInfo) was made with."""
    return SweepSettings(
        method=row.method,
        metric=row.metric,
        goal=row.goal,
        trials=row.trials,
        parallel=row.parallel,
        prune=row.prune,
        seed=row.seed,
        objective=row.objective,
    )


def _trial_info(row: Any) -> TrialInfo:
    return TrialInfo(
        sweep_id=row.sweep_id,
        number=row.number,
        params=dict(row.params or {}),
        state=row.state,
        value=row.value,
        job_id=row.job_id,
        run_id=row.run_id,
        job_status=row.job_status,
        pruned_step=row.pruned_step,
        note=row.note,
        created_at=row.created_at,
        ended_at=row.ended_at,
    )


def _trial_query() -> sa.Select[Any]:
    t = m.SweepTrialRow
    return (
        sa.select(
            t.sweep_id,
            t.number,
            t.params,
            t.state,
            t.value,
            t.job_id,
            t.pruned_step,
            t.note,
            t.created_at,
            t.ended_at,
            t.system_attrs,
            t.intermediate,
            m.JobRow.run_id,
            m.JobRow.status.label("job_status"),
        )
        .select_from(t)
        .outerjoin(m.JobRow, m.JobRow.id == t.job_id)
    )


def _best(row: Any, found: Sequence[TrialInfo]) -> TrialInfo | None:
    done = [t for t in found if t.state == "complete" and t.value is not None]
    if not done:
        return None
    pick = min if row.goal == "minimize" else max
    return pick(done, key=lambda t: (t.value, -t.number) if pick is max else (t.value, t.number))


def _sweep_info(row: Any, found: Sequence[TrialInfo]) -> SweepInfo:
    counts: dict[str, int] = {}
    for t in found:
        counts[t.state] = counts.get(t.state, 0) + 1
    return SweepInfo(
        id=row.id,
        name=row.name,
        project=row.project,
        status=row.status,
        method=row.method,
        metric=row.metric,
        goal=row.goal,
        objective=row.objective,
        trials=row.trials,
        parallel=row.parallel,
        prune=row.prune,
        seed=row.seed,
        space=list(row.space or []),
        spec=dict(row.spec or {}),
        created_at=row.created_at,
        ended_at=row.ended_at,
        note=row.note,
        counts=counts,
        best=_best(row, found),
    )


def get_sweep(store: Store, sweep_id: int) -> SweepInfo:
    """Raises NotFound (no such sweep) or StoreUnavailable."""
    with read_conn(store.engine) as conn:
        row = conn.execute(sa.select(m.SweepRow).where(m.SweepRow.id == sweep_id)).first()
        if row is None:
            raise NotFound(f"no sweep {sweep_id}", field="sweep_id")
        found = conn.execute(_trial_query().where(m.SweepTrialRow.sweep_id == sweep_id)).all()
    return _sweep_info(row, [_trial_info(r) for r in found])


def list_sweeps(
    store: Store, *, project: str | None = None, status: str | None = None, limit: int = 100
) -> list[SweepInfo]:
    """Sweeps, newest first. Raises InvalidInput (a bad status) or StoreUnavailable."""
    if status is not None and status not in SWEEP_STATUSES:
        raise InvalidInput(
            f"status: {status!r} is not one of {', '.join(SWEEP_STATUSES)}", field="status"
        )
    query = sa.select(m.SweepRow).order_by(m.SweepRow.id.desc()).limit(limit)
    if project is not None:
        query = query.where(m.SweepRow.project == project)
    if status is not None:
        query = query.where(m.SweepRow.status == status)
    with read_conn(store.engine) as conn:
        rows = conn.execute(query).all()
        ids = [r.id for r in rows]
        found = (
            conn.execute(_trial_query().where(m.SweepTrialRow.sweep_id.in_(ids))).all()
            if ids
            else []
        )
    by_sweep: dict[int, list[TrialInfo]] = {}
    for r in found:
        by_sweep.setdefault(r.sweep_id, []).append(_trial_info(r))
    return [_sweep_info(r, by_sweep.get(r.id, [])) for r in rows]


def trials(store: Store, sweep_id: int) -> list[TrialInfo]:
    """The trials of a sweep by number. Raises NotFound or StoreUnavailable."""
    with read_conn(store.engine) as conn:
        if conn.execute(sa.select(m.SweepRow.id).where(m.SweepRow.id == sweep_id)).first() is None:
            raise NotFound(f"no sweep {sweep_id}", field="sweep_id")
        rows = conn.execute(
            _trial_query()
            .where(m.SweepTrialRow.sweep_id == sweep_id)
            .order_by(m.SweepTrialRow.number)
        ).all()
    return [_trial_info(r) for r in rows]


# ----------------------------------------------------------------------------- stop/resume


def stop_sweep(store: Store, sweep_id: int, *, kill: bool = False) -> SweepInfo:
    """Queue no more trials; the queued trials' jobs are cancelled (their trials fail), and
    with ``kill`` the running ones too. A finished sweep is left as it is.

    Raises NotFound or StoreUnavailable."""
    now = store.now()
    with write_begin(store.engine) as conn:
        status = conn.execute(
            sa.select(m.SweepRow.status).where(m.SweepRow.id == sweep_id)
        ).scalar()
        if status is None:
            raise NotFound(f"no sweep {sweep_id}", field="sweep_id")
        if status == "running":
            conn.execute(
                sa.update(m.SweepRow)
                .where(m.SweepRow.id == sweep_id)
                .values(status="stopped", ended_at=now, note="stopped by a person")
            )
        jobs = conn.execute(
            sa.select(m.JobRow.id, m.JobRow.status)
            .join(m.SweepTrialRow, m.SweepTrialRow.job_id == m.JobRow.id)
            .where(m.SweepTrialRow.sweep_id == sweep_id, m.SweepTrialRow.state == "running")
        ).all()
    for job_id, job_status in jobs:
        if job_status == "queued" or (kill and job_status == "running"):
            cancel(store, job_id)
    return get_sweep(store, sweep_id)


def resume_sweep(store: Store, sweep_id: int, *, trials: int | None = None) -> SweepInfo:
    """Queue trials again: a stopped sweep, or a finished one given a larger budget
    (``trials``: the new total, at least the trials it has; a grid at most its size).

    Raises NotFound, Conflict (it is running and no budget is given), InvalidInput (a bad
    ``trials``) or StoreUnavailable."""
    with write_begin(store.engine) as conn:
        row = conn.execute(sa.select(m.SweepRow).where(m.SweepRow.id == sweep_id)).first()
        if row is None:
            raise NotFound(f"no sweep {sweep_id}", field="sweep_id")
        values: dict[str, Any] = {"status": "running", "ended_at": None, "note": None}
        if trials is not None:
            have = conn.execute(
                sa.select(sa.func.count()).where(m.SweepTrialRow.sweep_id == sweep_id)
            ).scalar_one()
            SweepSettings(metric=row.metric, trials=trials).check()
            if trials < have:
                raise InvalidInput(
                    f"trials: {trials} is fewer than the {have} trials sweep {sweep_id} has",
                    field="trials",
                )
            if row.method == "grid":
                size = grid_size(parse_overrides(list(row.space or [])))
                if trials > size:
                    raise InvalidInput(
                        f"trials: the grid of sweep {sweep_id} has {size} configs", field="trials"
                    )
            values["trials"] = trials
        elif row.status == "running":
            raise Conflict(f"sweep {sweep_id} is running", field="sweep_id")
        conn.execute(sa.update(m.SweepRow).where(m.SweepRow.id == sweep_id).values(**values))
    return get_sweep(store, sweep_id)


# ----------------------------------------------------------------------------- control


def control_once(store: Store, *, now: float | None = None) -> list[str]:
    """One controller pass over every running sweep (see the module's doc); what it did,
    as lines for the log. Raises StoreUnavailable; a sweep whose sampler fails gets a note
    and the others go on."""
    with read_conn(store.engine) as conn:
        # running sweeps, and stopped ones whose last trials have yet to be read
        live = sa.select(m.SweepTrialRow.sweep_id).where(m.SweepTrialRow.state == "running")
        query = sa.select(m.SweepRow.id).where(
            sa.or_(m.SweepRow.status == "running", m.SweepRow.id.in_(live))
        )
        ids = conn.execute(query.order_by(m.SweepRow.id)).scalars().all()
    if not ids:
        return []
    try:
        import optuna  # noqa: F401 - the decisions need it
    except ImportError:
        _warn_once("sweeps: the controller needs Optuna: pip install 'tracker[runner]'")
        return []
    done: list[str] = []
    for sweep_id in ids:
        try:
            done += _control_sweep(store, sweep_id, now)
        except StoreUnavailable:
            raise  # the periodic loop says so once and runs the pass again
        except Exception:
            log.exception("sweep %s: the controller failed; it tries again next pass", sweep_id)
    return done


_warned: set[str] = set()


def _warn_once(text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        log.warning(text)


def _control_sweep(store: Store, sweep_id: int, now: float | None) -> list[str]:
    from tracker.rules.sweep_search import next_params, should_prune

    done: list[str] = []
    with read_conn(store.engine) as conn:
        sweep = conn.execute(sa.select(m.SweepRow).where(m.SweepRow.id == sweep_id)).one()
        rows = conn.execute(
            _trial_query()
            .where(m.SweepTrialRow.sweep_id == sweep_id)
            .order_by(m.SweepTrialRow.number)
        ).all()
        key_id = conn.execute(
            sa.select(m.MetricKeyRow.id).where(m.MetricKeyRow.name == sweep.metric)
        ).scalar()
        # a running trial's steps the pruner has not seen yet (it saw the others already)
        unseen = {
            r.run_id: (r.system_attrs or {}).get(CHECKED)
            for r in rows
            if r.state == "running" and r.run_id is not None and r.job_status == "running"
        }
        series = _series(conn, unseen, key_id)
    settings = settings_of(sweep)
    parsed = parse_overrides(list(sweep.space or []))
    study_name = f"sweep-{sweep_id}"
    history: dict[int, TrialRecord] = {}
    for r in rows:
        inter = series.get(r.run_id, {}) if r.state == "running" else _steps(r.intermediate or {})
        history[r.number] = TrialRecord(
            r.number, dict(r.params or {}), r.state, r.value, inter, dict(r.system_attrs or {})
        )
    # 1. ended trials
    for r in rows:
        if r.state != "running":
            continue
        if r.job_id is None or r.job_status in FINAL_JOB_STATUSES:
            state, value, note = _ended(store, r, sweep, key_id)
            inter = _full_series(store, r.run_id, key_id)
            attrs = _replayed(settings, parsed, history, r.number, inter, study_name, state)
            if _end_trial(store, sweep_id, r.number, state, value, note, inter, attrs):
                shown = f" ({sweep.metric} {value:.6g})" if value is not None else ""
                done.append(f"sweep {sweep_id}: trial {r.number} {state}{shown}")
            history[r.number] = replace(
                history[r.number], state=state, value=value, intermediate=inter,
                system_attrs=attrs if attrs is not None else history[r.number].system_attrs,
            )  # fmt: skip
    if sweep.status != "running":
        return done
    # 2. pruning
    if settings.prune != "none":
        for r in rows:
            if history[r.number].state != "running" or r.job_status != "running":
                continue
            if not history[r.number].intermediate:
                continue  # no step it has not seen: nothing new to decide
            step, attrs = should_prune(
                settings, parsed, list(history.values()), r.number, study_name
            )
            _keep_attrs(store, sweep_id, r.number, attrs)
            history[r.number] = replace(history[r.number], system_attrs=attrs)
            if step is None:
                continue
            seen = history[r.number].intermediate
            value = seen.get(step)
            full = _full_series(store, r.run_id, key_id)
            if _prune_trial(store, sweep, r, step, value, full):
                done.append(f"sweep {sweep_id}: trial {r.number} pruned at step {step}")
                history[r.number] = replace(history[r.number], state="pruned", value=value)
    # 3. new trials
    while True:
        in_flight = sum(1 for t in history.values() if t.state == "running")
        if in_flight >= sweep.parallel or len(history) >= sweep.trials:
            break
        number = max(history, default=-1) + 1
        params, attrs = next_params(settings, parsed, list(history.values()), number, study_name)
        job_id = _queue_trial(store, sweep, parsed, number, params, attrs, now)
        if job_id is None:
            done.append(f"sweep {sweep_id}: trial {number} was queued by another controller")
            break
        done.append(f"sweep {sweep_id}: trial {number} queued as job {job_id}: {params}")
        history[number] = TrialRecord(number, params, "running", None, {}, attrs)
    # 4. finished
    if len(history) >= sweep.trials and all(t.state != "running" for t in history.values()):
        _finish(store, sweep_id, history, sweep.goal)
        done.append(f"sweep {sweep_id}: finished")
    return done


def _replayed(
    settings: SweepSettings,
    parsed: Sequence[Any],
    history: Mapping[int, TrialRecord],
    number: int,
    inter: Mapping[int, float],
    study_name: str,
    state: str,
) -> dict[str, Any] | None:
    """The pruner's bookkeeping of a trial that ended ``complete``, every step it logged
    shown (``should_prune(replay=True)``): a trial that finished between two passes still
    sets the bar at each rung it reached. None: nothing to keep."""
    from tracker.rules.sweep_search import should_prune

    if settings.prune == "none" or state != "complete" or not inter:
        return None
    records = dict(history)
    records[number] = replace(records[number], state="running", intermediate=dict(inter))
    _, attrs = should_prune(
        settings, parsed, list(records.values()), number, study_name, replay=True
    )
    return attrs


def _steps(stored: Mapping[str, Any]) -> dict[int, float]:
    return {int(k): float(v) if v is not None else math.nan for k, v in stored.items()}


def _series(
    conn: sa.Connection, after: Mapping[int, int | None], key_id: int | None
) -> dict[int, dict[int, float]]:
    """step -> value (the last value at a step: the highest seq) for each run, from the
    step after ``after[run_id]`` (None: from the start)."""
    if not after or key_id is None:
        return {}
    p = m.MetricPointRow
    out: dict[int, dict[int, float]] = {}
    for run_id, last in after.items():
        sealed = sealed_points(conn, run_id, key_id, None if last is None else int(last) + 1)
        if sealed is not None:
            for step, value in zip(sealed.steps.tolist(), sealed.values.tolist(), strict=True):
                out.setdefault(run_id, {})[step] = value
            continue
        query = sa.select(p.step, p.value).where(p.run_id == run_id, p.key_id == key_id)
        if last is not None:
            query = query.where(p.step > int(last))
        for step, value in conn.execute(query.order_by(p.step, p.seq)).all():
            out.setdefault(run_id, {})[int(step)] = float(value)
    return out


def _full_series(store: Store, run_id: int | None, key_id: int | None) -> dict[int, float]:
    if run_id is None or key_id is None:
        return {}
    with read_conn(store.engine) as conn:
        return _series(conn, {run_id: None}, key_id).get(run_id, {})


def _ended(store: Store, r: Any, sweep: Any, key_id: int | None) -> tuple[str, float | None, str]:
    """How a trial whose job ended ends: (state, objective, note)."""
    if r.job_id is None:
        return "failed", None, "its job was deleted"
    if r.job_status == "pruned":
        return "pruned", r.value, r.note or "pruned"
    if r.job_status != "succeeded":
        return "failed", None, f"its job ended {r.job_status}"
    value = _objective(store, r.run_id, key_id, sweep.objective, sweep.goal)
    if value is None:
        return "failed", None, f"the run never logged {sweep.metric!r}"
    if not math.isfinite(value):
        return "failed", None, f"{sweep.metric} ended {value!r}"
    return "complete", value, f"{sweep.metric} {value:.6g}"


def _objective(
    store: Store, run_id: int | None, key_id: int | None, objective: str, goal: str
) -> float | None:
    if run_id is None or key_id is None:
        return None
    with read_conn(store.engine) as conn:
        if objective == "last":
            s = m.MetricSummaryRow
            row = conn.execute(
                sa.select(s.last_value).where(s.run_id == run_id, s.key_id == key_id)
            ).first()
            if row is None:
                return None
            return float(row[0])
        sealed = sealed_points(conn, run_id, key_id)
        if sealed is not None:  # as SQL's min/max: NaN (NULL) left out, +-Inf counted
            kept = [v for v in sealed.values.tolist() if v == v]
            return (min if goal == "minimize" else max)(kept) if kept else None
        p = m.MetricPointRow
        agg = sa.func.min if goal == "minimize" else sa.func.max
        return conn.execute(
            sa.select(agg(p.value)).where(p.run_id == run_id, p.key_id == key_id)
        ).scalar()


def _thin(inter: Mapping[int, float]) -> dict[str, float | None]:
    steps = sorted(inter)
    if len(steps) > MAX_INTERMEDIATE:
        every = math.ceil(len(steps) / MAX_INTERMEDIATE)
        steps = steps[::every] + ([steps[-1]] if (len(steps) - 1) % every else [])
    return {str(s): (None if math.isnan(inter[s]) else inter[s]) for s in steps}


def _end_trial(
    store: Store,
    sweep_id: int,
    number: int,
    state: str,
    value: float | None,
    note: str,
    inter: Mapping[int, float],
    attrs: Mapping[str, Any] | None = None,
) -> bool:
    now = store.now()
    values: dict[str, Any] = {"state": state, "note": note, "ended_at": now}
    if attrs is not None:
        values["system_attrs"] = dict(attrs)
    if state != "pruned":
        values["value"] = value
    if inter:
        values["intermediate"] = _thin(inter)
    with write_begin(store.engine) as conn:
        t = m.SweepTrialRow
        changed = conn.execute(
            sa.update(t)
            .where(t.sweep_id == sweep_id, t.number == number, t.state == "running")
            .values(**values)
        ).rowcount
        if state == "pruned" and changed == 0:
            # pruned earlier (its row says so): only the job's end is new
            conn.execute(
                sa.update(t)
                .where(t.sweep_id == sweep_id, t.number == number, t.ended_at.is_(None))
                .values(ended_at=now)
            )
    return changed == 1


def _keep_attrs(store: Store, sweep_id: int, number: int, attrs: Mapping[str, Any]) -> None:
    t = m.SweepTrialRow
    with write_begin(store.engine) as conn:
        conn.execute(
            sa.update(t)
            .where(t.sweep_id == sweep_id, t.number == number, t.state == "running")
            .values(system_attrs=dict(attrs))
        )


def _prune_trial(
    store: Store, sweep: Any, r: Any, step: int, value: float | None, inter: Mapping[int, float]
) -> bool:
    shown = "nan" if value is None or math.isnan(value) else f"{value:.6g}"
    note = (
        f"Pruned by sweep {sweep.id} ({sweep.prune}) at step {step}: {sweep.metric} {shown} "
        "was worse than its peers at that step."
    )
    t = m.SweepTrialRow
    with write_begin(store.engine) as conn:
        # The job's row locked (the queue's end of an attempt locks it too): a job that
        # ended since this pass read it keeps its own verdict, and one that ends after
        # this commit finds its trial pruned (tracker.store.pruned): never a pruned trial
        # beside a succeeded job.
        job = conn.execute(
            sa.select(m.JobRow.status).where(m.JobRow.id == r.job_id).with_for_update()
        ).scalar()
        if job is None or job in FINAL_JOB_STATUSES:
            return False
        won = conn.execute(
            sa.update(t)
            .where(t.sweep_id == sweep.id, t.number == r.number, t.state == "running")
            .values(
                state="pruned",
                pruned_step=step,
                value=None if value is None or not math.isfinite(value) else value,
                note=note,
                intermediate=_thin(inter),
            )
        ).rowcount
    if won != 1:
        return False
    cancel(store, r.job_id)
    return True


def _queue_trial(
    store: Store,
    sweep: Any,
    parsed: Sequence[Any],
    number: int,
    params: Mapping[str, Any],
    attrs: Mapping[str, Any],
    now: float | None,
) -> int | None:
    """Insert trial ``number`` and its job in one transaction; None when it exists already
    (another controller won)."""
    now = store.now() if now is None else now
    base = spec_from_dict(dict(sweep.spec or {}))
    spec = replace(
        base,
        config=_trial_config(base.config, parsed, params),
        tags=(*base.tags, sweep_tag(sweep.id)),
        name=f"{(base.name or sweep.name)[:180]} #{number}",
    )
    spec = check_spec(spec)
    t = m.SweepTrialRow
    try:
        with write_begin(store.engine) as conn:
            # the sweep row locked first (PostgreSQL), so two controllers queue in turn;
            # the primary key decides on SQLite, whose writers are serialised anyway
            status = conn.execute(
                sa.select(m.SweepRow.status).where(m.SweepRow.id == sweep.id).with_for_update()
            ).scalar()
            if status != "running":
                return None
            exists = conn.execute(
                sa.select(t.number).where(t.sweep_id == sweep.id, t.number == number)
            ).first()
            if exists is not None:
                return None
            job_id = insert_job(conn, spec, now)
            conn.execute(
                sa.insert(t).values(
                    sweep_id=sweep.id,
                    number=number,
                    job_id=job_id,
                    params=dict(params),
                    state="running",
                    system_attrs=dict(attrs),
                    intermediate={},
                    created_at=now,
                )
            )
    except sa.exc.IntegrityError:
        return None
    return job_id


def _finish(store: Store, sweep_id: int, history: Mapping[int, TrialRecord], goal: str) -> None:
    done = [t for t in history.values() if t.state == "complete" and t.value is not None]
    if done:
        pick = min if goal == "minimize" else max
        best = pick(done, key=lambda t: t.value if t.value is not None else math.nan)
        note = f"best: trial {best.number}, {best.value:.6g}"
    else:
        note = "no trial completed"
    with write_begin(store.engine) as conn:
        conn.execute(
            sa.update(m.SweepRow)
            .where(m.SweepRow.id == sweep_id, m.SweepRow.status == "running")
            .values(status="finished", ended_at=store.now(), note=note)
        )
