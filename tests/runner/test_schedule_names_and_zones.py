"""Schedules: names are unique (store, CLI, dashboard API and the migration that brings old
databases there), and a bad time zone is ``invalid_timezone`` naming the zone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tracker.cli import main
from tracker.entities import JobSpec
from tracker.errors import Conflict
from tracker.rules.cron import CronError, TimezoneError, check_timezone, trigger_for
from tracker.store import Store
from tracker.store import schedules as store_schedules
from tracker.store.engine import upgrade

SPEC = JobSpec(argv=["python", "train.py"], project="nightly")


@pytest.mark.parametrize("zone", ["Mars/Olympus", "Europe/Berln", "utc+1", "", "../etc/passwd"])
def test_unknown_time_zones_are_invalid_timezone_not_invalid_cron(zone: str) -> None:
    with pytest.raises(TimezoneError) as caught:
        trigger_for("0 2 * * *", zone)
    assert caught.value.code == "invalid_timezone" and caught.value.field == "timezone"
    assert repr(zone) in caught.value.message and "IANA" in caught.value.message


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"])
def test_known_time_zones_pass(zone: str) -> None:
    assert check_timezone(zone) == zone
    trigger_for("0 2 * * *", zone)


def test_a_bad_cron_is_still_invalid_cron() -> None:
    with pytest.raises(CronError) as caught:
        trigger_for("0 25 * * *", "UTC")
    assert caught.value.code == "invalid_cron" and caught.value.field == "cron"


def test_store_refuses_a_bad_zone_and_keeps_nothing(store: Store) -> None:
    with pytest.raises(TimezoneError, match="'Mars/Olympus'"):
        store_schedules.add_schedule(store, "0 2 * * *", SPEC, timezone="Mars/Olympus")
    assert store_schedules.list_schedules(store) == []


def test_duplicate_schedule_names_are_refused(store: Store) -> None:
    first = store_schedules.add_schedule(store, "0 2 * * *", SPEC, name="nightly", timezone="UTC")
    with pytest.raises(Conflict) as caught:
        store_schedules.add_schedule(store, "0 3 * * *", SPEC, name="nightly", timezone="UTC")
    assert caught.value.field == "name"
    assert "'nightly' already exists" in caught.value.message
    assert f"schedule {first.id}" in caught.value.message
    assert [s.name for s in store_schedules.list_schedules(store)] == ["nightly"]
    # the name is free again once its schedule is deleted
    store_schedules.delete_schedule(store, first.id)
    store_schedules.add_schedule(store, "0 3 * * *", SPEC, name="nightly", timezone="UTC")


def test_default_names_are_made_unique(store: Store) -> None:
    names = [
        store_schedules.add_schedule(store, "0 2 * * *", SPEC, timezone="UTC").name
        for _ in range(3)
    ]
    assert names == ["train.py 0 2 * * *", "train.py 0 2 * * * (2)", "train.py 0 2 * * * (3)"]


def test_the_database_refuses_duplicates_whoever_writes(store: Store) -> None:
    """The unique constraint, not only the check in add_schedule, keeps names apart."""
    store_schedules.add_schedule(store, "0 2 * * *", SPEC, name="x", timezone="UTC")
    with pytest.raises(sa.exc.IntegrityError), store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO schedules (name, cron, timezone, spec, paused, created_at) "
                "VALUES ('x', '* * * * *', 'UTC', '{}', false, 0)"
            )
        )


def test_upgrade_renames_existing_duplicates(empty_store_url: str) -> None:
    engine = sa.create_engine(empty_store_url)
    upgrade(engine, "0004_auth")
    with engine.begin() as conn:
        for name in ["a", "a", "b", "a"]:
            conn.execute(
                sa.text(
                    "INSERT INTO schedules (name, cron, timezone, spec, paused, created_at) "
                    "VALUES (:n, '0 2 * * *', 'UTC', '{}', false, 0)"
                ),
                {"n": name},
            )
    engine.dispose()
    store = Store(empty_store_url)  # upgrades to the head
    assert [s.name for s in store_schedules.list_schedules(store)] == [
        "a", "a (schedule 2)", "b", "a (schedule 4)",
    ]  # fmt: skip
    store.close()


def _cli(store_url: str, *args: str):
    return CliRunner().invoke(main, list(args), env={"TRACKER_URI": store_url})


def test_cli_schedule_add_errors(store_url: str, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    first = _cli(store_url, "schedule", "add", "0 2 * * *", "train.py", "--schedule-name",
                 "nightly", "--timezone", "UTC", "--json")  # fmt: skip
    assert first.exit_code == 0, first.output
    again = _cli(store_url, "schedule", "add", "0 3 * * *", "train.py", "--schedule-name",
                 "nightly", "--timezone", "UTC")  # fmt: skip
    assert again.exit_code == 2
    assert "error [conflict]" in again.output and "'nightly' already exists" in again.output
    zone = _cli(store_url, "schedule", "add", "0 2 * * *", "train.py", "--timezone", "Mars/Base")
    assert zone.exit_code == 2
    assert "error [invalid_timezone]" in zone.output and "'Mars/Base'" in zone.output
    listed = json.loads(_cli(store_url, "schedule", "ls", "--json").output)
    assert [s["name"] for s in listed] == ["nightly"]


def test_api_schedule_errors(store_url: str, tmp_path: Path) -> None:
    from tracker.store import queue
    from tracker.web.app import create_app

    app = create_app({"STORE_URI": store_url, "TESTING": True, "NO_AUTH": True})
    store = app.extensions["tracker"].store
    job = queue.enqueue(store, JobSpec(argv=["python", "train.py"], cwd=str(tmp_path)))
    client = app.test_client()
    body = {"job_id": job.id, "cron": "0 2 * * *", "timezone": "UTC", "name": "n"}
    assert client.post("/api/v1/schedules", json=body).status_code == 201
    dup = client.post("/api/v1/schedules", json=body)
    assert dup.status_code == 409 and dup.json["error"]["field"] == "name"
    zone = client.post("/api/v1/schedules", json={**body, "name": "m", "timezone": "Nowhere/X"})
    assert zone.status_code == 400
    assert zone.json["error"]["code"] == "invalid_timezone"
    assert zone.json["error"]["field"] == "timezone"
    store.close()
