"""The store URL grammar (tracker.rules.store_uri): table-driven, no I/O."""

from __future__ import annotations

import pytest

from tracker.errors import InvalidInput
from tracker.rules.store_uri import normalize, sqlite_path


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("sqlite:///rel/x.db", "sqlite:///rel/x.db"),
        ("sqlite:////abs/x.db", "sqlite:////abs/x.db"),
        ("sqlite://", "sqlite://"),
        ("sqlite:///:memory:", "sqlite:///:memory:"),
        ("sqlite+pysqlite:///x.db", "sqlite+pysqlite:///x.db"),
        ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql+psycopg://u:p@h:5432/db?sslmode=require",
         "postgresql+psycopg://u:p@h:5432/db?sslmode=require"),
        ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
    ],
)  # fmt: skip
def test_accepted(uri: str, expected: str) -> None:
    assert normalize(uri) == expected


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("sqlite:/data/x.db", "e.g. sqlite:////data/x.db"),
        ("sqlite:x.db", "e.g. sqlite:///x.db"),
        ("sqlite://host/x.db", "four slashes"),
        ("postgresql+psycopg:nothing", "postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB"),
        ("mysql://u@h/db", "is not supported"),
        ("tracker.db", "is not supported"),
    ],
)
def test_refused(uri: str, says: str) -> None:
    with pytest.raises(InvalidInput) as err:
        normalize(uri)
    assert says in err.value.message and repr(uri) in err.value.message
    assert err.value.field == "TRACKER_URI"


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("sqlite:///rel/x.db", "rel/x.db"),
        ("sqlite:////abs/x.db", "/abs/x.db"),
        ("sqlite:///x.db?timeout=5", "x.db"),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("postgresql+psycopg://u@h/db", None),
    ],
)
def test_sqlite_path(uri: str, path: str | None) -> None:
    assert sqlite_path(uri) == path
