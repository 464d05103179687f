"""The runs table grouped in a real browser: 50 runs of a sweep (10 learning rates x 5
seeds) grouped by ``config.lr`` show 10 group rows of 5 runs with the mean (and min–max) of
each metric column; a group row expands to its runs, two of them are selected and compared;
the "Group by" control writes ``group=`` into the URL."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.browser import Dashboard, sweep_dashboard
from tests.support.workspace_seed import LRS
from tracker.store.metrics import last_metrics

pytestmark = [pytest.mark.slow, pytest.mark.browser]

GROUPS = "#runs-body tr.group-row"
VIEW = (
    "/?project=sweep&group=config.lr&sort=config.lr&order=asc"
    "&config=lr,seed&metrics=val/acc,val/loss"
)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """The dashboard on a store holding a 10 x 5 sweep (and nothing else)."""
    db = tmp_path_factory.mktemp("groups") / "tracker.db"
    with sweep_dashboard(db, lrs=LRS[:10], seeds=5, steps=60) as dashboard:
        yield dashboard


def wait_groups(page: Any, n: int) -> None:
    """Bounded wait until the table shows ``n`` group rows."""
    page.wait_for_function(
        "([sel, n]) => document.querySelectorAll(sel).length === n", arg=[GROUPS, n]
    )


def group_rows(page: Any) -> list[dict[str, Any]]:
    return page.eval_on_selector_all(
        GROUPS,
        """rows => rows.map(r => ({
            label: r.dataset.group, size: Number(r.dataset.size), text: r.innerText,
            means: [...r.querySelectorAll('td.group-metric-cell')].map(
                td => Number(td.dataset.mean))}))""",
    )


def test_fifty_runs_grouped_by_lr_expand_select_and_compare(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    page.goto(dashboard.url + VIEW)
    wait_groups(page, 10)
    rows = group_rows(page)
    assert [r["label"] for r in rows] == [f"lr={lr:g}" for lr in sorted(LRS[:10])]
    assert all(r["size"] == 5 for r in rows)
    assert all("5 runs" in r["text"] and "5 finished" in r["text"] for r in rows)
    assert page.locator("#page-info").inner_text() == "10 groups of 50 runs"
    # each mean is the mean of the 5 seeds' last values (from the store, not the page)
    last = last_metrics(dashboard.store, list(dashboard.seeded.runs.values()))
    for lr, row in zip(sorted(LRS[:10]), rows, strict=True):
        ids = [dashboard.seeded.runs[f"lr{lr:g}-s{s}"] for s in range(5)]
        for i, key in enumerate(("val/acc", "val/loss")):
            expected = statistics.fmean(last[run_id][key] for run_id in ids)
            assert row["means"][i] == pytest.approx(expected, rel=1e-9), (lr, key)
    assert page.locator(f"{GROUPS} .group-range").first.inner_text().count("–") == 1

    # expand lr=0.01: its 5 runs appear under it, with checkboxes
    label = "lr=0.01"
    page.click(f'{GROUPS}[data-group="{label}"] button.group-toggle')
    members = page.locator(f'#runs-body tr[data-member-of="{label}"]')
    members.nth(4).wait_for()
    assert members.count() == 5
    ids = [int(members.nth(i).get_attribute("data-run-id")) for i in range(5)]
    assert sorted(ids) == sorted(dashboard.seeded.runs[f"lr0.01-s{s}"] for s in range(5))
    chosen = ids[:2]
    compare = page.locator("#compare-btn")
    for i, run_id in enumerate(chosen):
        assert compare.is_disabled() == (i < 2)
        page.check(f'tr[data-run-id="{run_id}"] input[type=checkbox]')
    assert compare.is_enabled()
    assert parse_qs(urlsplit(page.url).query)["group"] == ["config.lr"]
    screenshot(page, "runs-grouped")
    compare.click()
    page.wait_for_url("**/compare?runs=*")
    assert parse_qs(urlsplit(page.url).query)["runs"] == [",".join(map(str, sorted(chosen)))]


def test_the_group_by_control_writes_the_url_and_a_bad_key_says_why(
    page: Any, dashboard: Dashboard
) -> None:
    page.goto(f"{dashboard.url}/?project=sweep")
    page.wait_for_selector("#runs-body tr[data-run-id]")
    page.fill("#group-input", "tag.opt")
    page.click("#filter-form button[type=submit]")
    wait_groups(page, 2)
    # newest first (the default sort): the newest run (seed 4) is opt=adam, so its group leads
    assert [(r["label"], r["size"]) for r in group_rows(page)] == [
        ("opt=adam", 30),
        ("opt=sgd", 20),
    ]
    assert parse_qs(urlsplit(page.url).query)["group"] == ["tag.opt"]
    page.fill("#group-input", "lr")
    page.click("#filter-form button[type=submit]")
    error = page.locator("#query-error")
    error.wait_for()
    assert "config.<key>" in error.inner_text()
    assert "invalid" in (page.get_attribute("#group-input", "class") or "")
    page.fill("#group-input", "")
    page.click("#filter-form button[type=submit]")
    wait_groups(page, 0)
    page.wait_for_selector("#runs-body tr[data-run-id]")
    assert "group" not in parse_qs(urlsplit(page.url).query)
