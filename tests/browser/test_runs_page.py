"""The runs table in a real browser: seeded runs, query filter (and its error), sort by a
metric column, columns remembered in the URL, select runs -> compare."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.browser import Dashboard
from tracker.store.metrics import last_metrics
from tracker.store.runs import list_runs

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROWS = "#runs-body tr"
QUERY = 'config.optimizer == "adam" and metrics.val/acc > 0.9 and status != failed'


def row_ids(page: Any) -> list[int]:
    return [
        int(v) for v in page.eval_on_selector_all(ROWS, "rows => rows.map(r => r.dataset.runId)")
    ]


def wait_rows(page: Any, expected: list[int]) -> None:
    """Bounded wait until the table shows exactly ``expected`` (in order)."""
    page.wait_for_function(
        "ids => JSON.stringify([...document.querySelectorAll('#runs-body tr')]"
        ".map(r => Number(r.dataset.runId))) === JSON.stringify(ids)",
        arg=expected,
    )


def all_runs(dashboard: Dashboard) -> list[Any]:
    return list_runs(dashboard.store, limit=1000)


def val_acc(dashboard: Dashboard) -> dict[int, float]:
    runs = all_runs(dashboard)
    last = last_metrics(dashboard.store, [r.id for r in runs])
    return {r.id: last[r.id]["val/acc"] for r in runs if "val/acc" in last.get(r.id, {})}


def test_runs_table_lists_seeded_runs_with_badges_and_chosen_columns(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/?config=optimizer,lr,model.width&metrics=val/acc,train/loss")
    newest_first = sorted((r.id for r in all_runs(dashboard)), reverse=True)
    wait_rows(page, newest_first)
    headers = page.locator("#runs-head th").all_inner_texts()
    assert [h.strip(" ▲▼") for h in headers[-5:]] == [
        "optimizer", "lr", "model.width", "val/acc", "train/loss",
    ]  # fmt: skip
    oom = dashboard.seeded.runs["sgd-wide-oom"]
    badge = page.locator(f'#runs-body tr[data-run-id="{oom}"] .badge')
    assert badge.inner_text() == "failed · cuda_oom"
    assert "CUDA out of memory" in (badge.get_attribute("title") or "")
    statuses = set(page.eval_on_selector_all(ROWS, "rows => rows.map(r => r.dataset.status)"))
    assert statuses == {"queued", "running", "finished", "failed", "crashed", "killed"}
    diverged = page.locator(f'tr[data-run-id="{dashboard.seeded.runs["adam-lr1e-1-diverged"]}"]')
    assert diverged.locator("td.col-metric").last.inner_text() == "+Inf"  # last train/loss
    count = len(newest_first)
    assert page.locator("#page-info").inner_text() == f"1–{count} of {count} runs"
    screenshot(page, "runs")


def test_filter_with_a_query_and_show_the_position_of_an_error(
    page: Any, dashboard: Dashboard
) -> None:
    page.goto(f"{dashboard.url}/?config=optimizer&metrics=val/acc")
    page.wait_for_selector(ROWS)
    acc = val_acc(dashboard)
    expected = sorted(
        (
            r.id
            for r in all_runs(dashboard)
            if r.config.get("optimizer") == "adam" and acc.get(r.id, -math.inf) > 0.9
            and r.status != "failed"
        ),
        reverse=True,
    )  # fmt: skip
    assert 0 < len(expected) < len(all_runs(dashboard))
    page.fill("#query-input", QUERY)
    page.click("#filter-form button[type=submit]")
    wait_rows(page, expected)
    assert parse_qs(urlsplit(page.url).query)["q"] == [QUERY]  # remembered in the URL
    assert page.locator("#query-error").is_hidden()

    page.fill("#query-input", "config.lr >> 0.1")
    page.click("#filter-form button[type=submit]")
    error = page.locator("#query-error")
    error.wait_for(state="visible")
    assert "position 11" in error.inner_text()
    assert error.locator("pre.caret").inner_text().endswith(" " * 11 + "^")
    assert row_ids(page) == expected  # the last good result stays on screen


def test_sort_by_a_metric_column_on_the_server(page: Any, dashboard: Dashboard) -> None:
    page.goto(f"{dashboard.url}/?config=lr&metrics=val/acc")
    page.wait_for_selector(ROWS)
    acc = val_acc(dashboard)
    lacking = sorted((r.id for r in all_runs(dashboard) if r.id not in acc), reverse=True)
    by_acc_desc = sorted(acc, key=lambda rid: (-acc[rid], -rid))
    page.click('button.sort[data-sort="metrics.val/acc"]')
    wait_rows(page, by_acc_desc + lacking)  # missing values sort last
    assert page.locator('th[aria-sort="descending"]').inner_text().startswith("val/acc")
    page.click('button.sort[data-sort="metrics.val/acc"]')
    wait_rows(page, sorted(acc, key=lambda rid: (acc[rid], rid)) + lacking[::-1])
    query = parse_qs(urlsplit(page.url).query)
    assert (query["sort"], query["order"]) == (["metrics.val/acc"], ["asc"])


def test_pagination_is_done_by_the_server(page: Any, dashboard: Dashboard) -> None:
    newest_first = sorted((r.id for r in all_runs(dashboard)), reverse=True)
    page.goto(f"{dashboard.url}/?limit=4&config=&metrics=")
    wait_rows(page, newest_first[:4])
    page.click("#next-page")
    wait_rows(page, newest_first[4:8])
    assert parse_qs(urlsplit(page.url).query)["offset"] == ["4"]
    page.go_back()
    wait_rows(page, newest_first[:4])


def test_project_picker_and_selecting_runs_to_compare(page: Any, dashboard: Dashboard) -> None:
    page.goto(f"{dashboard.url}/")
    page.wait_for_selector(ROWS)
    page.select_option("#project-select", "cifar")
    wait_rows(page, [dashboard.seeded.runs["cifar-resnet18"]])
    page.select_option("#project-select", "")
    chosen = [dashboard.seeded.runs[n] for n in ("adam-lr3e-4", "adam-lr1e-3", "sgd-lr1e-2")]
    page.wait_for_selector(f'tr[data-run-id="{chosen[0]}"]')
    compare = page.locator("#compare-btn")
    for i, run_id in enumerate(chosen):
        assert compare.is_disabled() == (i < 2)
        page.check(f'tr[data-run-id="{run_id}"] input[type=checkbox]')
    assert compare.is_enabled()
    compare.click()
    page.wait_for_url("**/compare?runs=*")
    assert parse_qs(urlsplit(page.url).query)["runs"] == [",".join(map(str, sorted(chosen)))]
