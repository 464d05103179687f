"""A run's name, tags, notes and star, edited in place on its page in real Chromium, then
found again by a query on the runs page (web/static/run_annotations.js, runs.js)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import Dashboard, wait_until
from tracker.store.runs import get_run

pytestmark = pytest.mark.browser

NOTES = "Warmup of 500 steps was too short:\nloss spikes at step 1k. Try 2k next."


def test_notes_tags_name_and_star_edited_in_place_then_found_by_a_query(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    run_id = dashboard.seeded.runs["adam-lr1e-3"]
    page.goto(f"{dashboard.url}/runs/{run_id}", timeout=60_000)  # plotly parses slowly on a busy CI
    page.wait_for_selector("#run-name:text-is('adam-lr1e-3')")

    # the name: pencil, type, Enter
    page.click("#rename-run")
    page.fill(".name-input", "adam lr1e-3 (warmup 500)")
    page.press(".name-input", "Enter")
    page.wait_for_selector("#run-name:text-is('adam lr1e-3 (warmup 500)')")
    assert page.is_hidden(".name-input")

    # tags: one added, a refused one shows the server's rule, the seeded one removed
    page.click("#add-tag")
    page.fill(".tag-input", "owner=ana")
    page.press(".tag-input", "Enter")
    page.wait_for_selector('#run-tags .tag[data-tag="owner=ana"]')
    page.click("#add-tag")
    page.fill(".tag-input", "mlflow.note.content=x")
    page.click("#tag-save")
    error = page.wait_for_selector("#tags-error:not([hidden])")
    assert "MLflow's own tags" in error.inner_text()
    page.press(".tag-input", "Escape")
    page.click('#run-tags .tag[data-tag="baseline"] .tag-remove')
    page.wait_for_selector('#run-tags .tag[data-tag="baseline"]', state="detached")

    # notes: a textarea; the saved text is shown as written (line breaks kept)
    page.click("#edit-notes")
    page.fill("#notes-input", NOTES)
    page.click("#notes-save")
    page.wait_for_selector("div#notes-text")
    assert page.inner_text("#notes-text") == NOTES
    # the star
    page.click("#star-run")
    page.wait_for_selector('#star-run[aria-pressed="true"]')

    stored = wait_until(lambda: get_run(dashboard.store, run_id), "the run read back")
    assert (stored.name, stored.tags, stored.notes, stored.starred) == (
        "adam lr1e-3 (warmup 500)",
        ["owner=ana"],
        NOTES,
        True,
    )
    page.click('.tab[data-tab="events"]')
    page.wait_for_selector("#events-table td:has-text('notes edited')")
    page.click('.tab[data-tab="charts"]')
    screenshot(page, "run-annotations")

    # the runs page: found by its notes, with its star and the start of its notes
    page.goto(f'{dashboard.url}/?q=notes ~ "spikes at step 1k" and starred', timeout=60_000)
    page.wait_for_selector(f'#runs-body tr[data-run-id="{run_id}"]')
    assert page.locator("#runs-body tr").count() == 1
    row = page.locator(f'#runs-body tr[data-run-id="{run_id}"]')
    assert row.locator(".star-toggle").get_attribute("aria-pressed") == "true"
    assert row.locator(".notes-preview").inner_text() == NOTES.split("\n")[0]
    screenshot(page, "runs-notes-query")
    # unstarred from the table, the query no longer finds it
    row.locator(".star-toggle").click()
    page.wait_for_selector(
        f'#runs-body tr[data-run-id="{run_id}"] .star-toggle[aria-pressed="false"]'
    )
    assert get_run(dashboard.store, run_id).starred is False
    page.click("#filter-form button[type=submit]")
    page.wait_for_selector("#runs-empty:not([hidden])")
