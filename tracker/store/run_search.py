"""Runs search: the query language (``tracker.rules.query``) compiled to SQL, for the
dashboard's runs table and ``tracker runs ls --filter``; and the columns the table can show.

* ``config.a.b`` reads the runs' JSON config: ``json_extract``/``json_type`` on SQLite,
  ``#>``/``#>>``/``jsonb_typeof`` on PostgreSQL. A comparison only matches values of the
  compared kind: ``config.lr > 0.001`` never matches a string or a missing key.
* ``metrics.name`` is the run's last value of that metric (``metric_summaries``); a NaN or
  missing metric matches no comparison.
* ``a != v`` is ``not (a == v)``; every condition is two-valued, so ``not`` includes the
  runs that lack the key.
* ``~`` is a case-insensitive substring match; ``contains`` tests list membership;
  ``created`` takes unix seconds or an ISO date (naive dates are server-local time;
  ``created == 2024-05-01`` means that whole day); ``duration`` is seconds.

Sorting works on every attribute, ``config.<key>`` and ``metrics.<name>`` (missing values
last, ties by id, newest first). Pagination and the total count are done by the database;
only the requested config and metric columns come back (the full config of 10,000 runs
never leaves the database).

Reads raise StoreUnavailable (503) when the database cannot be reached
(``tracker.store.engine.read_conn``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from tracker.entities import RUN_STATUSES, run_duration
from tracker.errors import InvalidInput
from tracker.rules.annotations import NOTE_TAG
from tracker.rules.config import flatten
from tracker.rules.mlflow_filter import OrderKey
from tracker.rules.query import (
    And,
    Compare,
    Field,
    Node,
    Not,
    Or,
    fields_used,
    format_query,
    parse_query,
)
from tracker.store import models as m
from tracker.store.engine import read_conn
from tracker.store.runs import deleted_filter, run_select, tag_filter
from tracker.store.search_values import (
    ConfigValue,
    JsonPath,
    like,
    tag_value_exists,
    user_tag_value,
)
from tracker.store.store import Store

__all__ = [
    "MAX_LIMIT",
    "SORT_ATTRIBUTES",
    "DiagnosisChip",
    "RunHit",
    "RunPage",
    "RunSearch",
    "run_columns",
    "search_run_ids",
    "search_runs",
]

MAX_LIMIT = 500
_DURATION = sa.func.coalesce(m.RunRow.ended_at, m.RunRow.heartbeat_at) - m.RunRow.started_at
_STARTED = sa.func.coalesce(m.RunRow.started_at, m.RunRow.created_at)
_TIMES = {"created": m.RunRow.created_at, "started": _STARTED, "ended": m.RunRow.ended_at}
SYSTEM_TAGS_KEY = "_mlflow_tags"  # MLflow's own mlflow.* tags (tracker.web.core.mlflow_compat)
RUN_NAME_TAG = "mlflow.runName"
SORT_ATTRIBUTES: dict[str, Any] = {
    "id": m.RunRow.id,
    "name": m.RunRow.name,
    "status": m.RunRow.status,
    "project": m.ProjectRow.name,
    "host": m.RunRow.host,
    "created": m.RunRow.created_at,
    "started": _STARTED,
    "ended": m.RunRow.ended_at,
    "duration": _DURATION,
    "deleted": m.RunRow.deleted_at,
    "starred": m.RunRow.starred,
}
_STRING_ATTRS = {"status": m.RunRow.status, "name": m.RunRow.name, "host": m.RunRow.host,
                 "project": m.ProjectRow.name, "notes": m.RunRow.notes}  # fmt: skip
NOTES_PREVIEW = 300  # characters of a run's notes in a search hit (the run has them all)
_ORDER = {"<": "__lt__", "<=": "__le__", ">": "__gt__", ">=": "__ge__", "==": "__eq__"}


@dataclass(frozen=True)
class RunSearch:
    """One page request: runs matching ``query`` and every filter given (``project`` and
    ``status`` exactly, each of ``tags``). ``sort``: an attribute, ``config.<key>`` or
    ``metrics.<name>``."""

    query: str = ""
    project: str | None = None
    status: str | None = None
    tags: tuple[str, ...] = ()
    sort: str = "created"
    order: str = "desc"
    limit: int = 50
    offset: int = 0
    config_columns: tuple[str, ...] = ()
    metric_columns: tuple[str, ...] = ()
    # soft-deleted runs: False hides them (the default), True shows only them, None both;
    # a query naming ``deleted`` (``deleted == true``) decides by itself
    deleted: bool | None = False
    # a parsed condition ANDed with ``query`` (MLflow's filter, tracker.rules.mlflow_filter)
    where: Node | None = None
    # sort keys ahead of ``sort`` (MLflow's order_by); missing values last either way
    order_by: tuple[OrderKey, ...] = ()
    projects: tuple[str, ...] = ()  # any of these projects (besides ``project``)


@dataclass(frozen=True)
class DiagnosisChip:
    """One health code of a run as the runs table shows it: of that code's diagnoses (one per
    metric), the most severe one with the earliest onset: its severity, step and message."""

    code: str
    severity: str  # "error" or "warning"
    step: int | None
    metric: str | None
    message: str
    count: int = 1  # diagnoses of this code (metrics)


@dataclass(frozen=True)
class RunHit:
    id: int
    project: str
    name: str
    status: str
    tags: list[str]
    created_at: float
    started_at: float | None
    ended_at: float | None
    heartbeat_at: float | None
    host: str | None
    exit_code: int | None
    failure_class: str | None
    failure_hint: str | None
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    diagnoses: list[str] = field(default_factory=list)  # health codes, by onset step
    health: list[DiagnosisChip] = field(default_factory=list)  # the same codes, with detail
    deleted_at: float | None = None
    starred: bool = False
    # the first NOTES_PREVIEW characters of its notes; notes_truncated when there are more
    notes_preview: str | None = None
    notes_truncated: bool = False

    @property
    def duration(self) -> float | None:
        return run_duration(self.started_at, self.ended_at, self.heartbeat_at)


@dataclass(frozen=True)
class RunPage:
    runs: list[RunHit]
    total: int
    query: str


# ------------------------------------------------------------------ translation


class _Translator:
    def __init__(self, dialect: str, key_ids: dict[str, int]) -> None:
        self.dialect = dialect
        self.key_ids = key_ids

    def node(self, node: Node, negate: bool = False) -> Any:
        """The WHERE condition of ``node`` (of ``not node`` when ``negate``).

        Negations are pushed down to the comparisons (De Morgan), so a chain of ``not``
        adds no nesting to the SQL: SQLite's parser overflows its stack at about 30 nested
        groups. A comparison that is unknown (a missing key) counts as false under ``not``.
        """
        if isinstance(node, And | Or):
            items = [self.node(n, negate) for n in node.items]
            return sa.or_(*items) if isinstance(node, And) == negate else sa.and_(*items)
        if isinstance(node, Not):
            return self.node(node.item, not negate)
        expr = self.compare(node)
        return sa.not_(sa.func.coalesce(expr, sa.false(), type_=sa.Boolean)) if negate else expr

    def compare(self, c: Compare) -> Any:
        if c.op == "in":
            values = c.value if isinstance(c.value, tuple) else (c.value,)
            if not values:
                return sa.false()
            return sa.or_(*(self.compare(Compare(c.field, "==", v)) for v in values))
        if c.op == "!=":
            inner = self.compare(Compare(c.field, "==", c.value))
            return sa.not_(sa.func.coalesce(inner, sa.false()))
        kind = c.field.kind
        if kind == "config":
            value = ConfigValue(self.dialect, c.field.path)
            return value.any(lambda j: self.config(j, c))
        if kind == "metrics":
            return self.metric(c)
        if kind == "param":
            return self.param(c)
        if kind == "tag":
            return self.tag(c)
        return self.attribute(c)

    def config(self, j: Any, c: Compare) -> Any:
        value, op = c.value, c.op
        if op == "exists":
            return j.type.is_not(None)
        if op == "contains":
            return j.contains(value)
        if value is None:
            if op != "==":
                raise _order_error(c)
            return j.is_null()
        if isinstance(value, bool):
            if op != "==":
                raise _order_error(c)
            return j.boolean(value)
        if isinstance(value, int | float):
            guard, expr = j.number()
            return sa.and_(guard, getattr(expr, _ORDER[op])(value))
        return sa.and_(j.is_string(), self.text(j.text, op, str(value)))

    def text(self, expr: Any, op: str, value: str) -> Any:
        """A string comparison: ==, <..., ~ (substring), like, ilike."""
        if op == "~":
            return expr.icontains(value, autoescape=True)
        if op in ("like", "ilike"):
            return like(self.dialect, expr, value, case_sensitive=op == "like")
        return getattr(expr, _ORDER[op])(value)

    def param(self, c: Compare) -> Any:
        """An MLflow param: the config value as text. Strings compare as they are; ``==``
        also finds a number or boolean a native run logged (``"0.01"`` = 0.01, ``"True"``)."""
        value = ConfigValue(self.dialect, c.field.name.split("."))
        if c.op == "exists":
            return value.any(lambda j: j.type.is_not(None))
        text = str(c.value)
        found = value.any(lambda j: sa.and_(j.is_string(), self.text(j.text, c.op, text)))
        if c.op != "==":
            return found
        alternatives = [found]
        number = _plain_number(text)
        if number is not None:
            alternatives.append(
                value.any(
                    lambda j: sa.and_(
                        j.type.in_(_NUMBER_TYPES[self.dialect]), j.number()[1] == number
                    )
                )
            )
        if text in ("True", "False"):
            alternatives.append(value.any(lambda j: j.boolean(text == "True")))
        return sa.or_(*alternatives)

    def tag(self, c: Compare) -> Any:
        """An MLflow tag: the run's name, an ``mlflow.*`` tag kept in the config, or the value
        of a ``key=value`` run tag."""
        key, op = c.field.name, c.op
        if key == RUN_NAME_TAG:
            return sa.true() if op == "exists" else self.text(m.RunRow.name, op, str(c.value))
        if key == NOTE_TAG:  # MLflow's note is the run's notes
            notes = m.RunRow.notes
            exists = notes.is_not(None)
            return exists if op == "exists" else sa.and_(exists, self.text(notes, op, str(c.value)))
        if key.startswith("mlflow."):
            j = JsonPath(self.dialect, [SYSTEM_TAGS_KEY, key])
            if op == "exists":
                return j.type.is_not(None)
            return sa.and_(j.is_string(), self.text(j.text, op, str(c.value)))
        if op == "exists":
            return tag_value_exists(self.dialect, key, lambda v: sa.true())
        return tag_value_exists(self.dialect, key, lambda v: self.text(v, op, str(c.value)))

    def metric(self, c: Compare) -> Any:
        key_id = self.key_ids.get(c.field.name, -1)
        rows = sa.select(m.MetricSummaryRow.run_id).where(
            m.MetricSummaryRow.run_id == m.RunRow.id, m.MetricSummaryRow.key_id == key_id
        )
        if c.op == "exists":
            return rows.exists()
        value = (
            sa.select(m.MetricSummaryRow.last_value)
            .where(m.MetricSummaryRow.run_id == m.RunRow.id, m.MetricSummaryRow.key_id == key_id)
            .scalar_subquery()
        )
        if isinstance(c.value, float) and math.isnan(c.value):  # NaN is stored as NULL
            return rows.where(m.MetricSummaryRow.last_value.is_(None)).exists()
        return sa.and_(value.is_not(None), getattr(value, _ORDER[c.op])(c.value))

    def attribute(self, c: Compare) -> Any:
        name, value, op = c.field.name, c.value, c.op
        if name == "tags":
            return tag_filter(self.dialect, str(value))
        if name == "diagnosis":  # stored by the doctor (tracker.store.diagnoses)
            found = sa.select(m.RunEventRow.id).where(
                m.RunEventRow.run_id == m.RunRow.id, m.RunEventRow.kind == "diagnosis"
            )
            if value is None:
                return ~found.exists()
            return found.where(m.RunEventRow.code == str(value)).exists()
        if name in _STRING_ATTRS:
            col = _STRING_ATTRS[name]
            if value is None:
                return col.is_(None)
            return self.text(col, op, str(value))
        if name == "id":
            return m.RunRow.id == _as_int(value, "id")
        if name == "deleted":
            return deleted_filter(bool(value))
        if name == "starred":
            return m.RunRow.starred == bool(value)
        if name == "duration":
            return sa.and_(_DURATION.is_not(None), getattr(_DURATION, _ORDER[op])(value))
        return _time(name, op, value)


_NUMBER_TYPES = {"postgresql": ("number",), "sqlite": ("integer", "real")}


_PLAIN_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _plain_number(text: str) -> float | None:
    """The number a param string spells (``"0.01"``), if it is a plain finite decimal."""
    if len(text) > 40 or not _PLAIN_NUMBER.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


def _order_error(c: Compare) -> InvalidInput:
    return InvalidInput(
        f"'{c.op}' cannot compare {c.field} with {json.dumps(c.value)}; "
        "null and true/false only work with == and !=",
        field="q",
    )


def _as_int(value: Any, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name} compares with integers, got {value!r}", field="q") from None


def _time(name: str, op: str, value: Any) -> Any:
    """created / started / ended: unix seconds (compared in whole milliseconds, as MLflow's
    start_time and end_time are) or an ISO date (``== 2024-05-01`` is that whole day)."""
    col = _TIMES[name]
    if isinstance(value, str):
        parsed = dt.datetime.fromisoformat(value)
        start = parsed.timestamp()
        if op == "==" and len(value) <= 10:  # a bare date: that whole day
            return sa.and_(col >= start, col < start + 86400)
        value = start
    if name == "created":
        return getattr(col, _ORDER[op])(value)
    ms = sa.func.round(col * 1000)
    return sa.and_(col.is_not(None), getattr(ms, _ORDER[op])(round(float(value) * 1000)))


# ------------------------------------------------------------------------ search


def _sort_expr(spec: RunSearch, dialect: str, key_ids: dict[str, int]) -> Any:
    """The ORDER BY expression of ``spec.sort``."""
    sort = spec.sort
    if sort.startswith("config."):
        keys = sort[len("config.") :].split(".")
        if not all(keys):
            raise InvalidInput(f"sort={sort!r} has an empty key part", field="sort")
        return _field_value(Field("config", tuple(keys)), dialect, key_ids)
    if sort.startswith("metrics."):
        return _field_value(Field("metrics", (sort[len("metrics.") :],)), dialect, key_ids)
    if sort not in SORT_ATTRIBUTES:
        raise InvalidInput(
            f"sort={sort!r} is not sortable; use one of {', '.join(SORT_ATTRIBUTES)}, "
            "config.<key> or metrics.<name>",
            field="sort",
        )
    return SORT_ATTRIBUTES[sort]


def _field_value(field: Field, dialect: str, key_ids: dict[str, int]) -> Any:
    """The value of ``field`` for each run, to sort by (NULL when the run lacks it)."""
    if field.kind == "metrics":
        return (
            sa.select(m.MetricSummaryRow.last_value)
            .where(
                m.MetricSummaryRow.run_id == m.RunRow.id,
                m.MetricSummaryRow.key_id == key_ids.get(field.name, -1),
            )
            .scalar_subquery()
        )
    if field.kind == "config":
        return ConfigValue(dialect, field.path).first(lambda j: j.node)
    if field.kind == "param":
        return ConfigValue(dialect, field.name.split(".")).first(lambda j: j.text)
    if field.kind == "tag":
        key = field.name
        if key == RUN_NAME_TAG:
            return m.RunRow.name
        if key == NOTE_TAG:
            return m.RunRow.notes
        if key.startswith("mlflow."):
            return JsonPath(dialect, [SYSTEM_TAGS_KEY, key]).text
        return user_tag_value(dialect, key)
    if field.name not in SORT_ATTRIBUTES:
        raise InvalidInput(f"{field} is not sortable", field="sort")
    return SORT_ATTRIBUTES[field.name]


def _metric_names(spec: RunSearch, node: Node | None) -> set[str]:
    names = {f.name for f in fields_used(node) if f.kind == "metrics"}
    names.update(f.name for f in fields_used(spec.where) if f.kind == "metrics")
    names.update(k.field.name for k in spec.order_by if k.field.kind == "metrics")
    names.update(spec.metric_columns)
    if spec.sort.startswith("metrics."):
        names.add(spec.sort[len("metrics.") :])
    return names


def _key_ids(conn: sa.Connection, names: set[str]) -> dict[str, int]:
    if not names:
        return {}
    rows = conn.execute(
        sa.select(m.MetricKeyRow.name, m.MetricKeyRow.id).where(
            m.MetricKeyRow.name.in_(sorted(names))
        )
    )
    return {name: key_id for name, key_id in rows}


def _check(spec: RunSearch, max_limit: int = MAX_LIMIT) -> None:
    if spec.order not in ("asc", "desc"):
        raise InvalidInput(f"order={spec.order!r}: use asc or desc", field="order")
    if not 1 <= spec.limit <= max_limit:
        raise InvalidInput(f"limit={spec.limit}: use 1 to {max_limit}", field="limit")
    if spec.offset < 0:
        raise InvalidInput(f"offset={spec.offset} is negative", field="offset")
    if spec.status is not None and spec.status not in RUN_STATUSES:
        raise InvalidInput(
            f"status {spec.status!r} is not a run status; use one of {', '.join(RUN_STATUSES)}",
            field="status",
        )


def search_runs(store: Store, spec: RunSearch) -> RunPage:
    """One page of runs matching ``spec``, with the total count of matches.

    Raises:
        QueryError (400): the query does not parse (the message names the position).
        InvalidInput (400): a bad sort key, order, limit, offset or status, or an impossible
            comparison.
        StoreUnavailable (503): the database cannot be reached.
    """
    _check(spec)
    node = parse_query(spec.query)
    dialect = store.dialect
    with read_conn(store.engine) as conn:
        key_ids = _key_ids(conn, _metric_names(spec, node))
        where = _where(spec, node, dialect, key_ids)
        base = sa.select(m.RunRow.id).join(m.ProjectRow, m.ProjectRow.id == m.RunRow.project_id)
        total = conn.execute(
            sa.select(sa.func.count()).select_from(base.where(*where).subquery())
        ).scalar_one()
        ids = _page_ids(conn, spec, where, dialect, key_ids)
        rows = _load_rows(conn, ids, spec, dialect, key_ids)
    return RunPage(runs=rows, total=total, query=format_query(node))


_DELETED_FIELD = Field("attr", ("deleted",))


def search_run_ids(store: Store, spec: RunSearch, *, max_limit: int = 50_000) -> list[int]:
    """Ids of one page of runs matching ``spec`` (no count), for the MLflow API's runs/search.

    Raises the same errors as :func:`search_runs`.
    """
    _check(spec, max_limit)
    node = parse_query(spec.query)
    with read_conn(store.engine) as conn:
        key_ids = _key_ids(conn, _metric_names(spec, node))
        where = _where(spec, node, store.dialect, key_ids)
        return _page_ids(conn, spec, where, store.dialect, key_ids)


def _page_ids(
    conn: sa.Connection, spec: RunSearch, where: list, dialect: str, key_ids: dict[str, int]
) -> list[int]:
    """``order_by`` keys, then ``sort`` (ties by id in the same direction); missing values
    last in every key, so every page of a fixed set of runs is stable."""
    order = []
    for key in spec.order_by:
        value = _field_value(key.field, dialect, key_ids)
        if key.field.kind == "metrics":  # as MLflow: values, then NaN, then runs without it
            order.append(_nan_rank(key.field, key_ids, value))
        order.append((value.asc() if key.ascending else value.desc()).nulls_last())
    sort_expr = _sort_expr(spec, dialect, key_ids)
    direction = sort_expr.desc() if spec.order == "desc" else sort_expr.asc()
    tie = m.RunRow.id.desc() if spec.order == "desc" else m.RunRow.id.asc()
    page = (
        sa.select(m.RunRow.id)
        .join(m.ProjectRow, m.ProjectRow.id == m.RunRow.project_id)
        .where(*where)
        .order_by(*order, direction.nulls_last(), tie)
        .limit(spec.limit)
        .offset(spec.offset)
    )
    return list(conn.execute(page).scalars())


def _nan_rank(field: Field, key_ids: dict[str, int], value: Any) -> Any:
    """0 for a number, 1 for NaN (stored as NULL), 2 for a run without the metric."""
    logged = sa.exists(
        sa.select(1).where(
            m.MetricSummaryRow.run_id == m.RunRow.id,
            m.MetricSummaryRow.key_id == key_ids.get(field.name, -1),
        )
    )
    return sa.case((value.is_not(None), 0), (logged, 1), else_=2)


def _where(spec: RunSearch, node: Node | None, dialect: str, key_ids: dict[str, int]) -> list:
    where = []
    translator = _Translator(dialect, key_ids)
    if node is not None:
        where.append(translator.node(node))
    if spec.where is not None:
        where.append(translator.node(spec.where))
    if spec.project:
        where.append(m.ProjectRow.name == spec.project)
    if spec.projects:
        where.append(m.ProjectRow.name.in_(list(spec.projects)))
    if spec.status:
        where.append(m.RunRow.status == spec.status)
    where.extend(tag_filter(dialect, t) for t in spec.tags)
    names_deleted = any(f == _DELETED_FIELD for f in fields_used(node))
    if spec.deleted is not None and not names_deleted:
        where.append(deleted_filter(spec.deleted))
    return where


def _load_rows(
    conn: sa.Connection, ids: list[int], spec: RunSearch, dialect: str, key_ids: dict[str, int]
) -> list[RunHit]:
    if not ids:
        return []
    config_cols = []
    for i, name in enumerate(spec.config_columns):
        value = ConfigValue(dialect, name.split("."))
        config_cols.append(value.first(lambda j: j.shown()).label(f"c{i}"))
    query = run_select().add_columns(*config_cols).where(m.RunRow.id.in_(ids))
    by_id = {r.id: r for r in conn.execute(query)}
    metrics = _metric_columns(conn, ids, spec.metric_columns, key_ids)
    chips = _diagnosis_chips(conn, ids)
    out = []
    for run_id in ids:
        r = by_id[run_id]
        config = {}
        for i, name in enumerate(spec.config_columns):
            raw = getattr(r, f"c{i}")
            config[name] = (
                json.loads(raw) if isinstance(raw, str) and dialect != "postgresql" else raw
            )
        hit = _row(r, config, metrics.get(run_id, {}))
        found = chips.get(run_id, [])
        out.append(dataclasses.replace(hit, diagnoses=[c.code for c in found], health=found))
    return out


def _diagnosis_chips(conn: sa.Connection, ids: list[int]) -> dict[int, list[DiagnosisChip]]:
    """The doctor's codes per run (tracker.store.diagnoses), each once, by onset step."""
    query = (
        sa.select(m.RunEventRow.run_id, m.RunEventRow.code, m.RunEventRow.data)
        .where(m.RunEventRow.run_id.in_(ids), m.RunEventRow.kind == "diagnosis")
        .where(m.RunEventRow.code.is_not(None))
        .order_by(m.RunEventRow.run_id, m.RunEventRow.id)
    )
    by_run: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for run_id, code, data in conn.execute(query):
        by_run.setdefault(run_id, {}).setdefault(code, []).append(data or {})
    return {
        run_id: sorted(
            (_chip(code, found) for code, found in codes.items()),
            key=lambda c: (c.step if c.step is not None else -1, c.code),
        )
        for run_id, codes in by_run.items()
    }


def _chip(code: str, found: list[dict[str, Any]]) -> DiagnosisChip:
    def onset(d: dict[str, Any]) -> int:
        step = d.get("step")
        return step if isinstance(step, int) else -1

    first = min(found, key=lambda d: (d.get("severity") != "error", onset(d)))
    step = first.get("step")
    return DiagnosisChip(
        code=code,
        severity="error" if first.get("severity") == "error" else "warning",
        step=step if isinstance(step, int) else None,
        metric=first.get("metric"),
        message=str(first.get("message") or ""),
        count=len(found),
    )


def _row(r: Any, config: dict[str, Any], metrics: dict[str, float]) -> RunHit:
    return RunHit(
        id=r.id,
        project=r.project,
        name=r.name,
        status=r.status,
        tags=list(r.tags or []),
        created_at=r.created_at,
        started_at=r.started_at,
        ended_at=r.ended_at,
        heartbeat_at=r.heartbeat_at,
        host=r.host,
        exit_code=r.exit_code,
        failure_class=r.failure_class,
        failure_hint=r.failure_hint,
        config=config,
        metrics=metrics,
        deleted_at=r.deleted_at,
        starred=bool(r.starred),
        notes_preview=None if r.notes is None else r.notes[:NOTES_PREVIEW],
        notes_truncated=r.notes is not None and len(r.notes) > NOTES_PREVIEW,
    )


def _metric_columns(
    conn: sa.Connection, ids: list[int], names: Sequence[str], key_ids: dict[str, int]
) -> dict[int, dict[str, float]]:
    wanted = {key_ids[n]: n for n in names if n in key_ids}
    if not wanted:
        return {}
    query = sa.select(
        m.MetricSummaryRow.run_id, m.MetricSummaryRow.key_id, m.MetricSummaryRow.last_value
    ).where(m.MetricSummaryRow.run_id.in_(ids), m.MetricSummaryRow.key_id.in_(list(wanted)))
    out: dict[int, dict[str, float]] = {}
    for run_id, key_id, value in conn.execute(query):
        out.setdefault(run_id, {})[wanted[key_id]] = value
    return out


# ----------------------------------------------------------------------- columns


def run_columns(
    store: Store, project: str | None = None, sample: int = 500
) -> tuple[list[str], list[str]]:
    """(config keys, metric names) seen in runs, for the column chooser.

    Config keys are the flattened keys of the newest ``sample`` runs (keys starting with
    ``_`` after the others); metric names come
    from every run (of the project). Raises StoreUnavailable.
    """
    runs = sa.select(m.RunRow.config).order_by(m.RunRow.id.desc()).limit(sample)
    names = (
        sa.select(m.MetricKeyRow.name)
        .where(
            sa.exists(
                sa.select(1)
                .select_from(m.MetricSummaryRow)
                .join(m.RunRow, m.RunRow.id == m.MetricSummaryRow.run_id)
                .where(m.MetricSummaryRow.key_id == m.MetricKeyRow.id, *_project_filter(project))
            )
        )
        .order_by(m.MetricKeyRow.name)
    )
    if project:
        runs = runs.where(*_project_filter(project))
    keys: set[str] = set()
    with read_conn(store.engine) as conn:
        for (config,) in conn.execute(runs):
            keys.update(flatten(config or {}))
        metrics = list(conn.execute(names).scalars())
    # the run's own keys first, reserved ones (``_mlflow_tags.*``: MLflow's system tags) last
    return sorted(keys, key=lambda k: (k.startswith("_"), k)), metrics


def _project_filter(project: str | None) -> list[Any]:
    if not project:
        return []
    pid = sa.select(m.ProjectRow.id).where(m.ProjectRow.name == project).scalar_subquery()
    return [m.RunRow.project_id == pid]
