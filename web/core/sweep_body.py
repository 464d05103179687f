"""The body of ``POST /api/v1/sweeps`` read into what :func:`tracker.store.sweep_views.create_from`
takes (pure: no Flask, no store).

A sweep copies a submitted job as a clone does (``job_id`` or ``run_id``), so, as for a clone,
the body may edit ``config``, ``priority`` and ``fail_on`` only, never the argv, cwd or env
(:func:`tracker.web.core.fields.clone_edits`). Or it gives the trials' job in full under
``job``: the body of ``POST /api/v1/jobs`` (read by :mod:`tracker.web.core.job_body`, one job,
``snapshot_id`` included; ``tracker sweep --method ... --uri http://...`` sends it), the
launch a trusted submitter with an ``admin`` token may ask for there too; then ``config``,
``priority`` and ``fail_on`` belong inside it. The search is ``overrides`` (the ``-c`` texts
of ``tracker sweep``: ``"lr=loguniform(1e-5,1e-1)"``, ``"width=64,128"``) and the settings of
:class:`tracker.rules.sweep_search.SweepSettings` under their own names.

Raises InvalidInput (400) naming the field: a missing or doubled source (``job``), a field of
the wrong type, an unknown field (in ``job`` too, as ``POST /jobs`` names it), a NUL or lone
surrogate in a text, ``configs`` in ``job`` or a clone edit beside it; the rules of the
settings, the overrides and the job (``snapshot_id`` included) are checked by the store's
``create_sweep`` (``SweepSpecError``, naming the field).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tracker.entities import JobSpec
from tracker.errors import InvalidInput
from tracker.rules.sweep_search import SweepSettings
from tracker.web.core.fields import body_field, check_text, clone_edits
from tracker.web.core.job_body import specs_from_body

__all__ = ["MAX_OVERRIDES", "SweepRequest", "sweep_request"]

MAX_OVERRIDES = 100  # searched or fixed keys of one sweep
_SETTINGS = {"method": str, "metric": str, "goal": str, "objective": str, "prune": str,
             "trials": int, "parallel": int, "seed": int}  # fmt: skip
_KNOWN = {"job", "job_id", "run_id", "overrides", "name", "config", "priority", "fail_on",
          *_SETTINGS}  # fmt: skip


@dataclass(frozen=True)
class SweepRequest:
    """What one ``POST /api/v1/sweeps`` asks for."""

    source: tuple[Literal["job", "run"], int] | JobSpec  # a copied job or run, or a new job
    overrides: list[str]
    settings: SweepSettings
    name: str | None
    edits: dict[str, Any]  # config, priority, fail_on (None: the source's own; {} for a job)


def _source(body: Mapping[str, Any]) -> tuple[Literal["job", "run"], int] | JobSpec:
    given = [name for name in ("job", "job_id", "run_id") if body.get(name) is not None]
    if len(given) != 1:
        raise InvalidInput(
            "give exactly one of job (a job spec, as POST /jobs takes), job_id or run_id: the "
            f"job the trials run{' (given: ' + ', '.join(given) + ')' if given else ''}",
            field="job" if "job" in given else "job_id",
        )
    if given == ["job"]:
        return _job(body)
    if given == ["job_id"]:
        return "job", body_field(body, "job_id", int)
    return "run", body_field(body, "run_id", int)


def _job(body: Mapping[str, Any]) -> JobSpec:
    job = body_field(body, "job", dict)
    if "configs" in job:
        raise InvalidInput(
            "job.configs: a sweep's trials take their configs from its overrides; give the "
            "job's base config as job.config",
            field="configs",
        )
    for name in ("config", "priority", "fail_on"):  # a clone's edits: the job holds them
        if body.get(name) is not None:
            raise InvalidInput(
                f"{name} goes inside job here (the trials' job spec), not beside it", field=name
            )
    (spec,), _ = specs_from_body(job)
    return spec


def _overrides(body: Mapping[str, Any]) -> list[str]:
    found = body_field(body, "overrides", list, required=True)
    if not found:
        raise InvalidInput(
            'overrides: give at least one key to search, e.g. "lr=loguniform(1e-5,1e-1)"',
            field="overrides",
        )
    if len(found) > MAX_OVERRIDES:
        raise InvalidInput(f"overrides: at most {MAX_OVERRIDES}, not {len(found)}",
                           field="overrides")  # fmt: skip
    for i, text in enumerate(found):
        if not isinstance(text, str):
            raise InvalidInput(
                f'overrides[{i}] must be a string such as "width=64,128", not '
                f"{type(text).__name__}",
                field="overrides",
            )
    return list(found)


def sweep_request(body: Mapping[str, Any]) -> SweepRequest:
    """Read a ``POST /api/v1/sweeps`` body (see the module's doc).

    Raises:
        InvalidInput (400): naming the field (the settings' ranges are the store's to check).
    """
    edits = clone_edits(body)  # refuses argv, command, cwd, project_root and env first
    for key in body:
        if key not in _KNOWN:
            raise InvalidInput(
                f"{key} is not a field of a sweep; the fields are {', '.join(sorted(_KNOWN))}",
                field=str(key),
            )
        if key != "job":  # the job's parser checks its fields, naming each
            check_text(body[key], str(key))
    edits.pop("grid")  # a grid is an unknown field here: the sweep searches its overrides
    source = _source(body)
    if isinstance(source, JobSpec):
        edits = {}
    given = {name: body_field(body, name, kind) for name, kind in _SETTINGS.items()}
    settings = SweepSettings(**{k: v for k, v in given.items() if v is not None})
    return SweepRequest(
        source=source,
        overrides=_overrides(body),
        settings=settings,
        name=body_field(body, "name", str),
        edits=edits,
    )
