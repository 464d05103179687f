"""Fields of a JSON body checked by type, with errors that name the field (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.errors import InvalidInput

__all__ = ["LAUNCH_FIELDS", "body_field", "check_text", "clone_edits", "config_types"]

_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", dict: "an object",
               list: "a list", bool: "true or false"}  # fmt: skip


def body_field(
    body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, required: bool = False,
    default: Any = None,
) -> Any:  # fmt: skip
    """``body[name]`` checked against ``kind`` (bool is never accepted as a number)."""
    if name not in body or body[name] is None:
        if required:
            raise InvalidInput(f"{name} is required", field=name)
        return default
    value = body[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        wanted = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
        raise InvalidInput(f"{name} must be {wanted}, not {type(value).__name__}", field=name)
    return value


def _bad_text(text: str) -> str | None:
    if "\x00" in text:
        return "a NUL character (\\u0000), which stored text cannot hold"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "an unpaired surrogate (\\ud800-\\udfff), which is not Unicode text"
    return None


def check_text(value: Any, field: str) -> None:
    """Refuse a string of ``value`` (keys included, at any depth) that no stored text may
    hold: a NUL character (PostgreSQL text cannot hold it; no name, path or command has one)
    or an unpaired surrogate (JSON's ``\\ud800`` escape; no encoding can write it).

    Raises:
        InvalidInput (400): naming ``field`` and the character.
    """
    if isinstance(value, str):
        bad = _bad_text(value)
        if bad is not None:
            raise InvalidInput(f"{field} holds {bad}", field=field)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_text(key, field)
            check_text(item, field)
    elif isinstance(value, list | tuple):
        for item in value:
            check_text(item, field)


# What a worker executes: set only by a trusted submitter (``tracker submit``), never by a
# clone or a schedule made over HTTP.
LAUNCH_FIELDS = ("argv", "command", "cwd", "project_root", "env")


def clone_edits(body: Mapping[str, Any]) -> dict[str, Any]:
    """The edits a clone or a schedule may make to the job it copies: ``config``, ``grid``,
    ``priority`` and ``fail_on`` (checked further by ``tracker.store.clone.clone_specs``).

    Raises:
        InvalidInput (400): the body tries to set the argv, command, cwd, project root or env.
    """
    for name in LAUNCH_FIELDS:
        if name in body:
            raise InvalidInput(
                f"{name} cannot be set here: a copy keeps the argv, cwd, project root and env "
                "of the job it copies; to run something else, submit it with `tracker submit`",
                field=name,
            )
    return {name: body.get(name) for name in ("config", "grid", "priority", "fail_on")}


def _type_name(value: Any) -> Any:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return config_types(value) if value else "object"
    return type(value).__name__


def config_types(config: Mapping[str, Any]) -> dict[str, Any]:
    """The Python type of every value of ``config``, nested as the config is: each leaf is
    ``int``, ``float``, ``boolean``, ``string``, ``null``, ``list`` or ``object`` (an empty
    mapping). JSON drops the difference between ``0.0`` and ``0`` once a browser parses it,
    so the clone editor reads a key's type from here: a float stays a float (``1e-4`` is
    accepted where the source had ``0.0``) and is sent back as a float."""
    return {str(key): _type_name(value) for key, value in config.items()}
