"""What the dashboard shows and asks of sweeps that learn: the sweep page's one read
(:func:`detail`: the sweep, its trials, each param's importance and every trial's learning
curve) and a sweep made from a submitted job or run (:func:`create_from`, the dashboard's
"sweep that learns" of the clone editor) or from a job spec a submitter sends.

The sweep's life (trials queued, pruned, ended) is :mod:`tracker.store.sweeps`; the
importance is the pure rule :func:`tracker.rules.sweep_search.param_importance`; the curves
are :func:`tracker.store.series.read_aligned` (every trial's run on one window, min/max/last
buckets, one query per source for all of them).

Raises: NotFound (no such sweep, job or run), Conflict (a run no job ran), InvalidInput /
SweepSpecError (a field of the new sweep breaks a rule, naming it), StoreUnavailable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tracker.entities import JobSpec, SweepInfo, TrialInfo
from tracker.rules.sweep import parse_overrides
from tracker.rules.sweep_search import SweepSettings, TrialRecord, param_importance
from tracker.store import sweeps
from tracker.store.clone import clone_specs, spec_from_job, spec_from_run
from tracker.store.series import SeriesRead, read_aligned
from tracker.store.store import Store

__all__ = ["CURVE_BUCKETS", "MAX_CURVES", "SweepDetail", "create_from", "detail"]

CURVE_BUCKETS = 200  # buckets per learning curve: a chart of many thin lines needs no more
MAX_CURVES = 300  # the newest trials' curves; older ones are counted in ``curves_left_out``


@dataclass(frozen=True)
class SweepDetail:
    """The sweep page's data. ``curves`` maps a trial's number to its run's series of the
    sweep's metric (trials whose run never logged it are absent); ``importance_note`` says
    why ``importance`` is empty, or what Optuna warned of."""

    sweep: SweepInfo
    trials: list[TrialInfo]
    importance: dict[str, float]
    importance_note: str | None
    curves: dict[int, SeriesRead] = field(default_factory=dict)
    curves_left_out: int = 0


def detail(store: Store, sweep_id: int, *, max_buckets: int = CURVE_BUCKETS) -> SweepDetail:
    """The sweep, its trials by number, the params' importance and the trials' curves.

    Raises NotFound (no such sweep) or StoreUnavailable."""
    sweep = sweeps.get_sweep(store, sweep_id)
    found = sweeps.trials(store, sweep_id)
    history = [
        TrialRecord(number=t.number, params=t.params, state=t.state, value=t.value) for t in found
    ]
    importance, note = param_importance(
        sweeps.settings_of(sweep), parse_overrides(sweep.space), history
    )
    with_run = [t for t in found if t.run_id is not None]
    shown = with_run[-MAX_CURVES:]
    curves: dict[int, SeriesRead] = {}
    if shown:
        reads, _ = read_aligned(
            store, [t.run_id for t in shown if t.run_id is not None], [sweep.metric],
            max_buckets=max_buckets,
        )  # fmt: skip
        aligned = reads[0] if reads else None  # None: no run ever logged the metric (yet)
        if aligned is not None and aligned.grid is not None:
            for t in shown:
                read = aligned.reads.get(t.run_id or 0)
                if read is not None and read.series.buckets:
                    curves[t.number] = read
    return SweepDetail(
        sweep=sweep,
        trials=found,
        importance=importance,
        importance_note=note,
        curves=curves,
        curves_left_out=len(with_run) - len(shown),
    )


def create_from(
    store: Store,
    source: tuple[Literal["job", "run"], int] | JobSpec,
    overrides: list[str],
    settings: SweepSettings,
    *,
    config: Any = None,
    priority: Any = None,
    fail_on: Any = None,
    name: str | None = None,
) -> SweepInfo:
    """A sweep whose trials copy a submitted job (or the job that ran a run), as a clone
    does: its argv, cwd, env and resources; ``config``, ``priority`` and ``fail_on`` edited
    as :func:`tracker.store.clone.clone_specs` allows; the trials' params set over it. A
    ``JobSpec`` source is the trials' job itself (a submitter's, as ``POST /jobs`` takes
    one): no edits apply.

    Raises: NotFound, Conflict (a run no job ran), InvalidInput / SweepSpecError (naming the
    field; a snapshot that does not exist), StoreUnavailable."""
    if isinstance(source, JobSpec):
        return sweeps.create_sweep(store, source, overrides, settings, name=name)
    kind, source_id = source
    template = spec_from_job(store, source_id) if kind == "job" else spec_from_run(store, source_id)
    # the trials' jobs name the source as their parent, as a clone's do
    (spec,) = clone_specs(template, config=config, priority=priority, fail_on=fail_on)
    return sweeps.create_sweep(store, spec, overrides, settings, name=name)
