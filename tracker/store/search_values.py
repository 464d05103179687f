"""SQL expressions for the values a run search compares (``tracker.store.run_search``): config
keys (nested path or flat dotted key), MLflow params and tags, and LIKE patterns, on SQLite and
PostgreSQL alike.

* ``config.a.b`` finds the nested path ``a`` -> ``b`` and the flat key ``"a.b"`` (MLflow logs
  dotted params flat), and every other grouping of the dots for up to ``MAX_SPLIT_PARTS``
  parts (``tracker.rules.config.flatten`` refuses configs where two of them exist at once).
* A numeric comparison also reads a string that is a plain decimal number (MLflow params are
  strings): ``-?digits[.digits][e[+-]dd]`` as in JSON, at most 40 characters.
* ``like`` is case-sensitive (GLOB on SQLite), ``ilike`` not (ASCII letters on SQLite); the
  pattern has no escape character: ``%`` and ``_`` are its only wildcards, as in MLflow.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from tracker.errors import InvalidInput
from tracker.store import models as m

__all__ = ["ConfigValue", "JsonPath", "config_paths", "like", "tag_value_exists", "user_tag_value"]

MAX_SPLIT_PARTS = 5  # 2**(5-1) = 16 groupings; longer keys: nested path and flat key only
MAX_NUMBER_TEXT = 40
_PG_NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]{1,2})?$"


def config_paths(parts: Sequence[str]) -> list[tuple[str, ...]]:
    """The key paths ``parts`` (a key split at dots) may mean, nested path first."""
    n = len(parts)
    if n <= 1:
        return [tuple(parts)]
    if n > MAX_SPLIT_PARTS:
        return [tuple(parts), (".".join(parts),)]
    out: list[tuple[str, ...]] = []
    for joins in itertools.product((False, True), repeat=n - 1):
        path, current = [], parts[0]
        for part, join in zip(parts[1:], joins, strict=True):
            if join:
                current += "." + part
            else:
                path.append(current)
                current = part
        path.append(current)
        out.append(tuple(path))
    return out


class JsonPath:
    """SQL expressions for one config path on one dialect."""

    def __init__(self, dialect: str, keys: Sequence[str]) -> None:
        self.pg = dialect == "postgresql"
        self.node: Any
        self.text: Any
        self.type: Any
        if self.pg:
            path = sa.bindparam(None, list(keys), type_=postgresql.ARRAY(sa.Text))
            self.node = m.RunRow.config.op("#>")(path)
            self.text = m.RunRow.config.op("#>>", return_type=sa.Text)(path)
            self.type = sa.func.jsonb_typeof(self.node)
        else:
            for key in keys:
                if '"' in key:
                    raise InvalidInput(
                        f"config key {key!r}: keys containing '\"' cannot be queried",
                        field="q",
                    )
            self.path = "$" + "".join(f'."{k}"' for k in keys)
            self.node = sa.func.json_extract(m.RunRow.config, self.path)
            self.text = self.node
            self.type = sa.func.json_type(m.RunRow.config, self.path)
            self.raw = m.RunRow.config.op("->", return_type=sa.Text)(self.path)

    def is_string(self) -> Any:
        return self.type == ("string" if self.pg else "text")

    def number(self) -> tuple[Any, Any]:
        """(guard, value): a JSON number, or a string holding a plain decimal number."""
        if self.pg:
            is_num = self.type == "number"
            looks = sa.and_(
                self.is_string(),
                sa.func.length(self.text) <= MAX_NUMBER_TEXT,
                self.text.op("~")(_PG_NUMBER),
            )
            value = sa.case(
                (is_num, sa.cast(self.text, sa.Float)),
                (looks, sa.cast(self.text, sa.Float)),
                else_=None,
            )
            return sa.or_(is_num, looks), value
        is_num = self.type.in_(("integer", "real"))
        numeric_text = sa.case(
            (
                sa.and_(
                    self.is_string(),
                    sa.func.length(self.text) <= MAX_NUMBER_TEXT,
                    sa.func.json_valid(self.text) == 1,
                    self.text.op("NOT GLOB")("*[eE]*[0-9][0-9][0-9]*"),
                    self.text.op("NOT GLOB")("*[ \t\n\r]*"),
                ),
                sa.func.json_type(self.text),
            ),
            else_=None,
        ).in_(("integer", "real"))
        value = sa.case(
            (is_num, self.node), (numeric_text, sa.cast(self.text, sa.Float)), else_=None
        )
        return sa.or_(is_num, numeric_text), value

    def boolean(self, value: bool) -> Any:
        if self.pg:
            return sa.and_(self.type == "boolean", self.text == ("true" if value else "false"))
        return self.type == ("true" if value else "false")

    def is_null(self) -> Any:
        return sa.or_(self.type.is_(None), self.type == "null")

    def contains(self, value: Any) -> Any:
        if self.pg:
            needle = sa.cast(sa.literal(json.dumps([value])), postgresql.JSONB)
            return sa.and_(self.type == "array", self.node.op("@>")(needle))
        each = sa.func.json_each(m.RunRow.config, self.path).table_valued("value", "type")
        if isinstance(value, bool):
            match = each.c.type == ("true" if value else "false")
        elif isinstance(value, int | float):
            match = sa.and_(each.c.type.in_(("integer", "real")), each.c.value == value)
        elif value is None:
            match = each.c.type == "null"
        else:
            match = sa.and_(each.c.type == "text", each.c.value == value)
        inner = sa.exists(sa.select(1).select_from(each).where(match))
        return sa.and_(self.type == "array", inner)

    def shown(self) -> Any:
        """The value as the runs table reads it (JSON text on SQLite, JSONB on PostgreSQL)."""
        return self.node if self.pg else self.raw


class ConfigValue:
    """One config key (split at dots) under every path it may mean (see ``config_paths``)."""

    def __init__(self, dialect: str, parts: Sequence[str]) -> None:
        self.dialect = dialect
        self.paths = [JsonPath(dialect, p) for p in config_paths(parts)]

    def any(self, condition: Any) -> Any:
        """``condition(json)`` for some path (at most one of them exists in a config)."""
        items = [condition(j) for j in self.paths]
        return items[0] if len(items) == 1 else sa.or_(*items)

    def first(self, expr: Any) -> Any:
        """``expr(json)`` of the path that exists: a value to sort by or to show."""
        items = [expr(j) for j in self.paths]
        return items[0] if len(items) == 1 else sa.func.coalesce(*items)


def like(dialect: str, expr: Any, pattern: str, *, case_sensitive: bool) -> Any:
    """``expr LIKE pattern`` with MLflow's wildcards (``%``, ``_``) and no escape character."""
    if dialect == "postgresql":
        escaped = pattern.replace("\\", "\\\\")
        method = expr.like if case_sensitive else expr.ilike
        return method(escaped, escape="\\")
    if case_sensitive:
        glob = "".join(
            "*" if c == "%" else "?" if c == "_" else f"[{c}]" if c in "*?[" else c for c in pattern
        )
        return expr.op("GLOB")(glob)
    escaped = pattern.replace("\\", "\\\\")
    return expr.like(escaped, escape="\\")


def _tag_elements(dialect: str) -> Any:
    if dialect == "postgresql":
        tags = sa.case(
            (sa.func.jsonb_typeof(m.RunRow.tags) == "array", m.RunRow.tags),
            else_=sa.cast(sa.literal("[]"), postgresql.JSONB),
        )
        return sa.func.jsonb_array_elements_text(tags).table_valued("value")
    return sa.func.json_each(m.RunRow.tags).table_valued("value")


def _value_of(element: Any, key: str) -> Any:
    """The value of ``element`` when it is the tag ``key`` (``key`` or ``key=value``)."""
    n = len(key)
    return sa.case(
        (element == key, ""),
        (sa.func.substr(element, 1, n + 1) == key + "=", sa.func.substr(element, n + 2)),
        else_=None,
    )


def tag_value_exists(dialect: str, key: str, condition: Any) -> Any:
    """The run has the user tag ``key`` and ``condition(value)`` holds for its value."""
    each = _tag_elements(dialect)
    value = _value_of(each.c.value, key)
    return sa.exists(sa.select(1).select_from(each).where(value.is_not(None), condition(value)))


def user_tag_value(dialect: str, key: str) -> Any:
    """The value of the run's user tag ``key`` (NULL when it has none), to sort by."""
    each = _tag_elements(dialect)
    value = _value_of(each.c.value, key)
    return sa.select(value).select_from(each).where(value.is_not(None)).limit(1).scalar_subquery()
