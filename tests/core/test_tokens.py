"""Access tokens, sessions and the installation secret in the store, and ``tracker token``:
a token is shown once and stored only as its sha256; revoking ends it and its sessions;
sessions expire and sign out; the installation secret is random and made once.
SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import re
import threading

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tracker.cli import main
from tracker.entities import Failure, JobSpec
from tracker.errors import InvalidInput, NotFound
from tracker.store import Store, queue
from tracker.store import tokens as t


@pytest.fixture
def store(store_url: str) -> Store:
    store = Store(store_url)
    yield store
    store.close()


def _all_text(store: Store) -> str:
    with store.engine.connect() as conn:
        rows = [conn.execute(sa.text(f"SELECT * FROM {table}")).all()
                for table in ("tokens", "auth_sessions", "installation_secrets")]  # fmt: skip
    return repr(rows)


def test_a_token_is_random_shown_once_and_stored_only_as_its_hash(store: Store) -> None:
    info, secret = t.create_token(store, "log", "trainer-1", now=100.0)
    assert re.fullmatch(r"trk_[A-Za-z0-9_-]{43}", secret)  # 256 random bits
    assert (info.name, info.scope, info.created_at, info.revoked_at) == ("trainer-1", "log",
                                                                        100.0, None)  # fmt: skip
    stored = _all_text(store)
    assert secret not in stored and secret[4:] not in stored
    assert hashlib.sha256(secret.encode()).hexdigest() in stored
    other = t.create_token(store, "admin")
    assert other[1] != secret and other[0].name == f"token-{other[0].id}"


def test_verify_answers_the_scope_and_notes_the_last_use(store: Store) -> None:
    _, secret = t.create_token(store, "admin", now=100.0)
    assert t.verify_token(store, secret, now=200.0).scope == "admin"
    assert t.list_tokens(store)[0].last_used_at == 200.0
    t.verify_token(store, secret, now=230.0)  # within a minute: no write
    assert t.list_tokens(store)[0].last_used_at == 200.0
    t.verify_token(store, secret, now=261.0)
    assert t.list_tokens(store)[0].last_used_at == 261.0
    for wrong in ("", "trk_", secret + "x", secret[:-1], "not-a-token", secret.upper()):
        assert t.verify_token(store, wrong) is None


def test_revoking_ends_the_token_and_its_sessions(store: Store) -> None:
    info, secret = t.create_token(store, "log")
    sid = t.create_session(store, "log", lifetime_s=3600, token_id=info.id)
    assert t.get_session(store, sid) is not None
    revoked = t.revoke_token(store, info.id, now=500.0)
    assert revoked.revoked_at == 500.0
    assert t.verify_token(store, secret) is None
    assert t.get_session(store, sid) is None
    assert t.revoke_token(store, info.id, now=900.0).revoked_at == 500.0  # first time kept
    assert t.list_tokens(store, include_revoked=False) == []
    assert [x.id for x in t.list_tokens(store)] == [info.id]
    with pytest.raises(NotFound):
        t.revoke_token(store, 424242)


def test_bad_scope_or_name_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInput, match="'log' for training hosts"):
        t.create_token(store, "root")
    with pytest.raises(InvalidInput, match="200 characters"):
        t.create_token(store, "log", "x" * 201)
    with pytest.raises(InvalidInput, match="exactly one token"):
        t.create_session(store, "admin", lifetime_s=1)


def test_sessions_are_random_expire_and_sign_out(store: Store) -> None:
    info, _ = t.create_token(store, "admin")
    ids = {t.create_session(store, "admin", lifetime_s=60, token_id=info.id, now=1000.0)
           for _ in range(5)}  # fmt: skip
    assert len(ids) == 5 and all(len(i) == 43 for i in ids)
    sid = ids.pop()
    assert sid not in _all_text(store)  # only its hash is stored
    live = t.get_session(store, sid, now=1059.0)
    assert live is not None and (live.scope, live.token_id) == ("admin", info.id)
    assert t.get_session(store, sid, now=1060.0) is None  # expired
    other = ids.pop()
    assert t.revoke_session(store, other) is True
    assert t.get_session(store, other, now=1001.0) is None
    assert t.revoke_session(store, other) is False
    configured = t.create_session(store, "admin", lifetime_s=60, configured_mark="m" * 64)
    assert t.get_session(store, configured).configured_mark == "m" * 64
    t.create_session(store, "log", lifetime_s=60, token_id=info.id, now=1000.0 + 86_400 + 61)
    with store.engine.connect() as conn:  # rows expired over a day ago were cleaned up
        left = conn.execute(sa.text("SELECT count(*) FROM auth_sessions")).scalar_one()
    assert left == 2  # the configured one and the new one


def test_the_installation_secret_is_random_made_once_and_shared(store_url: str) -> None:
    first = Store(store_url)
    found: list[str] = []
    threads = [threading.Thread(target=lambda: found.append(t.installation_secret(first)))
               for _ in range(4)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(found)) == 1 and re.fullmatch(r"[0-9a-f]{64}", found[0])
    second = Store(store_url)  # another process, a restart: the same secret
    assert t.installation_secret(second) == found[0]
    first.close()
    second.close()


def test_token_cli_creates_lists_and_revokes(store_url: str) -> None:
    runner = CliRunner()
    made = runner.invoke(main, ["token", "create", "--scope", "log", "--name", "gpu-host-3",
                                "--uri", store_url])  # fmt: skip
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip()
    assert secret.startswith("trk_") and "shown only now" in made.stderr
    as_json = runner.invoke(main, ["token", "create", "--scope", "admin", "--json",
                                   "--uri", store_url])  # fmt: skip
    admin = json.loads(as_json.stdout)
    assert admin["scope"] == "admin" and admin["token"].startswith("trk_")
    listed = runner.invoke(main, ["token", "ls", "--uri", store_url])
    assert "gpu-host-3" in listed.stdout and "log" in listed.stdout
    assert secret not in listed.stdout and admin["token"] not in listed.stdout
    revoked = runner.invoke(main, ["token", "revoke", "1", "--uri", store_url])
    assert revoked.exit_code == 0 and "token 1 (gpu-host-3) revoked" in revoked.stdout
    store = Store(store_url)
    assert t.verify_token(store, secret) is None
    assert t.verify_token(store, admin["token"]).scope == "admin"
    store.close()
    assert "gpu-host-3" not in runner.invoke(main, ["token", "ls", "--uri", store_url]).stdout
    assert "gpu-host-3" in runner.invoke(main, ["token", "ls", "--all", "--uri", store_url]).stdout
    bad = runner.invoke(main, ["token", "create", "--scope", "root", "--uri", store_url])
    assert bad.exit_code == 2 and "'root' is not one of" in bad.output
    missing = runner.invoke(main, ["token", "revoke", "99", "--uri", store_url])
    assert missing.exit_code == 2 and "token 99 does not exist" in missing.output


def _at_once(failure_cls: str, attempt: int, max_retries: int, now: float, **_: bool) -> float:
    return now  # a retry rule: run again at once


def _claimed(store: Store, worker: str) -> queue.ClaimedJob:
    claimed = queue.claim(store, worker, lease_s=30.0)
    assert claimed is not None
    return claimed[0]


def _live(store: Store, job_id: int) -> list[bool]:
    return [x.revoked_at is None for x in t.list_tokens(store) if x.job_id == job_id]


def test_a_job_token_ends_in_the_transaction_that_ends_its_attempt(store: Store) -> None:
    """However the attempt ends (its worker records it, the reaper finds its lease expired,
    the cluster scheduler never took it), its token is revoked in the same write: no reader
    sees an ended attempt with a live token, and a rerun under the same attempt number
    does not bring an old token back to life."""
    job = queue.enqueue(store, JobSpec(argv=["python", "-c", "pass"]))
    claim = _claimed(store, "w1")
    token = t.create_job_token(store, claim.run_id, job.id, claim.attempt)[1]
    assert t.verify_token(store, token) is not None and _live(store, job.id) == [True]
    # Not started after all: queued again with the same attempt number.
    queue.release(store, claim, reason="the scheduler did not answer", not_before=0.0)
    assert _live(store, job.id) == [False]
    again = _claimed(store, "w2")
    assert again.attempt == claim.attempt
    assert t.verify_token(store, token) is None  # the old one stays dead
    second = t.create_job_token(store, again.run_id, job.id, again.attempt)[1]
    assert t.verify_token(store, second) is not None
    # Its worker records the end (retry queued): revoked with it.
    queue.finish(store, again, exit_code=1, failure=Failure("crashed", "boom"), retry=_at_once)
    assert _live(store, job.id) == [False, False] and t.verify_token(store, second) is None
    # The reaper ends the next attempt (its worker died): revoked with it.
    third_claim = _claimed(store, "w3")
    third = t.create_job_token(store, third_claim.run_id, job.id, third_claim.attempt)[1]
    assert _live(store, job.id) == [False, False, True]
    reaped = queue.reap_expired_leases(store, now=store.now() + 3_600)
    assert [job_id for job_id, _ in reaped] == [job.id]
    assert _live(store, job.id) == [False, False, False] and t.verify_token(store, third) is None
    # A success (written by the queue's prewritten fast path): revoked with it.
    ok = queue.enqueue(store, JobSpec(argv=["python", "-c", "pass"]))
    ok_claim = _claimed(store, "w4")
    ok_token = t.create_job_token(store, ok_claim.run_id, ok.id, ok_claim.attempt)[1]
    assert queue.finish(store, ok_claim, exit_code=0, failure=None) is not None
    assert _live(store, ok.id) == [False] and t.verify_token(store, ok_token) is None
