"""Config overrides and sweeps from the command line: pure functions, no I/O.

``-c key=value`` sets a (dotted, nested) config key. Values are read JSON-ish: ``64`` is an
int, ``3e-4`` and ``0.5`` are floats, ``nan``, ``inf`` and ``-inf`` are the float NaN and
infinities, ``true``/``false``/``null`` are what they say, ``"a,b"`` or ``'a,b'`` is a
quoted string, ``[1, 2]`` a list, ``{"a": 1}`` a JSON object, and anything else is a bare
string (``-c optimizer=adam``). An empty value (``-c lr=``) is refused (write ``-c
name=''`` for an empty string), and so is ``name(...)`` whose name is not a distribution
(``logunifrom(1e-5,1e-3)``: the error suggests the closest one); quote such a value to pass
it as a string.

A value with top-level commas is a list of choices: ``-c lr=1e-4,3e-4,1e-3 -c
model.width=64,128`` is a grid of 6 configs (the cartesian product, in the order the
overrides were given, the last one varying fastest). Quote a value to keep its commas.

Random search (``--random N``) draws every override per sample from a passed-in
``random.Random``: comma lists and ``choice(a, b, c)`` uniformly, ``uniform(low, high)``,
``loguniform(low, high)`` (log-uniform, ``0 < low < high``) and ``randint(low, high)``
(integers, both ends included).
"""

from __future__ import annotations

import copy
import difflib
import itertools
import json
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tracker.errors import InvalidInput

__all__ = [
    "DISTRIBUTIONS",
    "DISTRIBUTIONS_HELP",
    "MAX_CONFIGS",
    "Choices",
    "Distribution",
    "Override",
    "SweepSpecError",
    "expand_grid",
    "grid_configs",
    "parse_override",
    "parse_overrides",
    "parse_value",
    "sample_random",
    "set_path",
]

MAX_CONFIGS = 1000  # the most jobs one sweep makes: `tracker sweep` and the dashboard's grid

# name -> how it is written and what it draws (listed by `tracker sweep --help`).
DISTRIBUTIONS = {
    "choice": "choice(a, b, c): one of the values, uniformly (a comma list a,b,c is the same)",
    "uniform": "uniform(low, high): a float, uniform on [low, high]",
    "loguniform": "loguniform(low, high): a float, log-uniform on [low, high], 0 < low < high",
    "randint": "randint(low, high): an integer from low to high, both ends included",
}
DISTRIBUTIONS_HELP = (
    "\b\nDistributions for --random N (a grid takes comma lists only):\n"
    + "\n".join(f"  {text}" for text in DISTRIBUTIONS.values())
)


class SweepSpecError(InvalidInput):
    """An override or sweep that breaks a rule; the message names the ``-c`` it came from."""

    code = "invalid_sweep_spec"


class _Syntax(Exception):
    """Internal: a problem in a value, re-raised with the override it came from."""


@dataclass(frozen=True)
class Choices:
    """A fixed value (one choice) or a list of choices (grid axis / uniform draw)."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class Distribution:
    kind: Literal["uniform", "loguniform", "randint"]
    low: float
    high: float

    def sample(self, rng: random.Random) -> float | int:
        if self.kind == "randint":
            return rng.randint(int(self.low), int(self.high))
        if self.kind == "loguniform":
            return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return rng.uniform(self.low, self.high)


Spec = Choices | Distribution


@dataclass(frozen=True)
class Override:
    key: str
    spec: Spec
    text: str

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.key.split("."))


# ----------------------------------------------------------------------------- values

_INT = re.compile(r"-?(?:0|[1-9]\d*)")
# A float needs a point or an exponent: "007" stays a string, as it would in JSON.
_FLOAT = re.compile(r"-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)")
_KEY = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*")
_DIST = re.compile(r"(loguniform|uniform|randint|choice)\((.*)\)", re.DOTALL)
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)", re.DOTALL)
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
               "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf}  # fmt: skip
_CLOSERS = {"[": "]", "{": "}", "(": ")"}
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t"}


def _split_top(text: str) -> list[str]:
    """Split at commas outside quotes and brackets."""
    parts: list[str] = []
    stack: list[str] = []
    quote: str | None = None
    start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c in _CLOSERS:
            stack.append(_CLOSERS[c])
        elif c in "]})":
            if not stack or stack.pop() != c:
                raise _Syntax(f"unbalanced '{c}' at character {i}")
        elif c == "," and not stack:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    if quote:
        raise _Syntax(f"a string opened with {quote} is not closed")
    if stack:
        raise _Syntax(f"missing '{stack[-1]}'")
    parts.append(text[start:])
    return parts


def _unquote(s: str) -> str:
    quote = s[0]
    out: list[str] = []
    i = 1
    while i < len(s):
        c = s[i]
        if c == quote:
            if i != len(s) - 1:
                raise _Syntax(f"unexpected text after the closing {quote}: {s[i + 1 :]!r}")
            return "".join(out)
        if c == "\\":
            nxt = s[i + 1 : i + 2]
            if nxt not in _ESCAPES:
                raise _Syntax(f"unknown escape '\\{nxt}'; use \\\\, \\\", \\', \\n or \\t")
            out.append(_ESCAPES[nxt])
            i += 2
            continue
        out.append(c)
        i += 1
    raise _Syntax(f"a string opened with {quote} is not closed")


def _value(text: str) -> Any:
    s = text.strip()
    if not s:
        return ""
    if s[0] in "\"'":
        return _unquote(s)
    if s[0] == "[":
        if not s.endswith("]"):
            raise _Syntax(f"list {s!r} must end with ']'")
        inner = s[1:-1]
        return [] if not inner.strip() else [_value(p) for p in _split_top(inner)]
    if s[0] == "{":
        try:
            return json.loads(s)
        except json.JSONDecodeError as exc:
            raise _Syntax(f"{s!r} is not a JSON object: {exc.msg}") from None
    lowered = s.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none"):
        return None
    if lowered in _NON_FINITE:
        return _NON_FINITE[lowered]
    if _INT.fullmatch(s):
        return int(s)
    if _FLOAT.fullmatch(s):
        number = float(s)
        if not math.isfinite(number):
            raise _Syntax(f"number {s} is out of range (configs are stored as JSON)")
        return number
    return s


def parse_value(text: str) -> Any:
    """Read one JSON-ish value (see the module docstring); a comma list is not split here.

    Raises ``SweepSpecError`` for an unclosed quote or bracket, an unknown escape, or an
    invalid JSON object.
    """
    try:
        return _value(text)
    except _Syntax as exc:
        raise SweepSpecError(f"value {text!r}: {exc}", field="value") from None


# -------------------------------------------------------------------------- overrides


def _number_args(name: str, args: list[Any], rule: str) -> tuple[float, float]:
    numbers = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
    if len(args) != 2 or len(numbers) != 2:
        raise _Syntax(f"{name} takes two numbers: {name}(low, high); {rule}")
    low, high = numbers
    if not (math.isfinite(low) and math.isfinite(high)):
        raise _Syntax(f"{name} needs finite numbers; {rule}")
    return low, high


def _distribution(name: str, raw_args: str) -> Spec:
    args = [_value(a) for a in _split_top(raw_args)] if raw_args.strip() else []
    if name == "choice":
        if not args:
            raise _Syntax("choice needs at least one value: choice(a, b, c)")
        return Choices(tuple(args))
    if name == "loguniform":
        low, high = _number_args(name, args, "loguniform needs 0 < low < high")
        if not 0 < low < high:
            raise _Syntax("loguniform needs 0 < low < high")
        return Distribution("loguniform", low, high)
    if name == "uniform":
        low, high = _number_args(name, args, "uniform needs low < high")
        if not low < high:
            raise _Syntax("uniform needs low < high")
        return Distribution("uniform", low, high)
    low, high = _number_args(name, args, "randint needs integers low <= high")
    if not (isinstance(low, int) and isinstance(high, int) and low <= high):
        raise _Syntax("randint needs integers low <= high (both ends are included)")
    return Distribution("randint", low, high)


def _spec(raw: str) -> Spec:
    m = _DIST.fullmatch(raw.strip())
    if m:
        return _distribution(m.group(1), m.group(2))
    call = _CALL.fullmatch(raw.strip())
    if call:
        raise _Syntax(_unknown_distribution(call.group(1)))
    parts = _split_top(raw)
    if len(parts) == 1:
        return Choices((_value(raw),))
    if any(not p.strip() for p in parts):
        raise _Syntax("a comma list has an empty entry; quote the value to keep its commas")
    return Choices(tuple(_value(p) for p in parts))


def _unknown_distribution(name: str) -> str:
    close = difflib.get_close_matches(name.lower(), DISTRIBUTIONS, n=1, cutoff=0.6)
    guess = f"did you mean {close[0]}(...)? " if close else ""
    names = ", ".join(f"{n}(...)" for n in DISTRIBUTIONS)
    return (
        f"unknown distribution '{name}': {guess}the distributions are {names}; "
        "quote the value to pass it as a string"
    )


def parse_override(text: str) -> Override:
    """Parse one ``key=value`` override (the value may be a comma list or a distribution).

    Raises ``SweepSpecError`` naming the override: no ``=``, a malformed dotted key, a bad
    value, or a distribution whose arguments break its rule.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SweepSpecError(
            f"-c {text}: expected key=value (e.g. -c lr=3e-4 or -c model.width=64)", field="config"
        )
    if not _KEY.fullmatch(key):
        raise SweepSpecError(
            f"-c {text}: key '{key}' must be dotted names of letters, digits, '_' and '-' "
            "with no empty part (e.g. model.width)",
            field="config",
        )
    if not raw.strip():
        raise SweepSpecError(
            f"-c {text}: the value is empty: give one (-c {key}=VALUE), or write -c {key}='' "
            "for an empty string",
            field="config",
        )
    try:
        return Override(key=key, spec=_spec(raw), text=text)
    except _Syntax as exc:
        raise SweepSpecError(f"-c {text}: {exc}", field="config") from None


def parse_overrides(texts: Sequence[str]) -> tuple[Override, ...]:
    """Parse several overrides; a key may be given once and not together with a key inside it.

    Raises ``SweepSpecError`` as ``parse_override`` does, or naming both conflicting
    overrides (``-c lr=1 -c lr=2``; ``-c model=small -c model.width=64``).
    """
    result: list[Override] = []
    for text in texts:
        new = parse_override(text)
        for old in result:
            shorter, longer = sorted((old.path, new.path), key=len)
            if longer[: len(shorter)] == shorter:
                problem = (
                    f"key '{new.key}' is given twice"
                    if old.path == new.path
                    else f"'{'.'.join(shorter)}' is set and a key inside it is set too"
                )
                raise SweepSpecError(
                    f"-c {new.text}: conflicts with -c {old.text}: {problem}", field="config"
                )
        result.append(new)
    return tuple(result)


def set_path(config: Mapping[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``config`` with the dotted ``key`` set to ``value``; ``config`` is unchanged.

    The one rule for dotted keys: the CLI's ``-c``, the dashboard's grid (``grid_configs``)
    and the dashboard's editor (``setPath`` in ``web/static/clone.js`` mirrors it) all set
    keys this way.

    Missing intermediate mappings are created, and so is one in place of a ``None``.
    Raises ``SweepSpecError`` when ``key`` has an empty part or an intermediate value is
    neither a mapping nor ``None`` (``model.width`` when ``model`` is ``"resnet"``).
    """
    parts = key.split(".")
    if any(not p for p in parts):
        raise SweepSpecError(f"key '{key}': a dotted key must not have an empty part", field=key)
    root = dict(config)
    node = root
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = {}
        elif isinstance(child, Mapping):
            child = dict(child)
        else:
            prefix = ".".join(parts[: depth + 1])
            raise SweepSpecError(
                f"key '{key}': cannot set it because '{prefix}' is {child!r}, not a mapping",
                field=key,
            )
        node[part] = child
        node = child
    node[parts[-1]] = value
    return root


def _apply(base: Mapping[str, Any], keys: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
    config: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in zip(keys, values, strict=True):
        config = set_path(config, key, copy.deepcopy(value))
    return config


def expand_grid(
    base: Mapping[str, Any], overrides: Sequence[Override], *, max_configs: int = MAX_CONFIGS
) -> list[dict[str, Any]]:
    """Every combination of the overrides' choices applied to ``base``, in a fixed order.

    Raises ``SweepSpecError`` when an override is a distribution (that needs random search),
    when the grid has more than ``max_configs`` configs, or as ``set_path`` does.
    """
    for o in overrides:
        if isinstance(o.spec, Distribution):
            raise SweepSpecError(
                f"-c {o.text}: a {o.spec.kind} distribution needs random search (--random N); "
                "a grid takes comma lists (e.g. -c lr=1e-4,3e-4)"
            )
    axes = [o.spec.values for o in overrides if isinstance(o.spec, Choices)]
    size = math.prod(len(a) for a in axes)
    if size > max_configs:
        raise SweepSpecError(
            f"the grid has {size} configs, more than the limit of {max_configs}; "
            "use fewer values or --random N"
        )
    keys = [o.key for o in overrides]
    return [_apply(base, keys, combo) for combo in itertools.product(*axes)]


def grid_configs(
    base: Mapping[str, Any], grid: Any, *, max_configs: int = MAX_CONFIGS
) -> list[dict[str, Any]]:
    """Every combination of a ``{dotted key: [values]}`` grid (the dashboard's sweep) applied
    to ``base`` with ``set_path``, the last key varying fastest.

    Raises ``SweepSpecError`` (field ``grid``) when ``grid`` is not a mapping of keys to
    non-empty lists, makes more than ``max_configs`` configs, or a key breaks ``set_path``.
    """
    if not (
        isinstance(grid, Mapping)
        and grid
        and all(isinstance(k, str) and isinstance(v, list) and v for k, v in grid.items())
    ):
        raise SweepSpecError(
            'grid must map config keys to non-empty lists, e.g. {"lr": [0.1, 0.01]}',
            field="grid",
        )
    size = math.prod(len(v) for v in grid.values())
    if size > max_configs:
        raise SweepSpecError(
            f"the grid makes {size} configs, more than the limit of {max_configs}", field="grid"
        )
    keys = list(grid)
    try:
        return [_apply(base, keys, combo) for combo in itertools.product(*grid.values())]
    except SweepSpecError as exc:
        raise SweepSpecError(f"grid: {exc.message}", field="grid") from exc


def sample_random(
    base: Mapping[str, Any],
    overrides: Sequence[Override],
    n: int,
    rng: random.Random,
    *,
    max_configs: int = MAX_CONFIGS,
) -> list[dict[str, Any]]:
    """``n`` configs, each drawing every override from ``rng`` in override order.

    Fixed values (one choice) take no draw, so adding one does not change the others'
    samples. Raises ``SweepSpecError`` unless ``1 <= n <= max_configs``, or as ``set_path``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= max_configs:
        raise SweepSpecError(
            f"--random {n!r}: the number of samples must be an integer from 1 to {max_configs}",
            field="random",
        )
    keys = [o.key for o in overrides]
    configs = []
    for _ in range(n):
        values = [_draw(o.spec, rng) for o in overrides]
        configs.append(_apply(base, keys, values))
    return configs


def _draw(spec: Spec, rng: random.Random) -> Any:
    if isinstance(spec, Distribution):
        return spec.sample(rng)
    if len(spec.values) == 1:
        return spec.values[0]
    return rng.choice(spec.values)
