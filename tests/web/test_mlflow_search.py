"""MLflow's ``search_runs(filter_string=..., order_by=...)`` and experiments search, with the real
``mlflow`` client, against a live server of ours (SQLite file and PostgreSQL) and against MLflow's
own store (its SQLAlchemy store on a SQLite file, in this process): the same calls log the same
runs into both, and every filter and ordering must find the same runs in the same order.

Deliberate differences are listed in ``web/API.md`` ("MLflow compatibility"); none of them is
exercised here."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException

from tests.support.servers import ServerThread
from tracker.store import Store
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run, list_runs

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000  # ms

# (name, params, metrics, tags, status, parent name)
RUNS: list[tuple[str, dict[str, str], dict[str, float], dict[str, str], str, str | None]] = [
    ("r1", {"lr": "0.001", "optimizer": "adam", "optimizer.lr": "0.5", "batch size": "32"},
     {"loss": 0.4, "val-loss": 0.5, "acc": 0.9, "val.acc": 0.8}, {"team": "vision",
     "stage": "prod"}, "FINISHED", None),
    ("r2", {"lr": "0.01", "optimizer": "sgd"}, {"loss": 0.7, "acc": math.nan},
     {"team": "nlp"}, "FAILED", None),
    ("r3", {"lr": "0.1", "optimizer": "Adam"}, {"loss": 0.2}, {}, "RUNNING", "r1"),
    ("baseline-x", {}, {"loss": 1.5}, {"team": "Vision_2"}, "KILLED", None),
    ("r5", {"lr": "1e-05", "optimizer": "adam%"}, {}, {"note": ""}, "FINISHED", "r1"),
]  # fmt: skip

FILTERS = [
    "",
    "metrics.loss < 0.5",
    "metrics.loss >= 0.4",
    "metrics.loss = 0.7",
    "metrics.acc != 0.9",  # NaN is != everything; runs without acc do not match
    "metrics.`val-loss` < 1",
    'metrics."val.acc" > 0.5',
    "params.lr = '0.01'",
    "params.lr != '0.01'",
    "params.optimizer LIKE 'a%'",  # case-sensitive
    "params.optimizer ILIKE 'a%'",
    "params.optimizer LIKE '%\\%'",
    "params.optimizer LIKE 'a_am'",
    "params.`optimizer.lr` = '0.5'",
    "params.optimizer.lr = '0.5'",
    "params.`batch size` = '32'",
    "params.lr IS NULL",
    "params.lr IS NOT NULL",
    "tags.team = 'vision'",
    "tags.team != 'vision'",
    "tags.team ILIKE 'vision%'",
    "tags.team LIKE '%_2'",
    "tags.team IS NULL",
    "tags.note = ''",
    "tags.note IS NOT NULL",
    "tags.`mlflow.runName` = 'r1'",
    "tags.mlflow.parentRunId = '{r1}'",
    "tags.`mlflow.parentRunId` != '{r1}'",
    "attributes.status = 'FINISHED'",
    "status != 'RUNNING'",
    "attributes.status LIKE 'F%'",
    "attribute.status ILIKE '%ed'",
    "run_name = 'r1'",
    "attributes.run_name LIKE 'base%'",
    "run_name ILIKE 'R%'",
    "run_name != 'r1'",
    "run_id = '{r2}'",
    "run_id IN ('{r1}', '{r3}')",
    "attributes.run_id NOT IN ('{r1}')",
    "start_time > {t2}",
    "start_time <= {t2}",
    "attributes.start_time = {t2}",
    "end_time > 0",
    "metrics.loss > 0.3 AND params.optimizer = 'sgd'",
    "metrics.loss < 1 and tags.team != 'nlp' AND status = 'FINISHED'",
    "run_name = 'r2' AND",  # MLflow accepts a trailing AND
]

ORDERS = [
    ["metrics.loss ASC"],
    ["metrics.loss DESC"],
    ["metrics.acc DESC"],
    ["metrics.acc"],
    ["params.lr DESC"],
    ["params.optimizer"],
    ["tags.team ASC"],
    ["tags.team DESC", "run_name ASC"],
    ["attributes.run_name ASC"],
    ["run_name DESC"],
    ["start_time ASC"],
    ["attributes.end_time DESC"],
    ["status"],
    ["metrics.`val-loss` DESC"],
]

BAD_FILTERS = [
    "status IN ('FINISHED')",  # only run_id takes a list
    "metrics.loss = 'x'",
    "params.lr = 0.01",  # params compare with quoted strings
    "params.lr > '0.01'",
    "metrics.loss < 1 OR metrics.loss > 2",
    "foo.bar = '1'",
    "metrics.loss",
    "metrics.loss <",
    "attributes.color = 'red'",
    "metrics.loss IS NULL",
    "(metrics.loss < 1)",
]

BAD_ORDERS = [["metrics.loss UP"], ["foo.bar"], ["metrics.loss", "metrics.loss DESC"]]


def seed(client: MlflowClient) -> dict[str, str]:
    """Log RUNS through ``client``; the run ids by name."""
    experiment_id = client.create_experiment("search")
    ids: dict[str, str] = {}
    for i, (name, params, metrics, tags, status, parent) in enumerate(RUNS):
        run_tags = dict(tags)
        if parent is not None:
            run_tags["mlflow.parentRunId"] = ids[parent]
        run = client.create_run(
            experiment_id, start_time=T0 + 1000 * i, tags=run_tags, run_name=name
        )
        run_id = run.info.run_id
        client.log_batch(
            run_id,
            metrics=[Metric(k, v, T0 + 1000 * i, 1) for k, v in metrics.items()],
            params=[Param(k, v) for k, v in params.items()],
            tags=[RunTag(k, v) for k, v in tags.items()],
        )
        if status != "RUNNING":
            client.set_terminated(run_id, status, end_time=T0 + 1000 * i + 500)
        ids[name] = run_id
    ids["_experiment"] = experiment_id
    return ids


def fill(text: str, ids: dict[str, str]) -> str:
    return text.format(r1=ids["r1"], r2=ids["r2"], r3=ids["r3"], t2=T0 + 2000)


def names(client: MlflowClient, ids: dict[str, str], **kwargs: Any) -> list[str]:
    by_id = {v: k for k, v in ids.items() if k != "_experiment"}
    runs = client.search_runs([ids["_experiment"]], **kwargs)
    return [by_id[r.info.run_id] for r in runs]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[MlflowClient, dict[str, str]]:
    """MLflow's own tracking store (SQLAlchemy on a SQLite file) with RUNS logged into it."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    path = tmp_path_factory.mktemp("mlflow-reference") / "mlflow.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{path}")
    return client, seed(client)


@pytest.fixture
def ours(
    make_app: Callable[..., Flask], serve: Callable[[Flask], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[MlflowClient, dict[str, str], Store]]:  # fmt: skip
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_TOKEN", raising=False)
    app = make_app()
    client = MlflowClient(tracking_uri=serve(app).url)
    yield client, seed(client), app.extensions["tracker"].store


def test_filters_and_orderings_find_what_mlflow_finds(
    reference: tuple[MlflowClient, dict[str, str]],
    ours: tuple[MlflowClient, dict[str, str], Store],
) -> None:
    ref_client, ref_ids = reference
    client, ids, _ = ours
    mismatches = []
    for text in FILTERS:
        expected = names(ref_client, ref_ids, filter_string=fill(text, ref_ids))
        got = names(client, ids, filter_string=fill(text, ids))
        if got != expected:
            mismatches.append((text, expected, got))
    for order in ORDERS:
        expected = names(ref_client, ref_ids, order_by=order)
        got = names(client, ids, order_by=order)
        if got != expected:
            mismatches.append((order, expected, got))
    assert mismatches == []
    # the cases above are not vacuous: some filters find nothing, others everything
    assert names(client, ids, filter_string="params.optimizer LIKE 'a%'") == ["r5", "r1"]
    assert names(client, ids, filter_string=f"tags.mlflow.parentRunId = '{ids['r1']}'") == [
        "r5",
        "r3",
    ]


def test_bad_filters_are_refused_as_mlflow_refuses_them(
    reference: tuple[MlflowClient, dict[str, str]],
    ours: tuple[MlflowClient, dict[str, str], Store],
) -> None:
    ref_client, ref_ids = reference
    client, ids, _ = ours
    for text in BAD_FILTERS:
        with pytest.raises(MlflowException) as ref_error:
            ref_client.search_runs([ref_ids["_experiment"]], filter_string=text)
        assert ref_error.value.error_code == "INVALID_PARAMETER_VALUE", text
        with pytest.raises(MlflowException) as error:
            client.search_runs([ids["_experiment"]], filter_string=text)
        assert error.value.error_code == "INVALID_PARAMETER_VALUE", text
        assert "filter" in error.value.message.lower(), error.value.message
    for order in BAD_ORDERS:
        with pytest.raises(MlflowException) as ref_error:
            ref_client.search_runs([ref_ids["_experiment"]], order_by=order)
        with pytest.raises(MlflowException) as error:
            client.search_runs([ids["_experiment"]], order_by=order)
        assert error.value.error_code == "INVALID_PARAMETER_VALUE", order


def test_pages_are_stable_and_complete(
    reference: tuple[MlflowClient, dict[str, str]],
    ours: tuple[MlflowClient, dict[str, str], Store],
) -> None:
    client, ids, _ = ours
    for order in (None, ["metrics.loss ASC"], ["tags.team DESC"], ["params.lr"]):
        whole = names(client, ids, order_by=order)
        seen: list[str] = []
        token = None
        while True:
            page = client.search_runs(
                [ids["_experiment"]], order_by=order, max_results=2, page_token=token
            )
            by_id = {v: k for k, v in ids.items() if k != "_experiment"}
            seen.extend(by_id[r.info.run_id] for r in page)
            token = page.token
            if not token:
                break
        assert seen == whole and len(whole) == len(RUNS)


def test_experiments_default_and_created_run_tags(
    reference: tuple[MlflowClient, dict[str, str]],
    ours: tuple[MlflowClient, dict[str, str], Store],
) -> None:
    ref_client, _ = reference
    client, _, store = ours
    expected = sorted(e.name for e in ref_client.search_experiments())
    assert sorted(e.name for e in client.search_experiments()) == expected == ["Default", "search"]
    assert [
        e.experiment_id for e in client.search_experiments(filter_string="name = 'Default'")
    ] == ["0"]
    assert [e.name for e in client.search_experiments(filter_string="name LIKE 'def%'")] == [
        "Default"
    ]
    assert list_runs(store, project="default") == []  # listing it stored nothing
    # client.create_run sends user_id "unknown" and no mlflow.user tag: none is added
    for c in (ref_client, client):
        run = c.create_run("0", run_name="plain")
        got = c.get_run(run.info.run_id)
        assert got.data.tags == {"mlflow.runName": "plain"}
        assert got.info.user_id == "unknown"
    run = client.create_run("0", tags={"mlflow.user": "alice"})
    assert client.get_run(run.info.run_id).info.user_id == "alice"
    found = client.search_runs(["0"], filter_string="attributes.user_id = 'alice'")
    assert [r.info.run_id for r in found] == [run.info.run_id]


def test_dotted_params_are_columns_and_query_fields(
    ours: tuple[MlflowClient, dict[str, str], Store], make_app: Callable[..., Flask]
) -> None:
    """Item 4: dotted / spaced param names read as columns and match in the query language."""
    _, ids, store = ours
    app = make_app()
    web = app.test_client()
    listing = web.get("/api/v1/runs/columns").json
    config = listing["config"]
    assert "optimizer.lr" in config and "batch size" in config
    assert config.index("optimizer.lr") < config.index("_mlflow_tags.mlflow.parentRunId")
    response = web.get(
        "/api/v1/runs",
        query_string={"q": 'config.optimizer.lr == "0.5"', "config": "optimizer.lr,batch size"},
    )
    assert response.status_code == 200, response.json
    runs = response.json["runs"]
    assert [r["name"] for r in runs] == ["r1"]
    assert runs[0]["config"] == {"optimizer.lr": "0.5", "batch size": "32"}
    create_run(store, "search", "native", {"optimizer": {"lr": 0.5}}, [])  # nested, typed
    got = web.get("/api/v1/runs", query_string={"q": "config.optimizer.lr == 0.5",
                                                "config": "optimizer.lr"}).json  # fmt: skip
    # the nested number and the flat param string "0.5" (a numeric-looking param) both match
    assert [(r["name"], r["config"]) for r in got["runs"]] == [
        ("native", {"optimizer.lr": 0.5}),
        ("r1", {"optimizer.lr": "0.5"}),
    ]
    for query, expected in [
        ('config."batch size" == "32"', ["r1"]),
        ("config.lr < 0.01", ["r5", "r1"]),  # params "1e-05" and "0.001" are numbers
        ("config.lr >= 0.01", ["r3", "r2"]),
        ('params.optimizer like "a%"', ["r5", "r1"]),
        ('tags.team ilike "VISION%"', ["baseline-x", "r1"]),
        (f'tags.mlflow.parentRunId == "{ids["r1"]}"', ["r5", "r3"]),
        ('metrics."val-loss" < 1', ["r1"]),
        ("params.lr exists and not config.lr > 0.005", ["r5", "r1"]),
    ]:
        got = web.get("/api/v1/runs", query_string={"q": query}).json
        assert [r["name"] for r in got["runs"]] == expected, (query, got)


KEYS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="`"), min_size=1,
               max_size=12)  # fmt: skip
VALUES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="'"),
                 max_size=12)  # fmt: skip
CLAUSES = st.one_of(
    st.builds("metrics.`{}` {} {}".format, KEYS, st.sampled_from(["=", "!=", "<", ">="]),
              st.floats(-1e9, 1e9, allow_nan=False)),
    st.builds("{}.`{}` {} '{}'".format, st.sampled_from(["params", "tags"]), KEYS,
              st.sampled_from(["=", "!=", "LIKE", "ILIKE"]), VALUES),
    st.builds("{}.`{}` IS {}NULL".format, st.sampled_from(["params", "tags"]), KEYS,
              st.sampled_from(["", "NOT "])),
    st.builds("{} {} '{}'".format, st.sampled_from(["status", "run_name", "user_id"]),
              st.sampled_from(["=", "!=", "LIKE", "ILIKE"]), VALUES),
    st.builds("run_id IN ('{}')".format, VALUES),
    st.builds("{} {} {}".format, st.sampled_from(["start_time", "end_time"]),
              st.sampled_from(["=", "<", ">"]), st.integers(-(2**62), 2**62)),
)  # fmt: skip
ORDER_KEYS = st.builds("{}.`{}` {}".format, st.sampled_from(["metrics", "params", "tags"]), KEYS,
                       st.sampled_from(["ASC", "DESC", ""]))  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(CLAUSES, min_size=1, max_size=4), st.lists(ORDER_KEYS, max_size=2, unique=True))
def test_any_valid_filter_runs_on_the_database(
    app: Flask, clauses: list[str], order_by: list[str]
) -> None:
    """Whatever keys and values a valid filter holds, the database answers it (200), or the
    server refuses it as MLflow would (400 INVALID_PARAMETER_VALUE) -- never a 500."""
    store = app.extensions["tracker"].store
    if not list_runs(store, project="default"):  # runs whose values the SQL must read
        for config, tags in [({"a": "1", "b": {"c": 2}, "_mlflow_tags": {"mlflow.user": "u"}},
                              ["k=v", "plain"]), ({"a": [1, "x"], "d": None}, [])]:  # fmt: skip
            run = create_run(store, "default", "r", config, tags)
            log_metrics(store, run.id, 1, {"m": 0.5})
    body = {"experiment_ids": ["0"], "filter": " AND ".join(clauses), "order_by": order_by}
    response = app.test_client().post("/api/2.0/mlflow/runs/search", json=body)
    assert response.status_code in (200, 400), response.json
    if response.status_code == 400:
        assert response.json["error_code"] == "INVALID_PARAMETER_VALUE", response.json


@pytest.mark.parametrize(
    "query",
    [
        'params."\\u0000" == "x"',
        'tags."\\u0000" exists',
        'config."\\u0000" == "x"',
        'name like "\\u0000%"',
    ],
)
def test_nul_in_a_query_is_refused_or_answered(app: Flask, query: str) -> None:
    """PostgreSQL text cannot hold NUL: a query holding one is a 400, never a 500."""
    response = app.test_client().get("/api/v1/runs", query_string={"q": query})
    assert response.status_code in (200, 400), response.json
