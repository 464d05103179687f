"""Access tokens, dashboard sessions and the installation secret: who may do what.

Tokens. ``create_token`` makes a random token (``trk_`` + 256 random bits, URL-safe) and
returns it once; the store keeps only its sha256. A plain, fast, unkeyed hash is enough
here: the token is 256 random bits, so nobody can guess one from its hash, however fast
they hash (a slow or keyed hash defends *human-chosen* secrets against dictionaries;
these are not human-chosen). It also makes the lookup one indexed equality on the hash.
Each token has a scope: ``log`` (create runs, log, read) or ``admin`` (everything,
including launching, cancelling, scheduling and deleting). ``verify_token`` answers the
token's row or None (unknown or revoked); revoking also ends the token's sessions.

Sessions. A dashboard sign-in is a row keyed by the sha256 of a random session id; the
cookie carries only that id (signed with the installation secret). Signing out revokes
the row, so the old cookie stops working at once; sessions expire after their lifetime
and rows long expired are deleted when new ones are made. A session made with the token
configured at start (not stored) carries ``configured_mark`` instead of a token id: the
dashboard compares it with its own mark, so changing that token ends those sessions.

Installation secret. ``installation_secret`` returns a random key generated once per
store (first caller wins, safely under concurrency) and kept in it, never derived from a
token: knowing or guessing a token tells nothing about it. Whoever can read the store can
read it -- and could change anything anyway; the store is the trust boundary.

Failure modes: ``InvalidInput`` for a bad scope or name, ``NotFound`` for an unknown token
id, ``StoreUnavailable`` when the database cannot be reached.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.entities import SessionInfo, TokenInfo
from tracker.errors import InvalidInput, NotFound
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.rows import dialect_insert

if TYPE_CHECKING:
    from tracker.store.store import Store

__all__ = [
    "SCOPES",
    "SESSION_KEY",
    "TOKEN_PREFIX",
    "create_job_token",
    "create_session",
    "create_token",
    "get_session",
    "installation_secret",
    "list_tokens",
    "revoke_attempt_tokens",
    "revoke_session",
    "revoke_token",
    "token_digest",
    "verify_token",
]

SCOPES = ("log", "admin")
TOKEN_PREFIX = "trk_"  # lets secret scanners and people recognise a tracker token
SESSION_KEY = "session-signing-key"
LAST_USED_EVERY_S = 60.0  # ``last_used_at`` is refreshed at most this often per token
_EXPIRED_KEPT_S = 86_400.0  # expired session rows are deleted a day after they expire


def token_digest(token: str) -> str:
    """The sha256 (hex) the store keeps for a token or a session id."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _token_info(row: Any) -> TokenInfo:
    return TokenInfo(
        row.id, row.name, row.scope, row.created_at, row.revoked_at, row.last_used_at,
        row.run_id, row.job_id, row.attempt,
    )  # fmt: skip


def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise InvalidInput(
            f"scope {scope!r} is not one of {', '.join(SCOPES)}: 'log' for training hosts "
            "(create runs, log, read), 'admin' for launching, cancelling and deleting",
            field="scope",
        )


# ------------------------------------------------------------------------ tokens


def create_token(
    store: Store, scope: str, name: str | None = None, *, now: float | None = None
) -> tuple[TokenInfo, str]:
    """Make a random token with ``scope``; returns its row and the token (shown only now).

    Raises:
        InvalidInput: ``scope`` is not ``log`` or ``admin``, or ``name`` is over 200
            characters.
        StoreUnavailable: the database cannot be reached.
    """
    _check_scope(scope)
    if name is not None and len(name) > 200:
        raise InvalidInput("a token name has at most 200 characters", field="name")
    now = time.time() if now is None else now
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with write_begin(store.engine) as conn:
        token_id = conn.execute(
            sa.insert(m.TokenRow)
            .values(name=name or "", scope=scope, sha256=token_digest(token), created_at=now)
            .returning(m.TokenRow.id)
        ).scalar_one()
        if not name:
            conn.execute(
                sa.update(m.TokenRow)
                .where(m.TokenRow.id == token_id)
                .values(name=f"token-{token_id}")
            )
        row = conn.execute(sa.select(m.TokenRow).where(m.TokenRow.id == token_id)).one()
    return _token_info(row), token


def create_job_token(
    store: Store, run_id: int, job_id: int, attempt: int, *, now: float | None = None
) -> tuple[TokenInfo, str]:
    """A job's own token (``log`` scope) for one attempt: it may touch run ``run_id`` only
    (the dashboard's guard, ``tracker.web.plumbing.security``), and only while that attempt
    of the job is running (:func:`verify_token`); it is revoked with the attempt's end
    (:func:`revoke_attempt_tokens`). Returns its row and the token.

    Raises StoreUnavailable.
    """
    now = time.time() if now is None else now
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with write_begin(store.engine) as conn:
        token_id = conn.execute(
            sa.insert(m.TokenRow)
            .values(
                name=f"job-{job_id}-attempt-{attempt}", scope="log",
                sha256=token_digest(token), created_at=now,
                run_id=run_id, job_id=job_id, attempt=attempt,
            )
            .returning(m.TokenRow.id)
        ).scalar_one()  # fmt: skip
        row = conn.execute(sa.select(m.TokenRow).where(m.TokenRow.id == token_id)).one()
    return _token_info(row), token


def revoke_attempt_tokens(conn: sa.Connection, job_id: int, attempt: int, now: float) -> int:
    """Revoke the tokens of an attempt of a job, in the caller's transaction: the one that
    ends the attempt (``tracker.store.queue``), so nobody ever reads an ended attempt with
    a live token, whoever ended it (its worker, the reaper, a scheduler that never took
    it). Returns how many were live."""
    t = m.TokenRow
    return int(
        conn.execute(
            sa.update(t)
            .where(t.job_id == job_id, t.attempt == attempt, t.revoked_at.is_(None))
            .values(revoked_at=now)
        ).rowcount
    )


def verify_token(store: Store, token: str, *, now: float | None = None) -> TokenInfo | None:
    """The stored, unrevoked token ``token`` is, or None. Notes when it was last used
    (at most once a minute, so a training host logging every second costs no writes).
    A job's token is valid only while its attempt of the job is running (a worker that
    died without revoking it leaves nothing usable once the reaper ends the attempt).

    Raises:
        StoreUnavailable: the database cannot be reached.
    """
    if not token.startswith(TOKEN_PREFIX):
        return None
    now = time.time() if now is None else now
    digest = token_digest(token)
    with read_conn(store.engine) as conn:
        row = conn.execute(
            sa.select(m.TokenRow).where(
                m.TokenRow.sha256 == digest, m.TokenRow.revoked_at.is_(None)
            )
        ).first()
        if row is not None and row.job_id is not None:
            live = conn.execute(
                sa.select(m.JobRow.id).where(
                    m.JobRow.id == row.job_id,
                    m.JobRow.status == "running",
                    m.JobRow.attempt == row.attempt,
                )
            ).first()
            if live is None:
                return None
    if row is None:
        return None
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_EVERY_S:
        with write_begin(store.engine) as conn:
            conn.execute(
                sa.update(m.TokenRow).where(m.TokenRow.id == row.id).values(last_used_at=now)
            )
    return _token_info(row)


def revoke_token(store: Store, token_id: int, *, now: float | None = None) -> TokenInfo:
    """Revoke a token and end every session signed in with it; revoking twice keeps the
    first time.

    Raises:
        NotFound: no token has this id.
        StoreUnavailable: the database cannot be reached.
    """
    now = time.time() if now is None else now
    with write_begin(store.engine) as conn:
        row = conn.execute(sa.select(m.TokenRow).where(m.TokenRow.id == token_id)).first()
        if row is None:
            raise NotFound(f"token {token_id} does not exist", field="token")
        conn.execute(
            sa.update(m.TokenRow)
            .where(m.TokenRow.id == token_id, m.TokenRow.revoked_at.is_(None))
            .values(revoked_at=now)
        )
        conn.execute(
            sa.update(m.AuthSessionRow)
            .where(m.AuthSessionRow.token_id == token_id, m.AuthSessionRow.revoked_at.is_(None))
            .values(revoked_at=now)
        )
        row = conn.execute(sa.select(m.TokenRow).where(m.TokenRow.id == token_id)).one()
    return _token_info(row)


def list_tokens(store: Store, *, include_revoked: bool = True) -> list[TokenInfo]:
    """Every token, oldest first (revoked ones too unless ``include_revoked`` is False)."""
    query = sa.select(m.TokenRow).order_by(m.TokenRow.id)
    if not include_revoked:
        query = query.where(m.TokenRow.revoked_at.is_(None))
    with read_conn(store.engine) as conn:
        return [_token_info(row) for row in conn.execute(query)]


# ---------------------------------------------------------------------- sessions


def create_session(
    store: Store,
    scope: str,
    *,
    lifetime_s: float,
    token_id: int | None = None,
    configured_mark: str | None = None,
    now: float | None = None,
) -> str:
    """Start a sign-in; returns the random session id for the cookie (256 bits). Deletes
    sessions that expired over a day ago, so the table stays small.

    Raises:
        InvalidInput: bad scope, or neither or both of ``token_id`` and ``configured_mark``.
        StoreUnavailable: the database cannot be reached.
    """
    _check_scope(scope)
    if (token_id is None) == (configured_mark is None):
        raise InvalidInput("a session belongs to exactly one token", field="token")
    now = time.time() if now is None else now
    session_id = secrets.token_urlsafe(32)
    with write_begin(store.engine) as conn:
        conn.execute(
            sa.delete(m.AuthSessionRow).where(m.AuthSessionRow.expires_at < now - _EXPIRED_KEPT_S)
        )
        conn.execute(
            sa.insert(m.AuthSessionRow).values(
                id=token_digest(session_id),
                token_id=token_id,
                configured_mark=configured_mark,
                scope=scope,
                created_at=now,
                expires_at=now + lifetime_s,
            )
        )
    return session_id


def get_session(store: Store, session_id: str, *, now: float | None = None) -> SessionInfo | None:
    """The live session ``session_id`` names, or None: unknown, signed out, expired, or its
    token revoked.

    Raises:
        StoreUnavailable: the database cannot be reached.
    """
    now = time.time() if now is None else now
    s, t = m.AuthSessionRow, m.TokenRow
    query = (
        sa.select(s.scope, s.token_id, s.configured_mark, s.created_at, s.expires_at)
        .select_from(s)
        .outerjoin(t, t.id == s.token_id)
        .where(s.id == token_digest(session_id), s.revoked_at.is_(None), s.expires_at > now)
        .where(sa.or_(s.token_id.is_(None), t.revoked_at.is_(None)))
    )
    with read_conn(store.engine) as conn:
        row = conn.execute(query).first()
    if row is None:
        return None
    return SessionInfo(row.scope, row.token_id, row.configured_mark, row.created_at, row.expires_at)


def revoke_session(store: Store, session_id: str, *, now: float | None = None) -> bool:
    """End a sign-in; False when there was no live session with this id.

    Raises:
        StoreUnavailable: the database cannot be reached.
    """
    now = time.time() if now is None else now
    s = m.AuthSessionRow
    with write_begin(store.engine) as conn:
        done = conn.execute(
            sa.update(s)
            .where(s.id == token_digest(session_id), s.revoked_at.is_(None))
            .values(revoked_at=now)
        ).rowcount
    return bool(done)


# ---------------------------------------------------------------- installation


def installation_secret(store: Store, name: str = SESSION_KEY, *, now: float | None = None) -> str:
    """The random secret ``name`` of this store (256 bits, hex), made on first use.

    Several processes starting at once agree: the first insert wins, the others read it.

    Raises:
        StoreUnavailable: the database cannot be reached.
    """
    query = sa.select(m.InstallationSecretRow.value).where(m.InstallationSecretRow.name == name)
    with read_conn(store.engine) as conn:
        found = conn.execute(query).scalar()
    if found is not None:
        return str(found)
    now = time.time() if now is None else now
    with write_begin(store.engine) as conn:
        insert = dialect_insert(conn)(m.InstallationSecretRow).values(
            name=name, value=secrets.token_hex(32), created_at=now
        )
        conn.execute(insert.on_conflict_do_nothing(index_elements=["name"]))
        return str(conn.execute(query).scalar_one())
