"""Deleting and restoring a run from the dashboard in a real browser, signed in as the real
users are (a token through the sign-in form, a session cookie, the same-origin JSON POST the
security guard requires): the confirmation, the deleted banner, the runs table hiding the
run and the "only deleted" toggle showing it, and a read-only session refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import WAIT_MS
from tests.support.chromium import NO_CHROMIUM_REASON, chromium_path
from tests.support.servers import ServerThread
from tests.support.web import TOKEN
from tracker.store import Store
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run, finish_run, get_run
from tracker.store.tokens import create_token
from tracker.web.app import create_app

pytestmark = [pytest.mark.slow, pytest.mark.browser]


class Site:
    def __init__(self, url: str, store: Store, runs: dict[str, int], log_token: str) -> None:
        self.url, self.store, self.runs, self.log_token = url, store, runs, log_token


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM_REASON)
    store_url = f"sqlite:///{tmp_path_factory.mktemp('delete') / 'tracker.db'}"
    store = Store(store_url)
    runs = {}
    for name in ("keep-me", "delete-me", "cancel-me"):
        run = create_run(store, "lifecycle", name, {"lr": 0.1})
        log_metrics(store, run.id, 0, {"loss": 1.0})
        finish_run(store, run.id, "finished")
        runs[name] = run.id
    log_token = create_token(store, "log", "read-only")[1]
    app = create_app({"STORE_URI": store_url, "TOKEN": TOKEN})
    server = ServerThread(app)
    yield Site(server.url, store, runs, log_token)
    server.stop()
    app.extensions["tracker"].store.close()
    store.close()


def sign_in(page: Any, site: Site, token: str) -> None:
    page.goto(f"{site.url}/login")
    page.fill('input[name="token"]', token)
    page.locator('form button[type="submit"], form input[type="submit"]').first.click()
    page.wait_for_url(f"{site.url}/")


def table_ids(page: Any) -> list[int]:
    return [int(x) for x in page.eval_on_selector_all(
        "#runs-table tbody tr[data-run-id]", "rows => rows.map(r => r.dataset.runId)")]  # fmt: skip


def wait_for_rows(page: Any, ids: list[int]) -> None:
    page.wait_for_function(
        "ids => JSON.stringify([...document.querySelectorAll('#runs-table tbody tr[data-run-id]')]"
        ".map(r => Number(r.dataset.runId)).sort((a, b) => a - b)) === JSON.stringify(ids)",
        arg=sorted(ids),
        timeout=WAIT_MS,
    )


def test_delete_and_restore_from_the_run_page(page: Any, site: Site, screenshot: Any) -> None:
    run_id, keep = site.runs["delete-me"], site.runs["keep-me"]
    sign_in(page, site, TOKEN)
    page.goto(f"{site.url}/runs/{run_id}")
    page.wait_for_selector("#run-status .badge.status-finished")
    assert page.locator("#restore-run").is_hidden() and page.locator("#run-deleted").is_hidden()

    dialogs: list[str] = []

    def accept(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    page.click("#delete-run")
    page.wait_for_selector("#run-deleted:not([hidden])")
    assert "Delete run delete-me?" in dialogs[0]
    assert "deleted" in page.inner_text("#run-deleted")
    assert page.locator("#restore-run").is_visible() and page.locator("#delete-run").is_hidden()
    assert get_run(site.store, run_id).deleted_at is not None
    screenshot(page, "run-deleted")

    page.goto(f"{site.url}/")
    wait_for_rows(page, [keep, site.runs["cancel-me"]])
    page.check("#deleted-toggle")
    wait_for_rows(page, [run_id])
    assert page.locator(f'tr[data-run-id="{run_id}"] .tag.deleted').is_visible()
    assert "deleted=1" in page.url
    screenshot(page, "runs-deleted-only")

    page.goto(f"{site.url}/runs/{run_id}")
    page.click("#restore-run")  # no confirmation: restoring loses nothing
    page.wait_for_selector("#run-deleted", state="hidden")
    assert page.locator("#delete-run").is_visible()
    assert get_run(site.store, run_id).deleted_at is None
    page.goto(f"{site.url}/")
    wait_for_rows(page, [keep, run_id, site.runs["cancel-me"]])


def test_dismissing_the_confirmation_deletes_nothing(page: Any, site: Site) -> None:
    run_id = site.runs["cancel-me"]
    sign_in(page, site, TOKEN)
    page.goto(f"{site.url}/runs/{run_id}")
    page.wait_for_selector("#run-status .badge.status-finished")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("#delete-run")
    page.wait_for_timeout(300)  # nothing is sent; give a wrong request time to land
    assert get_run(site.store, run_id).deleted_at is None
    assert page.locator("#run-deleted").is_hidden()


def test_a_read_only_session_cannot_delete(page: Any, site: Site) -> None:
    run_id = site.runs["keep-me"]
    sign_in(page, site, site.log_token)
    page.goto(f"{site.url}/runs/{run_id}")
    page.wait_for_selector("#run-status .badge.status-finished")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#delete-run")
    page.wait_for_selector("#toast:not([hidden])")
    assert "'admin' scope" in page.inner_text("#toast")
    assert get_run(site.store, run_id).deleted_at is None
    assert page.locator("#run-deleted").is_hidden()
