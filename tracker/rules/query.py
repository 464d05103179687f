r"""The runs-filter query language of the dashboard: a pure parser, no I/O.

    config.optimizer == "adam" and metrics.val/acc > 0.9 and status != failed
    tags contains "baseline" or (name ~ "lr" and not project == digits)
    config.model.width >= 64 and status in (failed, crashed) and duration > 1h30m
    starred and notes ~ "warmup" and tags.owner = "ana"

Precedence: ``not`` > ``and`` > ``or``; parentheses group; keywords are case-insensitive.
Fields: ``config.a.b`` (a config key: the nested path ``a`` -> ``b`` or the flat key ``"a.b"``,
as MLflow logs dotted params), ``metrics.train/loss`` (a metric name may contain
``/ - . _ :``; quote other characters: ``metrics."val acc"``), ``params.<key>`` (a config value
compared as MLflow's string param), ``tags.<key>`` (the value of a ``key=value`` tag or of an
MLflow ``mlflow.*`` tag), or one of ``ATTRIBUTES``.
``starred`` alone is ``starred == true`` (``not starred``: the runs without a star);
``notes`` is the text a person wrote on the run (``notes == null``: none).
Operators: ``== (or =) != < <= > >=``, ``~`` (substring), ``like`` / ``ilike`` (SQL patterns,
``%`` any run of characters, ``_`` one character; ``like`` is case-sensitive), ``contains``
(list membership, as in ``tags contains baseline``), ``in (a, b)`` and the postfix ``exists``
(the key is present: ``params.lr exists``). Values: numbers (``64``, ``0.9``, ``1e-3``),
quoted strings (single or double quotes; escapes ``\\ \" \' \n \t \r \uXXXX``),
``true``/``false``/``null``, and other bare words as strings (``status != failed``,
``created > 2024-05-01``, ``duration > 1h30m``, read as seconds).

The result is a tree of frozen dataclasses; evaluating it (SQL or Python) is the caller's job.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from difflib import get_close_matches
from typing import Literal

from tracker.errors import InvalidInput
from tracker.rules.ids import MAX_ID, MAX_INT64, MIN_INT64, parse_id
from tracker.rules.units import DurationError, parse_duration

__all__ = [
    "ATTRIBUTES",
    "And",
    "Compare",
    "Field",
    "Node",
    "Not",
    "Or",
    "QueryError",
    "Scalar",
    "Value",
    "fields_used",
    "format_query",
    "parse_query",
]

ATTRIBUTES = (
    "status", "name", "project", "tags", "host", "created", "started", "ended", "duration",
    "id", "diagnosis", "deleted", "notes", "starred",
)  # fmt: skip
# metric values that are not numbers: ``metrics.loss == nan`` (the last value is NaN)
_NONFINITE_WORDS = {"nan": math.nan, "inf": math.inf, "infinity": math.inf}
MAX_QUERY_LENGTH = 10_000
# Nested groups and negations: SQLite's parser overflows its stack (a driver error) at about
# 30 nested parenthesized groups of the translated SQL, so the limit keeps a margin below that.
MAX_DEPTH = 20

FieldKind = Literal["config", "metrics", "param", "tag", "attr"]
Scalar = str | int | float | bool | None
Value = Scalar | tuple[Scalar, ...]

_ORDER_OPS = frozenset({"==", "!=", "<", "<=", ">", ">="})
_STRING_OPS = frozenset({"==", "!=", "~", "in", "like", "ilike"})
_ALL_OPS = _ORDER_OPS | {"~", "contains", "in", "like", "ilike", "exists"}
_PATTERN_OPS = frozenset({"like", "ilike"})
# attribute -> (allowed operators, kind of value it compares with, example)
_ATTR_RULES: dict[str, tuple[frozenset[str], str, str]] = {
    "status": (_STRING_OPS, "string", "status in (failed, crashed)"),
    "name": (_STRING_OPS, "string", 'name ~ "lr"'),
    "project": (_STRING_OPS, "string", "project == digits"),
    "host": (_STRING_OPS, "string", "host == gpu-01"),
    "tags": (frozenset({"contains"}), "string", 'tags contains "baseline"'),
    "created": (_ORDER_OPS, "date", "created > 2024-05-01"),
    # started: the start (the creation while queued), ended: the end (null while running)
    "started": (_ORDER_OPS, "date", "started > 2024-05-01"),
    "ended": (_ORDER_OPS, "date", "ended < 2024-05-01T12:00"),
    "duration": (_ORDER_OPS | {"in"}, "duration", "duration > 1h30m"),
    "id": (frozenset({"==", "!=", "in"}), "any", "id == 42"),
    # a health code the doctor found (tracker.rules.health.CODES); null: none at all
    # soft-deleted runs are hidden unless the query names this field (deleted == true)
    "deleted": (frozenset({"==", "!="}), "bool", "deleted == true"),
    "diagnosis": (frozenset({"==", "!=", "in"}), "string", 'diagnosis == "memory_growth"'),
    # what a person wrote on the run and its star (tracker.rules.annotations)
    "notes": (_STRING_OPS, "string", 'notes ~ "warmup"'),
    "starred": (frozenset({"==", "!="}), "bool", "starred"),
}
# attributes that stand alone as a condition: ``starred`` is ``starred == true``
_FLAG_ATTRS = frozenset({"starred"})


class QueryError(InvalidInput):
    """A query that does not parse; ``position`` is the 0-based offset of the problem."""

    code = "invalid_query"

    def __init__(self, position: int, detail: str) -> None:
        super().__init__(f"position {position}: {detail}", field="q")
        self.position = position
        self.detail = detail


@dataclass(frozen=True)
class Field:
    """``kind`` 'config' (path = the key split at dots), 'metrics' (path = (metric name,)),
    'param' (path = (MLflow param key,)), 'tag' (path = (tag key,)) or 'attr'."""

    kind: FieldKind
    path: tuple[str, ...]

    @property
    def name(self) -> str:
        return ".".join(self.path) if self.kind == "config" else self.path[0]

    def __str__(self) -> str:
        key = self.name
        if self.kind == "attr":
            return key
        prefix = {"param": "params", "tag": "tags"}.get(self.kind, self.kind)
        return f"{prefix}.{key if _ATOM_FULL.fullmatch(key) else json.dumps(key)}"


@dataclass(frozen=True)
class Compare:
    field: Field
    op: str
    value: Value


@dataclass(frozen=True)
class And:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    item: Node


Node = Compare | And | Or | Not

# ------------------------------------------------------------------------------ lexer

_ATOM_CHARS = re.compile(r"[A-Za-z0-9_./\-+:]+")
_ATOM_FULL = re.compile(r"[A-Za-z_][A-Za-z0-9_./\-:]*")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INT = re.compile(r"[+-]?\d+")
_KEYWORDS = frozenset({"and", "or", "not", "contains", "in", "like", "ilike", "exists"})
_OP_KEYWORDS = ("contains", "in", "like", "ilike", "exists")
_OPERATORS = ("==", "!=", "<=", ">=", "<", ">", "~", "=")
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r"}


@dataclass(frozen=True)
class _Token:
    kind: str  # lparen rparen comma op string number word keyword eof
    text: str
    value: Scalar
    pos: int
    end: int


def _read_string(text: str, start: int) -> _Token:
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == quote:
            value = "".join(out)
            if "\x00" in value:  # PostgreSQL text cannot hold it
                raise QueryError(start, "a string must not contain NUL (\\u0000)")
            return _Token("string", text[start : i + 1], value, start, i + 1)
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1 : i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
        else:
            raise QueryError(
                i,
                f"unknown escape '\\{nxt}' in a string; use \\\\, \\\", \\', \\n, \\t, \\r "
                "or \\uXXXX",
            )
    raise QueryError(start, f"the string starting here is not closed; add a matching {quote}")


def _read_atom(text: str, start: int) -> _Token:
    m = _ATOM_CHARS.match(text, start)
    raw = m.group() if m else text[start]
    end = start + len(raw)
    if _NUMBER.fullmatch(raw):
        return _Token("number", raw, _number(raw, start), start, end)
    if raw.lower() in _KEYWORDS:
        return _Token("keyword", raw, raw.lower(), start, end)
    return _Token("word", raw, raw, start, end)


def _number(raw: str, start: int) -> int | float:
    """An integer within the signed 64-bit range both stores bind, or a finite float."""
    if not _INT.fullmatch(raw):
        number = float(raw)
        if not math.isfinite(number):
            raise QueryError(start, f"number {raw} is out of range; use a finite number")
        return number
    # int() of thousands of digits is slow (and past 4300 a ValueError): count them first.
    if len(raw.lstrip("+-")) > 19 or not MIN_INT64 <= int(raw) <= MAX_INT64:
        raise QueryError(
            start,
            f"integer {raw[:30]}{'...' if len(raw) > 30 else ''} is out of range: integers go "
            f"from {MIN_INT64} to {MAX_INT64} (write larger numbers as floats, e.g. 1e30)",
        )
    return int(raw)


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "(),":
            kind = {"(": "lparen", ")": "rparen", ",": "comma"}[c]
            tokens.append(_Token(kind, c, c, i, i + 1))
            i += 1
        elif c in "\"'":
            tokens.append(_read_string(text, i))
            i = tokens[-1].end
        elif _ATOM_CHARS.match(c):
            tokens.append(_read_atom(text, i))
            i = tokens[-1].end
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op is None:
                raise QueryError(i, _unexpected_char_detail(c))
            tokens.append(_Token("op", op, "==" if op == "=" else op, i, i + len(op)))
            i += len(op)
    tokens.append(_Token("eof", "", None, len(text), len(text)))
    return tokens


def _unexpected_char_detail(c: str) -> str:
    if c in "&|":
        return f"unexpected '{c}'; combine conditions with 'and' / 'or'"
    if c == "!":
        return "unexpected '!'; use 'not' to negate or '!=' to compare"
    return f'unexpected character {c!r}; quote values that contain it (e.g. "a{c}b")'


# ----------------------------------------------------------------------------- parser


def _describe(tok: _Token) -> str:
    if tok.kind == "eof":
        return "the end of the query"
    return f"'{tok.text}'"


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.depth = 0

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def advance(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def at_keyword(self, word: str) -> bool:
        tok = self.peek()
        return tok.kind == "keyword" and tok.value == word

    def nest(self, tok: _Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise QueryError(tok.pos, f"nested more than {MAX_DEPTH} levels deep; simplify it")

    def or_expr(self) -> Node:
        items = [self.and_expr()]
        while self.at_keyword("or"):
            self.advance()
            items.append(self.and_expr())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def and_expr(self) -> Node:
        items = [self.not_expr()]
        while self.at_keyword("and"):
            self.advance()
            items.append(self.not_expr())
        return items[0] if len(items) == 1 else And(tuple(items))

    def not_expr(self) -> Node:
        tok = self.peek()
        if self.at_keyword("not"):
            self.advance()
            self.nest(tok)
            node: Node = Not(self.not_expr())
            self.depth -= 1
            return node
        if tok.kind == "lparen":
            self.advance()
            self.nest(tok)
            node = self.or_expr()
            close = self.peek()
            if close.kind != "rparen":
                raise QueryError(
                    close.pos,
                    f"expected ')' to close the '(' at position {tok.pos}, got {_describe(close)}",
                )
            self.advance()
            self.depth -= 1
            return node
        return self.comparison()

    def comparison(self) -> Compare:
        field = self.field()
        op_tok = self.peek()
        if op_tok.kind == "op" or (op_tok.kind == "keyword" and op_tok.value in _OP_KEYWORDS):
            op = str(self.advance().value)
        elif field.kind == "attr" and field.name in _FLAG_ATTRS:
            return Compare(field, "==", True)
        else:
            raise QueryError(
                op_tok.pos,
                f"expected an operator after '{field}' (one of == != < <= > >= ~ like ilike "
                f"contains in exists), got {_describe(op_tok)}",
            )
        ops, kind, _ = _field_rules(field)
        if op not in ops:
            raise QueryError(op_tok.pos, _op_not_allowed(field, op))
        if op == "exists":
            return Compare(field, op, None)
        if op == "in":
            return Compare(field, op, self.value_list(field, kind))
        value_tok = self.peek()
        value = self.value(op, field, kind)
        if op == "~" and not isinstance(value, str):
            raise QueryError(
                value_tok.pos, "'~' matches a substring and needs a string (e.g. name ~ \"lr\")"
            )
        if op in _PATTERN_OPS and not isinstance(value, str):
            raise QueryError(
                value_tok.pos,
                f"'{op}' matches a pattern and needs a string (e.g. name {op} \"a%\")",
            )
        return Compare(field, op, value)

    def field(self) -> Field:
        tok = self.peek()
        if tok.kind != "word":
            raise QueryError(tok.pos, _expected_field_detail(tok))
        self.advance()
        return _make_field(tok, self)

    def value_list(self, field: Field, kind: str) -> tuple[Scalar, ...]:
        open_tok = self.peek()
        if open_tok.kind != "lparen":
            raise QueryError(
                open_tok.pos,
                f"expected '(' after 'in', got {_describe(open_tok)} "
                "(e.g. status in (failed, crashed))",
            )
        self.advance()
        values = [self.value("in", field, kind)]
        while self.peek().kind == "comma":
            self.advance()
            values.append(self.value("in", field, kind))
        close = self.peek()
        if close.kind != "rparen":
            raise QueryError(
                close.pos,
                f"expected ',' or ')' in the list opened at position {open_tok.pos}, "
                f"got {_describe(close)}",
            )
        self.advance()
        return tuple(values)

    def value(self, op: str, field: Field, kind: str) -> Scalar:
        tok = self.peek()
        if tok.kind not in ("number", "string", "word"):
            after = "in the list" if op == "in" else f"after '{op}'"
            raise QueryError(
                tok.pos,
                f'expected a value {after} (e.g. 0.9 or "adam"), got {_describe(tok)}',
            )
        self.advance()
        special = _NONFINITE_WORDS.get(tok.text.lower()) if tok.kind == "word" else None
        if kind == "number" and special is not None:  # metrics.loss == nan
            if op not in ("==", "!=", "in"):
                raise QueryError(
                    tok.pos, f"{tok.text} only works with == and != (e.g. {field} == nan)"
                )
            return special
        return _coerce(tok, field, kind)


_PREFIXES: dict[str, FieldKind] = {"config": "config", "metrics": "metrics", "params": "param",
                                   "tags": "tag"}  # fmt: skip


def _make_field(tok: _Token, parser: _Parser) -> Field:
    raw = tok.text
    for kind, field_kind in _PREFIXES.items():
        if raw.lower() == kind + "." or (raw.lower() == kind and kind not in ATTRIBUTES):
            nxt = parser.peek()
            if raw.endswith(".") and nxt.kind == "string" and nxt.pos == tok.end:
                parser.advance()
                key = str(nxt.value)
            else:
                raise QueryError(
                    tok.pos, f"expected a key after '{kind}.' (e.g. {kind}.lr or {kind}.\"a b\")"
                )
        elif raw.lower().startswith(kind + "."):
            key = raw[len(kind) + 1 :]
        else:
            continue
        if field_kind != "config":
            return Field(field_kind, (key,))
        parts = tuple(key.split("."))
        if any(p == "" for p in parts):
            raise QueryError(tok.pos, f"config key '{key}' has an empty part between dots")
        return Field("config", parts)
    if raw.lower() in ATTRIBUTES:
        return Field("attr", (raw.lower(),))
    raise QueryError(tok.pos, _unknown_field_detail(raw))


def _unknown_field_detail(raw: str) -> str:
    allowed = ", ".join(ATTRIBUTES)
    if "." in raw:
        return (
            f"unknown field '{raw}'; keys start with 'config.', 'metrics.', 'params.' or 'tags.' "
            f"(e.g. metrics.val/acc), other fields are: {allowed}"
        )
    close = get_close_matches(raw.lower(), ATTRIBUTES, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown field '{raw}'{hint}; use config.<key>, metrics.<key> or one of: {allowed}"


def _expected_field_detail(tok: _Token) -> str:
    if tok.kind == "eof":
        return "expected a condition (e.g. status == failed), got the end of the query"
    if tok.kind == "keyword" and tok.value in ("and", "or"):
        return f"expected a condition before '{tok.text}' (e.g. status == failed)"
    return (
        f"expected a field (config.<key>, metrics.<key> or one of: {', '.join(ATTRIBUTES)}), "
        f"got {_describe(tok)}"
    )


def _field_rules(field: Field) -> tuple[frozenset[str], str, str]:
    if field.kind == "config":
        return frozenset(_ALL_OPS), "any", "config.model.width >= 64"
    if field.kind == "metrics":
        return _ORDER_OPS | {"in", "exists"}, "number", "metrics.val/acc > 0.9"
    if field.kind in ("param", "tag"):
        prefix = "params" if field.kind == "param" else "tags"
        return _STRING_OPS | {"exists"}, "string", f'{prefix}.lr == "0.01"'
    return _ATTR_RULES[field.name]


def _op_not_allowed(field: Field, op: str) -> str:
    ops, _, example = _field_rules(field)
    allowed = " ".join(
        o
        for o in (
            "==",
            "!=",
            "<",
            "<=",
            ">",
            ">=",
            "~",
            "contains",
            "in",
            "like",
            "ilike",
            "exists",
        )
        if o in ops
    )
    return f"'{op}' cannot be used with {field}; it supports: {allowed} (e.g. {example})"


def _coerce(tok: _Token, field: Field, kind: str) -> Scalar:
    """Turn a value token into the value ``field`` compares with, or raise ``QueryError``."""
    word = tok.text.lower() if tok.kind == "word" else None
    if kind == "string":
        # ``project == 2024`` means the project named "2024"; ``host == null`` means no host.
        return None if word == "null" else (tok.text if tok.kind == "number" else tok.value)
    if word in ("true", "false", "null"):
        scalar: Scalar = None if word == "null" else word == "true"
    else:
        scalar = tok.value
    if kind == "number":
        if tok.kind != "number":
            raise QueryError(
                tok.pos, f"{field} compares with numbers (e.g. 0.9 or 1e-3), got {tok.text}"
            )
        return scalar
    if kind == "bool":
        if not isinstance(scalar, bool):
            raise QueryError(tok.pos, f"{field} compares with true or false, got {tok.text}")
        return scalar
    if kind == "duration":
        return _duration_value(tok)
    if kind == "date":
        return _date_value(tok, field.name)
    if field == _ID_FIELD:
        return _id_value(tok, scalar)
    return scalar


_ID_FIELD = Field("attr", ("id",))


def _id_value(tok: _Token, value: Scalar) -> int:
    """Run ids are integers within the id range of the store (see ``tracker.rules.ids``)."""
    if isinstance(value, str):  # id == "42" (a quoted id) is the id 42
        value = parse_id(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ID:
        return value
    raise QueryError(tok.pos, f"id compares with run ids (integers 0 to {MAX_ID}), got {tok.text}")


def _duration_value(tok: _Token) -> float | int:
    if tok.kind == "number":
        return tok.value  # type: ignore[return-value]
    if tok.kind == "word":
        try:
            return parse_duration(str(tok.value), allow_zero=True)
        except DurationError:
            pass
    raise QueryError(
        tok.pos,
        f"duration compares with seconds or a duration like 90s, 2h or 1h30m, got {tok.text}",
    )


def _date_value(tok: _Token, name: str = "created") -> str | int | float:
    if tok.kind == "number":
        return tok.value  # type: ignore[return-value]
    text = str(tok.value)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise QueryError(
            tok.pos,
            f"{name} compares with a date like 2024-05-01 or 2024-05-01T12:00 "
            f"(or unix seconds), got {tok.text}",
        ) from None
    try:  # the store compares unix seconds (naive dates are local time)
        when.timestamp()
    except (ValueError, OverflowError, OSError):
        raise QueryError(
            tok.pos, f"date {tok.text} is out of range: use a date from year 2 to 9998"
        ) from None
    return text


# --------------------------------------------------------------------------- public API


def parse_query(text: str) -> Node | None:
    """Parse a runs-filter query; an empty or blank query gives ``None`` (match all runs).

    Raises ``QueryError`` (with ``position``) for anything that does not parse: an unknown
    field, a missing value or operator, an unclosed string or parenthesis, an operator the
    field does not support, or a query longer than ``MAX_QUERY_LENGTH``.
    """
    if len(text) > MAX_QUERY_LENGTH:
        raise QueryError(
            MAX_QUERY_LENGTH, f"the query is longer than {MAX_QUERY_LENGTH} characters"
        )
    if not text.strip():
        return None
    parser = _Parser(_tokenize(text))
    node = parser.or_expr()
    tok = parser.peek()
    if tok.kind != "eof":
        if tok.kind == "rparen":
            detail = "unexpected ')' without a matching '('"
        else:
            detail = f"expected 'and', 'or' or the end of the query, got {_describe(tok)}"
        raise QueryError(tok.pos, detail)
    return node


def fields_used(node: Node | None) -> tuple[Field, ...]:
    """The distinct fields a query refers to, in order of first appearance."""
    seen: dict[Field, None] = {}
    stack: list[Node] = [] if node is None else [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Compare):
            seen.setdefault(current.field, None)
        elif isinstance(current, Not):
            stack.append(current.item)
        else:
            stack.extend(reversed(current.items))
    return tuple(seen)


def _format_scalar(value: Scalar) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


def format_query(node: Node | None) -> str:
    """Canonical text of a query tree; ``parse_query(format_query(t)) == t``."""
    if node is None:
        return ""
    if isinstance(node, Compare):
        if isinstance(node.value, tuple):
            value = "(" + ", ".join(_format_scalar(v) for v in node.value) + ")"
        else:
            value = _format_scalar(node.value)
        if node.op == "exists":
            return f"{node.field} exists"
        flag = node.field.kind == "attr" and node.field.name in _FLAG_ATTRS
        if flag and node.op == "==" and node.value is True:
            return node.field.name  # ``starred``, as written
        return f"{node.field} {node.op} {value}"
    if isinstance(node, Not):
        inner = format_query(node.item)
        return f"not ({inner})" if isinstance(node.item, (And, Or)) else f"not {inner}"
    joiner = " and " if isinstance(node, And) else " or "
    parts = []
    for item in node.items:
        text = format_query(item)
        # ``and`` binds tighter than ``or``; parenthesize nested groups so the tree is kept.
        parts.append(f"({text})" if isinstance(item, (And, Or)) else text)
    return joiner.join(parts)
