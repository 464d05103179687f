"""The body of ``POST /api/v1/jobs`` read into job specs (pure: no Flask).

A body holds :class:`tracker.entities.JobSpec` fields under their own names (``argv``,
``project``, ``cwd``, ``project_root``, ``config``, ``priority``, ``gpus``, ...,
``snapshot_id``) and optionally ``configs``, a list of configs: one job each, the other
fields shared (a sweep). Each field is checked for its JSON type here, naming the field;
the rules of every enqueue (``tracker.store.jobs.check_spec``: ranges, env names, the
``sbatch`` allow-list, the ``fail_on`` policy, the config's values) run when the jobs are
queued. Fields a submitter never sets (``schedule_id``, ``parent_job_id``, ``not_before``)
and any other key are refused, naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.entities import JobSpec
from tracker.errors import InvalidInput
from tracker.rules.sweep import MAX_CONFIGS
from tracker.web.core.fields import body_field, check_text

__all__ = ["JOB_FIELDS", "specs_from_body"]

# field -> (JSON type, default when absent or null)
JOB_FIELDS: dict[str, tuple[type | tuple[type, ...], Any]] = {
    "argv": (list, None),
    "project": (str, "default"),
    "cwd": (str, None),
    "project_root": (str, None),
    "config": (dict, None),
    "priority": (int, 0),
    "gpus": (int, 0),
    "gpu_memory_bytes": (int, None),
    "timeout_s": (float, None),  # an integer is a number too
    "max_retries": (int, 0),
    "retry_on_failure": (bool, False),
    "env": (dict, None),
    "nproc_per_node": (int, None),
    "name": (str, None),
    "tags": (list, None),
    "cpus": (int, None),
    "memory_bytes": (int, None),
    "sbatch": (list, None),
    "fail_on": (str, "errors"),
    "snapshot_id": (int, None),
}


def _strings(name: str, values: list[Any]) -> tuple[str, ...]:
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise InvalidInput(
                f"{name}[{i}] must be a string, not {type(value).__name__}", field=name
            )
    return tuple(values)


def _configs(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    configs = body_field(body, "configs", list)
    if configs is None:
        return None
    if "config" in body and body["config"] is not None:
        raise InvalidInput(
            "give config (one job) or configs (one job per config), not both", field="configs"
        )
    if not configs:
        raise InvalidInput("configs is empty: give at least one config", field="configs")
    if len(configs) > MAX_CONFIGS:
        raise InvalidInput(
            f"configs has {len(configs)} configs; at most {MAX_CONFIGS} jobs are queued at "
            "once (the limit of tracker sweep)",
            field="configs",
        )
    for i, config in enumerate(configs):
        if not isinstance(config, dict):
            raise InvalidInput(
                f"configs[{i}] must be an object, not {type(config).__name__}", field="configs"
            )
    return configs


def specs_from_body(body: Mapping[str, Any]) -> tuple[list[JobSpec], bool]:
    """The specs a body asks for, and whether it asked with ``configs`` (a list of jobs).

    Raises:
        InvalidInput (400): an unknown key (named), a field of the wrong JSON type (named,
            with the type it needs), a NUL or unpaired surrogate in any text, no ``argv``,
            ``config`` and ``configs`` together, an empty or too long ``configs``.
    """
    for key in body:
        if key not in JOB_FIELDS and key != "configs":
            known = ", ".join([*JOB_FIELDS, "configs"])
            raise InvalidInput(
                f"unknown field {str(key)[:100]!r}: a job takes {known}", field=str(key)[:100]
            )
    values = {
        name: body_field(body, name, kind, default=default, required=name == "argv")
        for name, (kind, default) in JOB_FIELDS.items()
    }
    for name in (*JOB_FIELDS, "configs"):
        check_text(body.get(name), name)
    values["argv"] = list(_strings("argv", values["argv"]))
    values["tags"] = _strings("tags", values["tags"] or [])
    values["sbatch"] = _strings("sbatch", values["sbatch"] or [])
    values["config"] = values["config"] or {}
    values["env"] = values["env"] or {}
    configs = _configs(body)
    if configs is None:
        return [JobSpec(**values)], False
    return [JobSpec(**{**values, "config": config}) for config in configs], True
