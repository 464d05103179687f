"""Cron schedules: crontab semantics, fire times with the clock passed in, exactly-once fires."""

from __future__ import annotations

import calendar
import datetime as dt
import threading

import pytest
import sqlalchemy as sa

from tracker.entities import JobSpec
from tracker.rules.cron import CronError, crontab_weekday, latest_fire_time, trigger_for
from tracker.runner.distributed import wrap_argv
from tracker.store import Store
from tracker.store import jobs as store_jobs
from tracker.store import models as m
from tracker.store import schedules as store_schedules
from tracker.store.runs import get_run


def ts(*args: int) -> float:
    return float(calendar.timegm(dt.datetime(*args).timetuple()))


@pytest.mark.parametrize(
    ("field", "expected"),
    [("0", "sun"), ("7", "sun"), ("1-5", "mon,tue,wed,thu,fri"), ("*/2", "sun,tue,thu,sat"),
     ("6,0", "sun,sat"), ("mon-fri", "mon-fri"), ("*", "sun,mon,tue,wed,thu,fri,sat")],
)  # fmt: skip
def test_crontab_weekdays_count_from_sunday(field: str, expected: str) -> None:
    assert crontab_weekday(field) == expected


def test_latest_fire_time_is_a_pure_function_of_now() -> None:
    nightly = trigger_for("0 2 * * *", "UTC")
    created = ts(2025, 1, 1, 12, 0, 0)
    assert latest_fire_time(nightly, created, ts(2025, 1, 2, 1, 59, 59)) is None
    assert latest_fire_time(nightly, created, ts(2025, 1, 2, 2, 0, 0)) == ts(2025, 1, 2, 2)
    # missed fires are coalesced into the latest one
    assert latest_fire_time(nightly, created, ts(2025, 1, 9, 3)) == ts(2025, 1, 9, 2)
    sundays = trigger_for("30 6 * * 0", "UTC")  # 2025-01-05 is a Sunday
    assert latest_fire_time(sundays, created, ts(2025, 1, 6)) == ts(2025, 1, 5, 6, 30)
    every_2s = trigger_for("*/2 * * * * *", "UTC")
    assert latest_fire_time(every_2s, ts(2025, 1, 1), ts(2025, 1, 1, 0, 0, 5)) == ts(
        2025, 1, 1, 0, 0, 4
    )
    later = latest_fire_time(every_2s, ts(2024, 1, 1), ts(2025, 1, 1, 0, 0, 1))
    assert later == ts(2025, 1, 1)


@pytest.mark.parametrize("cron", ["* * *", "61 * * * *", "0 2 * * 9", "a b c d e"])
def test_bad_cron_expressions_are_refused(cron: str) -> None:
    with pytest.raises(CronError):
        trigger_for(cron)


def test_schedule_add_list_pause_resume_delete(store: Store) -> None:
    now = ts(2025, 1, 1, 12)
    spec = JobSpec(argv=["python", "train.py"], config={"lr": 3e-4}, project="nightly")
    info = store_schedules.add_schedule(store, "0 2 * * *", spec, timezone="UTC", now=now)
    assert info.next_fire_at == ts(2025, 1, 2, 2) and info.name == "train.py 0 2 * * *"
    assert store_schedules.set_paused(store, info.id, True, now=now).next_fire_at is None
    assert store_schedules.fire_due(store, now=ts(2025, 1, 2, 3)) == []  # paused
    resumed = store_schedules.set_paused(store, info.id, False, now=ts(2025, 1, 2, 3))
    assert resumed.next_fire_at == ts(2025, 1, 3, 2)  # the fire missed while paused is skipped
    fired = store_schedules.fire_due(store, now=ts(2025, 1, 3, 2, 0, 30))
    assert [(s, f) for s, f, _ in fired] == [(info.id, ts(2025, 1, 3, 2))]
    job = store_jobs.get_job(store, fired[0][2])
    assert (job.schedule_id, job.config, job.project) == (info.id, {"lr": 3e-4}, "nightly")
    assert get_run(store, job.run_id).name.startswith("train.py 0 2 * * *@")
    store_schedules.delete_schedule(store, info.id)
    assert store_schedules.list_schedules(store) == []
    assert store_jobs.get_job(store, job.id).schedule_id is None  # the job stays


def test_two_schedulers_enqueue_exactly_one_job_per_fire_time(store_url: str) -> None:
    setup = Store(store_url)
    start = ts(2025, 3, 1, 0, 0, 0)
    info = store_schedules.add_schedule(
        setup, "* * * * *", JobSpec(argv=["python", "x.py"]), timezone="UTC", now=start
    )
    ticks = [start + 7.5 * i for i in range(1, 81)]  # 10 simulated minutes, 8 ticks each
    barrier = threading.Barrier(2)
    won: list[list[tuple[int, float, int]]] = [[], []]
    errors: list[BaseException] = []

    def scheduler(n: int) -> None:
        own = Store(store_url)
        try:
            for now in ticks:
                barrier.wait(30)  # both fire at the same simulated instant
                won[n].extend(store_schedules.fire_due(own, now=now))
        except BaseException as exc:  # surfaced below
            errors.append(exc)
            barrier.abort()
        finally:
            own.close()

    threads = [threading.Thread(target=scheduler, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    fire_times = sorted(f for ws in won for _, f, _ in ws)
    assert fire_times == [start + 60 * k for k in range(1, 11)]  # each minute once, none twice
    with setup.engine.connect() as conn:
        fires = conn.execute(sa.select(m.ScheduleFireRow.fire_at, m.ScheduleFireRow.job_id)).all()
        jobs = conn.execute(sa.select(m.JobRow.id).where(m.JobRow.schedule_id == info.id)).all()
    assert len(fires) == len(jobs) == 10
    assert {j for _, j in fires} == {j for (j,) in jobs}


@pytest.mark.parametrize(
    ("argv", "expected_tail"),
    [
        (["/venv/bin/python", "train.py", "--lr", "1"], ["train.py", "--lr", "1"]),
        (["python3", "-m", "pkg.train", "x"], ["-m", "pkg.train", "x"]),
        (["python", "-u", "train.py"], ["--no-python", "python", "-u", "train.py"]),
        (["./train.sh", "a"], ["--no-python", "./train.sh", "a"]),
    ],
)
def test_distributed_jobs_are_launched_through_torchrun(
    argv: list[str], expected_tail: list[str]
) -> None:
    wrapped = wrap_argv(argv, 2, python="/py")
    head = wrapped[: len(wrapped) - len(expected_tail)]
    assert head[1:] == ["-m", "torch.distributed.run", "--nproc-per-node=2", "--standalone"]
    assert head[0] == (argv[0] if "python" in argv[0] else "/py")
    assert wrapped[len(head) :] == expected_tail
    assert wrap_argv(argv, None) == argv
