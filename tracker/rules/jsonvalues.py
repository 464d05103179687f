"""NaN and ±Inf in JSON: the one wire form, written and read here (pure, no I/O).

JSON has no NaN or infinities, yet metric values keep them (a diverged loss is data). Every
JSON the tracker writes -- the HTTP sink's requests, the dashboard's API answers, the CLI's
``--json`` -- and every JSON it reads follows this contract:

* a finite float is a JSON number;
* NaN is the string ``"NaN"``, +Inf ``"Infinity"``, -Inf ``"-Infinity"`` (JavaScript's
  ``String(NaN)`` and ``String(Infinity)``, so the pages show and parse them directly);
* readers also take the spellings ``"nan"``, ``"inf"``, ``"+Infinity"`` and ``"-inf"``, and
  where a metric value is expected, ``null`` for NaN (the store keeps NaN as SQL NULL).

Only values are converted: a string is never turned into a number by :func:`encode`, and a
reader decodes a string with :func:`decode_special` only where a number is expected (a run
named ``"NaN"`` stays a name). The browser side mirrors this contract in
``web/static/common.js`` (``fmtValue``).

Python's ``json`` would write bare ``NaN``/``Infinity`` tokens, which browsers' ``JSON.parse``
and many other readers reject; :func:`dumps` never does (``allow_nan=False``), and it only walks
the value when the fast path meets a non-finite float. Nothing here raises for a float; a
value ``json`` cannot encode raises ``TypeError`` from :func:`dumps` as usual.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

__all__ = ["NAN", "NEG_INF", "POS_INF", "decode_special", "dumps", "encode", "encode_float"]

NAN = "NaN"
POS_INF = "Infinity"
NEG_INF = "-Infinity"

_SPECIAL = {
    NAN: math.nan, "nan": math.nan,
    POS_INF: math.inf, "+Infinity": math.inf, "inf": math.inf,
    NEG_INF: -math.inf, "-inf": -math.inf,
}  # fmt: skip


def encode_float(value: float) -> float | str:
    """A float in the wire form: itself when finite, else "NaN", "Infinity" or "-Infinity"."""
    if math.isfinite(value):
        return value
    return NAN if math.isnan(value) else (POS_INF if value > 0 else NEG_INF)


def encode(value: Any) -> Any:
    """A copy of ``value`` in which every non-finite float has its wire form.

    Walks dicts (keys kept), lists, tuples (as lists) and dataclass instances (as dicts of
    their fields); anything else is returned as it is.
    """
    if isinstance(value, float):
        return encode_float(value)
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that writes NaN and ±Inf in their wire form (never bare tokens).

    ``kwargs`` go to ``json.dumps`` (``allow_nan`` is always false). Raises ``TypeError`` for
    a value ``json`` cannot encode, as ``json.dumps`` does.
    """
    kwargs["allow_nan"] = False
    try:
        return json.dumps(value, **kwargs)
    except ValueError:  # a non-finite float somewhere: the slow path converts it
        return json.dumps(encode(value), **kwargs)


def decode_special(text: str) -> float | None:
    """NaN or ±Inf for one of their wire spellings; ``None`` for any other string."""
    return _SPECIAL.get(text)
