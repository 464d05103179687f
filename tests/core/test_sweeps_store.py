"""Sweeps that learn, in the store: the controller queues trials as jobs, exactly once,
reads ended trials' objectives, prunes through the queue and finishes (SQLite and
PostgreSQL). Jobs are claimed and finished through the real queue; metrics are written
through the real store."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.threads import raised_at_once
from tracker.entities import Failure, JobSpec
from tracker.errors import InvalidInput, NotFound
from tracker.rules.sweep_search import SweepSettings
from tracker.store import Store, queue, sweeps
from tracker.store.jobs import get_job
from tracker.store.metrics import log_metrics

pytest.importorskip("optuna")

SPEC = JobSpec(argv=["python", "train.py"], project="sw")


def _settings(**kw: Any) -> SweepSettings:
    base = {"method": "tpe", "metric": "val/loss", "trials": 6, "parallel": 2, "seed": 1}
    base.update(kw)
    return SweepSettings(**base)


def _claim(store: Store) -> Any:
    got = queue.claim(store, "w1", lease_s=60)
    assert got is not None
    return got[0]


def _finish(store: Store, claim: Any, failure: Failure | None = None) -> None:
    code = 0 if failure is None else 1
    queue.finish(store, claim, exit_code=code, failure=failure)


def _run_trial(store: Store, values: dict[int, float], failure: Failure | None = None) -> Any:
    claim = _claim(store)
    for step, value in values.items():
        log_metrics(store, claim.run_id, step, {"val/loss": value})
    _finish(store, claim, failure)
    return claim


def test_controller_queues_trials_and_finishes(store: Store) -> None:
    sweep = sweeps.create_sweep(store, SPEC, ["lr=loguniform(1e-4,1e-1)", "width=32,64",
                                              "epochs=2"], _settings())  # fmt: skip
    assert sweep.status == "running" and sweep.space[0].startswith("lr=")
    sweeps.control_once(store)
    first = sweeps.trials(store, sweep.id)
    assert [t.number for t in first] == [0, 1]  # parallel 2
    job = get_job(store, first[0].job_id)
    assert job.config["epochs"] == 2 and 1e-4 <= job.config["lr"] <= 1e-1
    assert job.config["width"] in (32, 64)
    sweeps.control_once(store)  # nothing ended: nothing more queued
    assert len(sweeps.trials(store, sweep.id)) == 2
    for n in range(6):
        claim = _claim(store)
        log_metrics(store, claim.run_id, 0, {"val/loss": 1.0 + n})
        log_metrics(store, claim.run_id, 1, {"val/loss": 0.5 + n})
        _finish(store, claim)
        sweeps.control_once(store)
    done = sweeps.get_sweep(store, sweep.id)
    assert done.status == "finished", done
    assert done.counts == {"complete": 6}
    assert done.best is not None and done.best.value == 0.5 and done.best.number == 0


def test_two_controllers_never_queue_a_trial_twice(store: Store) -> None:
    sweep = sweeps.create_sweep(store, SPEC, ["lr=uniform(0,1)"], _settings(parallel=4))

    def go() -> None:
        for _ in range(3):
            sweeps.control_once(store)

    assert raised_at_once(go, 4) == []
    found = sweeps.trials(store, sweep.id)
    assert [t.number for t in found] == [0, 1, 2, 3]
    job_ids = [t.job_id for t in found]
    assert len(set(job_ids)) == 4
    assert len(queue_jobs(store)) == 4


def queue_jobs(store: Store) -> list[Any]:
    from tracker.store.jobs import list_jobs

    return list_jobs(store, project="sw")


def test_failed_trial_is_told_as_failed_and_missing_metric_fails(store: Store) -> None:
    sweep = sweeps.create_sweep(store, SPEC, ["lr=uniform(0,1)"], _settings(parallel=1,
                                                                             trials=2))  # fmt: skip
    sweeps.control_once(store)
    _run_trial(store, {}, Failure("python_exception", "boom"))
    sweeps.control_once(store)
    _run_trial(store, {})  # succeeded, never logged val/loss
    sweeps.control_once(store)
    found = sweeps.trials(store, sweep.id)
    assert [t.state for t in found] == ["failed", "failed"]
    assert "failed" in (found[0].note or "")
    assert "never logged" in (found[1].note or "")
    assert sweeps.get_sweep(store, sweep.id).status == "finished"


def _pruning_sweep(store: Store) -> tuple[Any, Any]:
    """A median-pruned sweep with its startup trials done and a bad trial 5 running."""
    sweep = sweeps.create_sweep(
        store, SPEC, ["lr=uniform(0,1)"], _settings(parallel=1, trials=8, prune="median")
    )
    for _ in range(5):  # 5 good trials: the median pruner's startup
        sweeps.control_once(store)
        _run_trial(store, {s: 1.0 / (s + 1) for s in range(5)})
    sweeps.control_once(store)
    claim = _claim(store)
    for s in range(3):
        log_metrics(store, claim.run_id, s, {"val/loss": 10.0})
    return sweep, claim


def test_pruned_trial_is_cancelled_and_ends_pruned(store: Store) -> None:
    sweep, claim = _pruning_sweep(store)
    sweeps.control_once(store)
    trial = sweeps.trials(store, sweep.id)[5]
    assert trial.state == "pruned" and trial.pruned_step == 0, trial
    state = queue.poll(store, [claim])[claim.job.id]
    assert state.cancel_requested  # the worker stops it, as for any cancel
    queue.finish(store, claim, exit_code=None, failure=Failure("cancelled", "x"))
    job = get_job(store, claim.job.id)
    assert job.status == "pruned" and job.failure_class == "pruned"
    assert "Pruned by sweep" in (job.failure_hint or "")
    assert job.attempt == 1


def test_a_pruned_trials_process_that_exits_0_before_the_kill_ends_pruned(store: Store) -> None:
    sweep, claim = _pruning_sweep(store)
    sweeps.control_once(store)
    assert sweeps.trials(store, sweep.id)[5].state == "pruned"
    queue.finish(store, claim, exit_code=0, failure=None)  # its last step beat the kill
    job = get_job(store, claim.job.id)
    assert (job.status, job.failure_class) == ("pruned", "pruned")


def test_a_job_that_ends_while_the_controller_decides_is_not_pruned(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller read the trial's job as running; the job succeeds before the prune
    is written (here: while the controller reads the trial's series). The trial is not
    pruned beside a succeeded job: the next pass ends it by its job's verdict."""
    sweep, claim = _pruning_sweep(store)
    read_series = sweeps._full_series

    def job_ends_meanwhile(*args: Any) -> Any:
        if get_job(store, claim.job.id).status == "running":
            queue.finish(store, claim, exit_code=0, failure=None)
        return read_series(*args)

    monkeypatch.setattr(sweeps, "_full_series", job_ends_meanwhile)
    sweeps.control_once(store)
    assert get_job(store, claim.job.id).status == "succeeded"
    assert sweeps.trials(store, sweep.id)[5].state == "running"
    monkeypatch.undo()
    sweeps.control_once(store)
    trial = sweeps.trials(store, sweep.id)[5]
    assert (trial.state, trial.value) == ("complete", 10.0)


def test_stop_and_resume(store: Store) -> None:
    sweep = sweeps.create_sweep(store, SPEC, ["lr=uniform(0,1)"], _settings(parallel=2))
    sweeps.control_once(store)
    stopped = sweeps.stop_sweep(store, sweep.id)
    assert stopped.status == "stopped"
    assert {get_job(store, t.job_id).status for t in sweeps.trials(store, sweep.id)} == {
        "cancelled"
    }
    sweeps.control_once(store)
    assert [t.state for t in sweeps.trials(store, sweep.id)] == ["failed", "failed"]
    sweeps.resume_sweep(store, sweep.id)
    sweeps.control_once(store)
    assert len(sweeps.trials(store, sweep.id)) == 4


def test_bad_input_is_named(store: Store) -> None:
    with pytest.raises(InvalidInput, match="--method"):
        sweeps.create_sweep(store, SPEC, ["lr=uniform(0,1)"], _settings(method="bayes"))
    with pytest.raises(InvalidInput, match="-c lr=uniform"):
        sweeps.create_sweep(store, SPEC, ["lr=uniform(0,1)"], _settings(method="grid"))
    with pytest.raises(InvalidInput, match="at least one -c"):
        sweeps.create_sweep(store, SPEC, ["lr=0.1"], _settings())
    with pytest.raises(InvalidInput, match="--metric"):
        sweeps.create_sweep(store, SPEC, ["lr=0.1,0.2"], _settings(metric=" "))
    with pytest.raises(NotFound):
        sweeps.get_sweep(store, 999)
    grid = sweeps.create_sweep(store, SPEC, ["a=1,2", "b=x,y,z"], _settings(method="grid",
                                                                            trials=50))  # fmt: skip
    assert grid.trials == 6


@pytest.mark.parametrize("prune", ["asha", "hyperband"])
def test_trials_that_ended_between_passes_still_set_the_bar(store: Store, prune: str) -> None:
    """Successive halving compares a trial with the values earlier trials had at each rung.
    Trials that start and finish between two controller passes were never seen running:
    their rungs are replayed from the steps they logged, so a bad trial is still pruned."""
    sweep = sweeps.create_sweep(
        store, SPEC, ["lr=uniform(0,1)"], _settings(parallel=1, trials=12, prune=prune)
    )
    for _ in range(8):
        sweeps.control_once(store)
        _run_trial(store, {s: 1.0 + 1.0 / (s + 1) for s in range(16)})  # unseen while running
    sweeps.control_once(store)
    assert [t.state for t in sweeps.trials(store, sweep.id)][:8] == ["complete"] * 8
    claim = _claim(store)
    for s in range(6):
        log_metrics(store, claim.run_id, s, {"val/loss": 50.0})
    sweeps.control_once(store)
    trial = sweeps.trials(store, sweep.id)[8]
    assert trial.state == "pruned", trial
    assert trial.pruned_step is not None and trial.pruned_step <= 5


def test_a_broken_sweep_does_not_stop_the_others(store: Store) -> None:
    """A stored sweep the controller cannot read (its space no longer parses) is logged and
    skipped; the sweeps after it are still driven."""
    import sqlalchemy as sa

    from tracker.store import models as m

    broken = sweeps.create_sweep(store, SPEC, ["lr=uniform(0,1)"], _settings(parallel=1))
    fine = sweeps.create_sweep(store, SPEC, ["lr=uniform(0,1)"], _settings(parallel=1))
    with store.engine.begin() as conn:
        conn.execute(sa.update(m.SweepRow).where(m.SweepRow.id == broken.id).values(space=["lr="]))
    sweeps.control_once(store)
    assert sweeps.trials(store, broken.id) == []
    assert [t.number for t in sweeps.trials(store, fine.id)] == [0]
