"""MLflow's run-search grammar (``search_runs(filter_string=..., order_by=[...])``) read into
the query tree of the dashboard's own language (``tracker.rules.query``), so that one SQL
compiler (``tracker.store.run_search``) serves both. Pure: no I/O.

    metrics.loss < 0.5 AND params.optimizer = 'adam' AND tags.`mlflow.parentRunId` = '12'
    attributes.status IN ('FINISHED', 'FAILED') AND run_name LIKE 'lr-%'

Grammar (MLflow's, ``mlflow.utils.search_utils.SearchUtils``): comparisons joined by ``AND``
(MLflow has no ``OR``); an identifier is ``<entity>.<key>`` (entities ``metrics``/``metric``,
``params``/``param``/``parameter(s)``, ``tags``/``tag``, ``attributes``/``attribute``/``attr``/
``run``) or a bare attribute; a key may be quoted with backquotes or double quotes
(``metrics.`val loss```). Values: numbers for metrics and times, quoted strings otherwise.

Semantics kept from MLflow: a comparison on a key the run lacks is false (``!=`` too), except
``IS NULL``; ``LIKE`` is case-sensitive, ``ILIKE`` not; metrics compare their latest value,
``!=`` matches a NaN metric; statuses are MLflow's (``FAILED`` also finds our ``crashed``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tracker.errors import InvalidInput
from tracker.rules.query import And, Compare, Field, Node, Not, Scalar

__all__ = [
    "EXPERIMENT_ORDER_ATTRIBUTES",
    "MAX_FILTER_LENGTH",
    "MlflowFilterError",
    "OrderKey",
    "like_match",
    "parse_experiment_order_by",
    "parse_filter",
    "parse_order_by",
]

MAX_FILTER_LENGTH = 10_000
MAX_ORDER_BY = 20
MAX_CLAUSES = 100

# MLflow status -> ours (``crashed`` is reported as FAILED, so FAILED finds it too)
STATUSES: dict[str, tuple[str, ...]] = {
    "RUNNING": ("running",),
    "SCHEDULED": ("queued",),
    "FINISHED": ("finished",),
    "FAILED": ("failed", "crashed"),
    "KILLED": ("killed",),
}
_ENTITIES = {
    "metric": "metric", "metrics": "metric",
    "param": "param", "params": "param", "parameter": "param", "parameters": "param",
    "tag": "tag", "tags": "tag",
    "attribute": "attr", "attributes": "attr", "attr": "attr", "run": "attr",
    "dataset": "dataset", "datasets": "dataset",
}  # fmt: skip
_STRING_ATTRS = {"run_id", "run_name", "status", "user_id", "artifact_uri", "run name",
                 "Run name", "Run Name"}  # fmt: skip
_NUMERIC_ATTRS = {"start_time", "end_time", "created", "Created"}
_ATTRS = _STRING_ATTRS | _NUMERIC_ATTRS
_METRIC_OPS = {"=", "!=", "<", "<=", ">", ">="}
_KEY_OPS = {"=", "!=", "LIKE", "ILIKE", "IS NULL", "IS NOT NULL"}
_STRING_ATTR_OPS = {"=", "!=", "LIKE", "ILIKE", "IN", "NOT IN"}
_ORDER = {"=": "==", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_USER_TAG = "mlflow.user"


class MlflowFilterError(InvalidInput):
    """A filter or order_by that MLflow's grammar does not allow (-> INVALID_PARAMETER_VALUE)."""

    code = "invalid_filter"


@dataclass(frozen=True)
class OrderKey:
    """One ``order_by`` entry: a field of the query tree and its direction."""

    field: Field
    ascending: bool


# ------------------------------------------------------------------------ lexer


@dataclass(frozen=True)
class _Tok:
    kind: str  # ident string number op lparen rparen comma word eof
    text: str
    pos: int


_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<string>'(?:''|\\.|[^'\\])*'|"(?:""|\\.|[^"\\])*")
  | (?P<back>`[^`]*`)
  | (?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?![\w.]))
  | (?P<op><=|>=|!=|<>|=|<|>)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<comma>,)
  | (?P<word>[A-Za-z_][\w\-/:]*(?:\.(?:`[^`]*`|"(?:""|\\.|[^"\\])*"|[\w\-/:.]+))?)
    """,
    re.X,
)


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    i = 0
    while i < len(text):
        found = _TOKEN.match(text, i)
        if found is None:
            raise _error(f"unexpected character {text[i]!r} at position {i}", text)
        kind = found.lastgroup or ""
        if kind != "space":
            out.append(_Tok(kind, found.group(), i))
        i = found.end()
    out.append(_Tok("eof", "", len(text)))
    return out


def _error(detail: str, text: str) -> MlflowFilterError:
    shown = text if len(text) <= 200 else text[:200] + "..."
    return MlflowFilterError(f"Invalid filter {shown!r}: {detail}", field="filter")


def _unquote(raw: str) -> str:
    """A string token's text without its quotes (kept verbatim inside, as MLflow does)."""
    return raw[1:-1]


def _split_identifier(raw: str, text: str) -> tuple[str, str]:
    """``(entity, key)``; a bare identifier is an attribute."""
    if raw.startswith(("`", '"')):
        return "attr", _unquote(raw)
    entity, dot, key = raw.partition(".")
    if not dot:
        return "attr", raw
    kind = _ENTITIES.get(entity.lower())
    if kind is None:
        raise _error(
            f"invalid entity type {entity!r}; use metrics., params., tags. or attributes.", text
        )
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "`\"'":
        key = key[1:-1]
    if not key:
        raise _error(f"{raw!r} names no key", text)
    return kind, key


# ----------------------------------------------------------------------- parser


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, ahead: int = 0) -> _Tok:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def take(self) -> _Tok:
        tok = self.peek()
        self.i += 1
        return tok

    def word(self, *words: str) -> bool:
        tok = self.peek()
        return tok.kind == "word" and tok.text.upper() in words

    def fail(self, tok: _Tok, detail: str) -> MlflowFilterError:
        return _error(f"{detail} at position {tok.pos}", self.text)

    def clauses(self) -> list[Node]:
        nodes = [self.comparison()]
        while self.peek().kind != "eof":
            tok = self.peek()
            if not self.word("AND"):
                if self.word("OR"):
                    raise self.fail(tok, "OR is not supported by MLflow's search; use AND")
                raise self.fail(tok, f"expected AND or the end of the filter, got {tok.text!r}")
            self.take()
            if self.peek().kind == "eof":  # MLflow accepts a trailing AND
                break
            nodes.append(self.comparison())
            if len(nodes) > MAX_CLAUSES:
                raise self.fail(tok, f"more than {MAX_CLAUSES} conditions")
        return nodes

    def identifier(self) -> tuple[str, str]:
        tok = self.take()
        if tok.kind == "word" and tok.text.upper() not in ("AND", "OR", "NOT", "IN", "IS"):
            return _split_identifier(tok.text, self.text)
        if tok.kind in ("back", "string") and tok.text[0] in '`"':
            return "attr", _unquote(tok.text)
        got = "the end of the filter" if tok.kind == "eof" else repr(tok.text)
        raise self.fail(tok, f"expected an identifier such as metrics.loss, got {got}")

    def operator(self) -> str:
        tok = self.peek()
        if tok.kind == "op":
            self.take()
            return "!=" if tok.text == "<>" else tok.text
        if self.word("LIKE", "ILIKE", "IN"):
            return self.take().text.upper()
        if self.word("NOT") and self.peek(1).kind == "word" and self.peek(1).text.upper() == "IN":
            self.i += 2
            return "NOT IN"
        if self.word("IS"):
            self.take()
            if self.word("NULL"):
                self.take()
                return "IS NULL"
            if self.word("NOT") and self.peek(1).text.upper() == "NULL":
                self.i += 2
                return "IS NOT NULL"
            raise self.fail(self.peek(), "expected NULL or NOT NULL after IS")
        got = "the end of the filter" if tok.kind == "eof" else repr(tok.text)
        raise self.fail(tok, f"expected a comparison operator (=, !=, <, LIKE, IN, ...), got {got}")

    def value(self) -> tuple[str, str | float]:
        tok = self.take()
        if tok.kind == "string":
            return "string", _unquote(tok.text)
        if tok.kind == "number":
            number = float(tok.text)
            if not math.isfinite(number):
                raise self.fail(tok, f"number {tok.text[:30]} is out of range")
            return "number", number
        if tok.kind == "lparen":
            return "list", ""
        got = "the end of the filter" if tok.kind == "eof" else repr(tok.text)
        raise self.fail(tok, f"expected a value (a quoted string or a number), got {got}")

    def string_list(self) -> tuple[str, ...]:
        values: list[str] = []
        while True:
            tok = self.take()
            if tok.kind != "string":
                raise self.fail(tok, "expected a quoted string in the list")
            values.append(_unquote(tok.text))
            sep = self.take()
            if sep.kind == "rparen":
                return tuple(values)
            if sep.kind != "comma":
                raise self.fail(sep, "expected ',' or ')' in the list")

    def comparison(self) -> Node:
        start = self.peek()
        entity, key = self.identifier()
        op = self.operator()
        if op in ("IS NULL", "IS NOT NULL"):
            if entity not in ("param", "tag"):
                raise self.fail(start, "IS NULL / IS NOT NULL only work with params and tags")
            field = Field("param" if entity == "param" else "tag", (key,))
            exists = Compare(field, "exists", None)
            return exists if op == "IS NOT NULL" else Not(exists)
        kind, value = self.value()
        values: tuple[str, ...] = ()
        if kind == "list":
            if op not in ("IN", "NOT IN"):
                raise self.fail(start, f"a list of values needs IN or NOT IN, not {op}")
            values = self.string_list()
        elif op in ("IN", "NOT IN"):
            raise self.fail(start, f"{op} needs a list of quoted strings, e.g. ('a', 'b')")
        return _node(entity, key, op, value, values, self)


def _node(
    entity: str, key: str, op: str, value: str | float, values: tuple[str, ...], p: _Parser
) -> Node:
    at = p.toks[p.i - 1]
    if entity == "metric":
        if op not in _METRIC_OPS:
            raise p.fail(at, f"invalid comparator {op!r} for metrics; use one of = != < <= > >=")
        if not isinstance(value, float):
            raise p.fail(at, f"metrics.{key} compares with a number, got {value!r}")
        return _compare(Field("metrics", (key,)), op, value)
    if entity in ("param", "tag"):
        if op not in _KEY_OPS:
            raise p.fail(
                at,
                f"invalid comparator {op!r} for {entity}s; use = != LIKE ILIKE IS NULL IS NOT NULL",
            )
        if not isinstance(value, str):
            raise p.fail(at, f"{entity}s compare with a quoted string (e.g. '0.01'), got {value}")
        return _compare(Field("param" if entity == "param" else "tag", (key,)), op, value)
    if entity == "dataset":
        raise p.fail(at, "datasets.* filters are not supported by this server")
    return _attribute(key, op, value, values, p)


def _compare(field: Field, op: str, value: Scalar) -> Node:
    """MLflow's ``!=`` needs the key present (unlike the query language's ``!=``)."""
    if op == "!=":
        return And((Compare(field, "exists", None), Not(Compare(field, "==", value))))
    return Compare(field, _ORDER.get(op, op.lower()), value)


def _attribute(key: str, op: str, value: str | float, values: tuple[str, ...], p: _Parser) -> Node:
    at = p.toks[p.i - 1]
    if key not in _ATTRS:
        shown = ", ".join(sorted(_ATTRS - {"Created", "Run name", "Run Name"}))
        raise p.fail(at, f"invalid attribute key {key!r}; use one of: {shown}")
    if key in _NUMERIC_ATTRS:
        if op not in _METRIC_OPS:
            raise p.fail(at, f"invalid comparator {op!r} for {key}; use one of = != < <= > >=")
        if not isinstance(value, float):
            raise p.fail(at, f"{key} compares with a number (epoch milliseconds), got {value!r}")
        name = "ended" if key == "end_time" else "started"
        field = Field("attr", (name,))
        seconds = value / 1000.0
        if op == "!=":
            return Not(Compare(field, "==", seconds))
        return Compare(field, _ORDER[op], seconds)
    if op not in _STRING_ATTR_OPS:
        raise p.fail(at, f"invalid comparator {op!r} for {key}; use = != LIKE ILIKE IN NOT IN")
    if op not in ("IN", "NOT IN"):
        if not isinstance(value, str):
            raise p.fail(at, f"{key} compares with a quoted string, got {value}")
        values = (value,)
    elif key != "run_id":
        raise p.fail(at, "only run_id supports IN / NOT IN with a list of quoted strings")
    negate = op in ("!=", "NOT IN")
    if key == "status":
        node: Node = _status(op, values)
    elif key == "run_id":
        node = _run_id(op, values, p)
    elif key == "user_id":
        node = _compare(Field("tag", (_USER_TAG,)), "=" if negate else op, values[0])
    elif key == "artifact_uri":
        raise p.fail(at, "artifact_uri filters are not supported by this server")
    else:  # run_name, "run name"
        field = Field("attr", ("name",))
        node = Compare(field, "==" if negate else _ORDER.get(op, op.lower()), values[0])
    return Not(node) if negate else node


def _status(op: str, values: tuple[str, ...]) -> Node:
    """A status comparison as the set of our statuses it matches (LIKE evaluated here)."""
    matched: list[str] = []
    for mlflow_status, ours in STATUSES.items():
        if op in ("LIKE", "ILIKE"):
            hit = like_match(mlflow_status, values[0], case_sensitive=op == "LIKE")
        else:
            hit = mlflow_status in values
        if hit:
            matched.extend(ours)
    return Compare(Field("attr", ("status",)), "in", tuple(matched))


def _run_id(op: str, values: tuple[str, ...], p: _Parser) -> Node:
    if op in ("LIKE", "ILIKE"):
        raise p.fail(p.toks[p.i - 1], "run_id LIKE is not supported by this server; use = or IN")
    ids = tuple(int(v) for v in values if re.fullmatch(r"\d{1,18}", v.strip()))
    return Compare(Field("attr", ("id",)), "in", ids)


# ------------------------------------------------------------------ public API


def like_match(text: str, pattern: str, *, case_sensitive: bool = True) -> bool:
    """SQL LIKE as MLflow evaluates it: ``%`` any run, ``_`` one character, no escapes."""
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    flags = re.S if case_sensitive else re.S | re.I
    return re.fullmatch(regex, text, flags) is not None


def parse_filter(text: object) -> Node | None:
    """MLflow's ``filter_string`` as a query tree; ``None`` for an empty filter (all runs).

    Raises:
        MlflowFilterError: the filter breaks MLflow's grammar (the message names the
            position and the rule); never any other exception, whatever the text.
    """
    if text is None:
        return None
    if not isinstance(text, str):
        raise MlflowFilterError("filter must be a string", field="filter")
    if len(text) > MAX_FILTER_LENGTH:
        raise MlflowFilterError(
            f"filter has {len(text)} characters; at most {MAX_FILTER_LENGTH} are allowed",
            field="filter",
        )
    if "\x00" in text:
        raise MlflowFilterError("filter must not contain NUL characters", field="filter")
    if not text.strip():
        return None
    nodes = _Parser(text).clauses()
    return nodes[0] if len(nodes) == 1 else And(tuple(nodes))


_ORDER_ATTRS = {
    "start_time": "started", "created": "started", "Created": "started", "end_time": "ended",
    "run_name": "name", "run name": "name", "Run name": "name", "Run Name": "name",
    "status": "status", "run_id": "id",
}  # fmt: skip


def _order_items(items: object) -> list[str]:
    """An ``order_by`` value (one string, or a list of at most :data:`MAX_ORDER_BY`
    strings) as a list. Raises MlflowFilterError naming ``order_by``."""
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise MlflowFilterError("order_by must be a list of strings", field="order_by")
    if len(items) > MAX_ORDER_BY:
        raise MlflowFilterError(f"at most {MAX_ORDER_BY} order_by keys", field="order_by")
    return items


def parse_order_by(items: object) -> tuple[OrderKey, ...]:
    """MLflow's ``order_by`` list (``["metrics.loss ASC", "start_time DESC"]``) as sort keys.

    Raises:
        MlflowFilterError: not a list of strings, an unknown key or direction, a field twice.
    """
    if items is None or items == "":
        return ()
    items = _order_items(items)
    keys: list[OrderKey] = []
    for item in items:
        if "\x00" in item:
            raise MlflowFilterError("order_by must not contain NUL characters", field="order_by")
        key = _order_key(item)
        if any(k.field == key.field for k in keys):
            raise MlflowFilterError(
                f"`order_by` contains duplicate fields: {items}", field="order_by"
            )
        keys.append(key)
    return tuple(keys)


def _order_error(item: str, detail: str) -> MlflowFilterError:
    return MlflowFilterError(f"Invalid order_by clause {item[:200]!r}: {detail}", field="order_by")


def _order_item(item: str, what: str, example: str) -> tuple[str, bool]:
    """One ``order_by`` item, ``<key> [ASC|DESC]``: the key's raw text and ascending."""
    try:
        toks = _tokens(item)[:-1]
    except MlflowFilterError:
        raise _order_error(item, "it could not be parsed") from None
    ascending = True
    if len(toks) == 2 and toks[1].kind == "word" and toks[1].text.upper() in ("ASC", "DESC"):
        ascending = toks[1].text.upper() == "ASC"
        toks = toks[:1]
    if len(toks) != 1 or toks[0].kind not in ("word", "back", "string"):
        raise _order_error(item, f"use <{what}> [ASC|DESC], e.g. {example}")
    return toks[0].text, ascending


def _order_key(item: str) -> OrderKey:
    def bad(detail: str) -> MlflowFilterError:
        return _order_error(item, detail)

    raw, ascending = _order_item(item, "key", "metrics.loss DESC")
    try:
        entity, key = ("attr", _unquote(raw)) if raw[0] in "`\"'" else _split_identifier(raw, item)
    except MlflowFilterError as exc:
        raise bad(exc.message.split(": ", 1)[-1]) from None
    if entity == "metric":
        return OrderKey(Field("metrics", (key,)), ascending)
    if entity in ("param", "tag"):
        return OrderKey(Field("param" if entity == "param" else "tag", (key,)), ascending)
    if entity == "attr" and key in _ORDER_ATTRS:
        return OrderKey(Field("attr", (_ORDER_ATTRS[key],)), ascending)
    if entity == "attr" and key == "user_id":
        return OrderKey(Field("tag", (_USER_TAG,)), ascending)
    raise bad(
        f"{key!r} cannot be ordered by; use metrics.<key>, params.<key>, tags.<key> or one of "
        + ", ".join(sorted(set(_ORDER_ATTRS) - {"Created", "Run name", "Run Name"}))
    )


# experiments/search order_by: MLflow's SearchExperimentsUtils.VALID_ORDER_BY_ATTRIBUTE_KEYS
EXPERIMENT_ORDER_ATTRIBUTES = ("name", "experiment_id", "creation_time", "last_update_time")
# MLflow's default when none is given (sqlalchemy_store._get_search_experiments_order_by_clauses)
_EXPERIMENT_DEFAULT_ORDER = (("creation_time", False), ("experiment_id", True))


def parse_experiment_order_by(items: object) -> tuple[tuple[str, bool], ...]:
    """``search_experiments(order_by=[...])`` as ``(attribute, ascending)`` pairs, completed as
    MLflow's SQL store does: none given is ``creation_time DESC, experiment_id ASC``; any other
    order that lacks ``experiment_id`` ends with ``experiment_id DESC`` (MLflow's
    tie-breaker). Attributes: :data:`EXPERIMENT_ORDER_ATTRIBUTES` (bare, quoted or as
    ``attribute.<name>``, MLflow's only entity there); direction ``ASC`` (default) or
    ``DESC``, any case.

    Raises:
        MlflowFilterError (INVALID_PARAMETER_VALUE): not a list of strings, an unknown
            attribute or direction, an entity other than attributes, an attribute twice.
    """
    if items is None or items == "" or items == []:
        return _EXPERIMENT_DEFAULT_ORDER
    items = _order_items(items)
    keys: list[tuple[str, bool]] = []
    for item in items:
        key = _experiment_order_key(item)
        if any(k[0] == key[0] for k in keys):
            raise MlflowFilterError(
                f"`order_by` contains duplicate fields: {items}", field="order_by"
            )
        keys.append(key)
    if not any(k[0] == "experiment_id" for k in keys):
        keys.append(("experiment_id", False))  # MLflow's tie-breaker: experiment_id DESC
    return tuple(keys)


def _experiment_order_key(item: str) -> tuple[str, bool]:
    def bad(detail: str) -> MlflowFilterError:
        return _order_error(item, detail)

    if "\x00" in item:
        raise MlflowFilterError("order_by must not contain NUL characters", field="order_by")
    raw, ascending = _order_item(item, "attribute", "name ASC")
    entity, dot, key = raw.partition(".") if raw[0] not in "`\"'" else ("", "", raw)
    if not dot:
        entity, key = "attribute", raw
    if entity != "attribute":  # MLflow's experiments take attribute.<name> (and tags: unordered)
        raise bad(f"use <attribute> or attribute.<attribute>, not {entity[:40]!r}.")
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "`\"'":
        key = key[1:-1]
    if key not in EXPERIMENT_ORDER_ATTRIBUTES:
        raise bad(f"experiments can be ordered by {', '.join(EXPERIMENT_ORDER_ATTRIBUTES)} only")
    return key, ascending
