"""The queue page's lists from the API: schedule times as ISO 8601 with the offset of the
schedule's own time zone, and the config keys that differ between the jobs (and schedules)
listed, by the compare view's rule (``tracker.rules.config_diff``)."""

from __future__ import annotations

import datetime as dt

from flask.testing import FlaskClient

from tracker.entities import JobSpec
from tracker.store import Store, queue
from tracker.store import schedules as store_schedules

# 2036-12-04 04:30 UTC: the next "0 6 * * *" in Berlin (UTC+1 in December) is 05:00 UTC.
# Years ahead of the real clock: a schedule whose fire time has passed is fired (and moved on
# to the next day) by the app's housekeeping, which reads the real clock.
NOW = dt.datetime(2036, 12, 4, 4, 30, tzinfo=dt.UTC).timestamp()


def job(store: Store, config: dict[str, object]) -> int:
    return queue.enqueue(store, JobSpec(["python", "train.py"], "digits", config=config)).id


def test_schedule_times_carry_their_zone(client: FlaskClient, store: Store) -> None:
    spec = JobSpec(["python", "train.py"], "digits")
    store_schedules.add_schedule(store, "0 6 * * *", spec, timezone="Europe/Berlin", now=NOW)
    store_schedules.add_schedule(store, "0 5 * * *", spec, name="utc", now=NOW)
    berlin, utc = sorted(client.get("/api/v1/schedules").json["schedules"], key=lambda s: s["id"])
    assert berlin["next_fire"] == "2036-12-04T06:00:00+01:00"
    assert berlin["created"] == "2036-12-04T05:30:00+01:00" and berlin["last_fire"] is None
    assert utc["next_fire"] == "2036-12-04T05:00:00+00:00"
    for schedule in (berlin, utc):  # the same instant as the seconds
        parsed = dt.datetime.fromisoformat(schedule["next_fire"])
        assert parsed.timestamp() == schedule["next_fire_at"]
    paused = client.patch(f"/api/v1/schedules/{utc['id']}", json={"paused": True}).json
    assert paused["next_fire"] is None


def test_jobs_list_names_the_config_keys_that_differ(client: FlaskClient, store: Store) -> None:
    job(store, {"lr": 0.1, "model": {"width": 64, "depth": 4}, "seed": 1})
    job(store, {"lr": 0.01, "model": {"width": 64, "depth": 8}, "seed": 1})
    job(store, {"lr": 0.1, "model": {"width": 64, "depth": 4}, "seed": 1, "ema": True})
    doc = client.get("/api/v1/jobs").json
    assert doc["differing_config_keys"] == ["ema", "lr", "model.depth"]
    one = client.get("/api/v1/jobs?limit=1").json
    assert one["differing_config_keys"] == []  # a single job differs from nothing
    assert client.get("/api/v1/jobs?status=running").json["differing_config_keys"] == []


def test_equal_settings_do_not_differ(client: FlaskClient, store: Store) -> None:
    job(store, {"lr": 1, "flag": True})
    job(store, {"lr": 1.0, "flag": True})  # 1 == 1.0: the same setting (config_diff's rule)
    job(store, {"lr": 1, "flag": 1})  # a flag and a count are different settings
    assert client.get("/api/v1/jobs").json["differing_config_keys"] == ["flag"]
