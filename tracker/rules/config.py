"""Run configs: make them JSON-safe with clear errors, merge job overrides, flatten nested
keys to dotted ones (pure)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from tracker.errors import InvalidInput


def normalize_config(config: Any, path: str = "config") -> Any:
    """Return a JSON-safe copy: dicts with str keys, lists, str, bool, int, finite float, None.

    Accepts mappings, dataclass instances, ``argparse.Namespace``, tuples and numpy scalars.

    Raises:
        InvalidInput: naming the dotted path of the first value that cannot be stored.
    """
    if config is None or isinstance(config, str | bool | int):
        return config
    if isinstance(config, float):
        if not math.isfinite(config):
            raise InvalidInput(
                f"{path} is {config}: config values must be finite numbers", field=path
            )
        return config
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    elif type(config).__name__ == "Namespace":
        config = vars(config)
    if isinstance(config, Mapping):
        out = {}
        for key, value in config.items():
            if not isinstance(key, str):
                raise InvalidInput(
                    f"{path} has a key {key!r} of type {type(key).__name__}: keys must be str",
                    field=path,
                )
            out[key] = normalize_config(value, f"{path}.{key}")
        return out
    if isinstance(config, list | tuple):
        return [normalize_config(v, f"{path}[{i}]") for i, v in enumerate(config)]
    if type(config).__module__.startswith("numpy") and hasattr(config, "item"):
        return normalize_config(config.item(), path)
    raise InvalidInput(
        f"{path} is a {type(config).__name__}: config values must be JSON-like "
        "(dict, list, str, int, float, bool, None)",
        field=path,
    )


def merge_config(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge ``overrides`` into ``base``: nested dicts merge, everything else replaces."""
    out = dict(base)
    for key, value in overrides.items():
        current = out.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            out[key] = merge_config(current, value)
        else:
            out[key] = value
    return out


class ConfigFlattenError(InvalidInput):
    """A config that cannot be flattened unambiguously (two entries, one dotted key)."""

    code = "invalid_config"


def flatten(config: Mapping[Any, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys: ``{"model": {"width": 64}}`` -> ``{"model.width": 64}``.

    The one flattening of the runs table's config columns, the config comparison, the CLI's
    config summary and the MLflow params. Lists and other non-mapping values are leaves; an
    empty mapping is a leaf ``{}`` (a copy), so the key is not lost; a non-``str`` key is
    written with ``str()``.

    Raises:
        ConfigFlattenError: two entries flatten to the same dotted key (for example
            ``{"a.b": 1, "a": {"b": 2}}``); the error names that key. Keeping either value
            would hide the other.
    """
    out: dict[str, Any] = {}
    _flatten_into(config, prefix, out)
    return out


def _flatten_into(config: Mapping[Any, Any], prefix: str, out: dict[str, Any]) -> None:
    for raw_key, value in config.items():
        key = f"{prefix}{raw_key}"
        if isinstance(value, Mapping) and value:
            _flatten_into(value, key + ".", out)
            continue
        if key in out:
            raise ConfigFlattenError(
                f"config key '{key}': two entries flatten to the same dotted key; a key that "
                "contains '.' must not also exist as a nested key",
                field=key,
            )
        out[key] = dict(value) if isinstance(value, Mapping) else value
