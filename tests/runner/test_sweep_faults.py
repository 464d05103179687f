"""A sweep's controller killed mid-sweep, and two controllers at once (issue 31).

The controller is the periodic work of a process (here ``tracker scheduler``; the worker runs
with ``--no-housekeeping`` so it runs trials only). Everything the controller decides from is
in the store, so SIGKILLing it while trials are in flight loses nothing: the next scheduler
goes on, and two schedulers at once queue each trial once (the key (sweep, number) and the
sweep row's lock). Real processes, SQLite and PostgreSQL.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.runner.test_sweep_jobs import check_verdict, finished, show, start_sweep
from tests.support.polling import wait_for
from tests.support.runner import Procs
from tracker.store import Store, sweeps
from tracker.store import jobs as store_jobs

pytestmark = pytest.mark.slow

TRIALS = 8


def _count(procs: Procs, sweep_id: int) -> int:
    return len(show(procs, sweep_id)["trials"])


def test_sigkilled_controllers_lose_no_trial_and_two_queue_each_once(
    store: Store, procs: Procs, out: Path
) -> None:
    sweep_id = start_sweep(procs, out, "random", TRIALS)  # queues trials 0 and 1 itself
    procs.worker("--gpus", "none", "--max-jobs", "2", "--grace-seconds", "2",
                 "--no-housekeeping")  # fmt: skip
    first = [procs.scheduler(), procs.scheduler()]  # two controllers at once
    # read from the store, not `sweeps show`: a CLI process takes seconds on a loaded
    # machine, and pruned trials end fast enough that the sweep was over before it answered
    wait_for(lambda: len(sweeps.trials(store, sweep_id)) >= 3, 60, "trial 2 to be queued")
    in_flight = sweeps.trials(store, sweep_id)
    assert sweeps.get_sweep(store, sweep_id).status == "running" and len(in_flight) < TRIALS
    for scheduler in first:
        scheduler.signal(signal.SIGKILL)
    for scheduler in first:
        scheduler.wait(10, "the SIGKILLed scheduler to exit")
    assert any(t.state == "running" for t in sweeps.trials(store, sweep_id))
    # a fresh controller takes over from the store alone; later a second joins it
    procs.scheduler()
    wait_for(lambda: _count(procs, sweep_id) >= 5, 60, "the new scheduler to queue trial 4")
    procs.scheduler()
    answer = finished(procs, sweep_id, 150)
    check_verdict(procs, store, answer, "random", TRIALS, out)
    # each trial's job ran once: one attempt each, none queued twice, none lost
    for t in answer["trials"]:
        assert len(store_jobs.attempts(store, t["job_id"])) == 1
