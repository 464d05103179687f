"""Parsing of URLs, query strings and JSON bodies for the views: every bad value becomes an
``InvalidInput`` that names the parameter, its problem and the rule (-> 400 envelope).

Ids in URL paths go through :class:`IdConverter` (the app's ``int`` converter): ASCII digits
within the store's id range, anything else matches no route (-> 404), so no id reaches the
database as a driver error. JSON bodies are bounded while they are inflated (see
:func:`json_body`).
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

from flask import current_app, request
from werkzeug.exceptions import NotFound
from werkzeug.routing import IntegerConverter

from tracker.errors import InvalidInput
from tracker.rules.ids import MAX_ID, ascii_int, in_int64, parse_id
from tracker.web.plumbing.errors import PayloadTooLarge

__all__ = [
    "IdConverter",
    "bool_arg",
    "int_arg",
    "int_list_arg",
    "json_body",
    "list_arg",
    "optional_int_arg",
]


class IdConverter(IntegerConverter):
    """``<int:...>`` in a route: ASCII digits (``\\d`` would take any Unicode digit) within
    ``0..MAX_ID``. A larger number is a 404 envelope that says so, raised here: a
    ``ValidationError`` would let werkzeug answer 405 when another method's rule has the
    same path."""

    regex = r"[0-9]+"

    def to_python(self, value: str) -> int:
        number = parse_id(value) if len(value) <= 19 else None
        if number is None:
            raise NotFound(f"id {value[:40]} is out of range: ids go from 0 to {MAX_ID}")
        return number


def int_arg(name: str, default: int, lo: int, hi: int) -> int:
    """An integer query parameter within ``[lo, hi]`` (``default`` when absent)."""
    value = optional_int_arg(name)
    if value is None:
        return default
    if not lo <= value <= hi:
        raise InvalidInput(f"{name}={value} is out of range: use {lo} to {hi}", field=name)
    return value


def optional_int_arg(name: str) -> int | None:
    """An integer query parameter in ASCII decimal (``None`` when absent).

    Raises:
        InvalidInput: not an integer, or past the signed 64-bit range.
    """
    raw = request.args.get(name)
    if raw is None or raw == "":
        return None
    value = ascii_int(raw)
    if value is None:
        raise InvalidInput(f"{name}={raw[:50]!r} is not an integer", field=name)
    if not in_int64(value):
        raise InvalidInput(f"{name}={raw[:50]} is out of the signed 64-bit range", field=name)
    return value


def bool_arg(name: str, default: bool = False) -> bool:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise InvalidInput(f"{name}={raw[:50]!r} is not a boolean: use 1/0 or true/false", field=name)


def list_arg(name: str, *, split: bool = True) -> list[str]:
    """A list parameter: repeated (``?k=a&k=b``) and/or comma-separated (``?k=a,b``)."""
    out: list[str] = []
    for raw in request.args.getlist(name):
        parts = raw.split(",") if split else [raw]
        out.extend(p.strip() for p in parts if p.strip())
    return out


def int_list_arg(name: str, *, limit: int) -> list[int]:
    """A list of ids (see :func:`list_arg`), each ASCII digits within ``0..MAX_ID``.

    Raises:
        InvalidInput: a value that is no id, or more than ``limit`` of them.
    """
    values = list_arg(name)
    if len(values) > limit:
        raise InvalidInput(f"{name} has {len(values)} ids; at most {limit} are allowed", field=name)
    ids = [parse_id(v) for v in values]
    if None in ids:
        raise InvalidInput(
            f"{name} must be a comma-separated list of ids (integers 0 to {MAX_ID})", field=name
        )
    return list(dict.fromkeys(i for i in ids if i is not None))


INFLATE_CHUNK = 1024 * 1024  # bytes of output per inflate step: the limit is checked per step


def _inflate(data: bytes, limit: int) -> bytearray:
    """The gzip ``data`` inflated, stopping as soon as the output passes ``limit`` bytes: a
    small body that inflates to gigabytes costs at most ``limit + INFLATE_CHUNK`` bytes and
    the time to inflate that much (zlib releases the GIL meanwhile).

    Raises:
        PayloadTooLarge: the output passes ``limit``.
        InvalidInput: corrupt or truncated gzip, or bytes after its end.
    """
    inflater = zlib.decompressobj(wbits=31)  # one gzip member
    out = bytearray()
    pending = data
    try:
        while True:
            chunk = inflater.decompress(pending, INFLATE_CHUNK)
            out += chunk
            if len(out) > limit:
                raise PayloadTooLarge(
                    f"the body inflates to more than {limit} bytes; send smaller batches",
                    field="body",
                )
            pending = inflater.unconsumed_tail
            if inflater.eof or (not chunk and not pending):
                break
    except zlib.error as exc:
        raise InvalidInput(f"the gzip body is corrupt: {exc}", field="body") from None
    if not inflater.eof:
        raise InvalidInput("the gzip body is truncated", field="body")
    if inflater.unused_data:
        raise InvalidInput("the gzip body has data after its end", field="body")
    return out


def json_body() -> dict[str, Any]:
    """The request's JSON object (gunzipped when ``Content-Encoding: gzip``); ``{}`` if empty.

    The body is read whole (at most ``MAX_CONTENT_LENGTH`` bytes, else werkzeug's 413) and
    inflated at most to ``MAX_INFLATED_BYTES``, so the JSON parse is bounded too.

    Raises:
        InvalidInput: not valid JSON, or not a JSON object.
        PayloadTooLarge: the body is, or inflates to, more than ``MAX_INFLATED_BYTES``.
    """
    limit = current_app.config["MAX_INFLATED_BYTES"]
    raw = request.get_data(cache=True)
    data: bytes | bytearray = raw
    if request.headers.get("Content-Encoding", "").strip().lower() == "gzip":
        data = _inflate(raw, limit)
    elif len(data) > limit:
        raise PayloadTooLarge(f"the body has more than {limit} bytes", field="body")
    if not data.strip():
        return {}
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the body is not valid JSON: {exc}", field="body") from None
    if not isinstance(doc, dict):
        raise InvalidInput(
            f"the body must be a JSON object, not a {type(doc).__name__}", field="body"
        )
    if _SURROGATE_ESCAPE.search(data):  # rare: only then is the whole document walked
        _refuse_lone_surrogates(doc, "body")
    return doc


# A \uD800-\uDFFF escape: half of a UTF-16 pair, which JSON allows and UTF-8 cannot store.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _refuse_lone_surrogates(value: Any, where: str) -> None:
    """Raises InvalidInput naming the first string (or key) in ``value`` that holds a lone
    surrogate: no database stores it (a pair escaped as two ``\\u`` halves is one character
    and fine)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                f"{where} holds a lone UTF-16 surrogate (an unpaired \\uD800-\\uDFFF escape), "
                "which is not a character: send the text as UTF-8",
                field=where,
            ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_lone_surrogates(key, where)
            _refuse_lone_surrogates(item, f"{where}.{key}" if where != "body" else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_lone_surrogates(item, f"{where}[{i}]")
