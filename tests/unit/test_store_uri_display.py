"""How a store is shown to the user (issue 24, item 4): the password hidden, a SQLite path
shortened relative to the current directory where that stays readable, a run's page."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.rules.store_uri import redact, run_page, shown_path


@pytest.mark.parametrize(
    ("path", "cwd", "shown"),
    [
        ("/w/demo/.tracker/tracker.db", "/w/demo", ".tracker/tracker.db"),
        ("/w/demo/.tracker/tracker.db", "/w/demo/examples", "../.tracker/tracker.db"),
        ("/w/demo/.tracker/tracker.db", "/w/sib", "../demo/.tracker/tracker.db"),
        ("/w/demo/.tracker/tracker.db", "/w/demo/a/b", "../../.tracker/tracker.db"),
        # three folders up reads worse than the absolute path
        ("/w/demo/.tracker/tracker.db", "/w/demo/a/b/c", "/w/demo/.tracker/tracker.db"),
        ("/data/x.db", "/home/u/project", "/data/x.db"),
        ("/w/x.db", "/w/x.db", "/w/x.db"),  # nothing but climbing: absolute
        ("rel/x.db", "/w", "rel/x.db"),  # not absolute: as given
    ],
)
def test_shown_path(path: str, cwd: str, shown: str) -> None:
    assert shown_path(path, cwd) == shown


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("postgresql+psycopg://bob:hunter2@db:5432/tracker", "postgresql+psycopg://bob:***@db:5432/tracker"),
        ("postgresql+psycopg://bob@db/tracker", "postgresql+psycopg://bob@db/tracker"),
        ("postgresql+psycopg://bob:p@ss@db/t", "postgresql+psycopg://bob:***@db/t"),
        ("sqlite:////w/.tracker/tracker.db", "sqlite:////w/.tracker/tracker.db"),
        ("http://u:tok@host:5000", "http://u:***@host:5000"),
    ],
)  # fmt: skip
def test_redact(uri: str, shown: str) -> None:
    assert redact(uri) == shown


def _text(forbidden: str) -> st.SearchStrategy[str]:
    chars = st.characters(blacklist_characters=forbidden, blacklist_categories=("Cs",))
    return st.text(chars, min_size=1)


@settings(max_examples=300, deadline=None)
@given(user=_text("@:/"), password=_text("/"), host=_text("@/"))
def test_a_password_is_never_shown(user: str, password: str, host: str) -> None:
    shown = redact(f"postgresql+psycopg://{user}:{password}@{host}/db")
    assert shown == f"postgresql+psycopg://{user}:***@{host}/db"


def test_run_page_has_no_token() -> None:
    assert run_page("http://127.0.0.1:5000/", 12) == "http://127.0.0.1:5000/runs/12"
    assert run_page("http://127.0.0.1:5000", 3) == "http://127.0.0.1:5000/runs/3"
