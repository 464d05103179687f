"""Sweeps that learn: ``tracker sweep --method ...`` creates one, ``tracker sweeps
ls|show|stop|resume`` follows and steers it (:mod:`tracker.store.sweeps` holds the rules).

The CLI only stores the sweep and, when Optuna is importable here, runs one controller pass
so the first trials are queued at once; after that the periodic work of any process that is
up (dashboard, worker, ``tracker scheduler``, dispatcher) drives it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from tracker.cli.common import echo_json, fmt_time, json_option, open_store, print_table, uri_option
from tracker.cli.listing import limit_option
from tracker.cli.suggest import SuggestingGroup
from tracker.entities import SweepInfo, TrialInfo

if TYPE_CHECKING:
    from tracker.rules.sweep_search import SweepSettings
from tracker.rules.sweep_search import MAX_TRIALS

__all__ = ["create_learning_sweep", "learning_options", "pop_learning", "sweeps"]

DEFAULT_TRIALS = 20
_LEARNING_KEYS = (
    "method",
    "metric",
    "goal",
    "trials",
    "parallel",
    "prune",
    "objective",
    "sweep_name",
)


def learning_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options of a sweep that learns (``tracker sweep --method ...``)."""
    options = [
        click.option("--method", type=click.Choice(["tpe", "cmaes", "random", "grid"]),
                     default=None, help="A sweep that learns: the sampler that picks each "
                     "trial's params (tpe: Bayesian; cmaes; random; grid). Needs --metric."),
        click.option("--metric", default=None,
                     help="The metric to optimise, as the script logs it (e.g. val/loss)."),
        click.option("--goal", type=click.Choice(["minimize", "maximize"]), default="minimize",
                     show_default=True, help="Minimise or maximise --metric."),
        click.option("--objective", type=click.Choice(["last", "best"]), default="last",
                     show_default=True,
                     help="A trial's value: the metric's last value, or its best over the run."),
        click.option("--trials", type=int, default=None,
                     help="How many trials in all (default 20; a grid: its size, at most)."),
        click.option("--parallel", type=int, default=1, show_default=True,
                     help="How many trials are queued or running at once."),
        click.option("--prune", type=click.Choice(["asha", "hyperband", "median", "none"]),
                     default="none", show_default=True,
                     help="Stop trials worse than their peers at the same step (asha: "
                     "successive halving; hyperband; median)."),
        click.option("--sweep-name", default=None, help="The sweep's name (default: script, "
                     "method and metric)."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


def pop_learning(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """Take the learning options out of ``kwargs``; None when this is a plain sweep."""
    learning = {k: kwargs.pop(k) for k in _LEARNING_KEYS}
    if learning["method"] is None and learning["metric"] is None:
        return None
    if learning["metric"] is None:
        raise click.UsageError("--method needs --metric: the metric the sweep optimises")
    learning["method"] = learning["method"] or "tpe"
    if learning["trials"] is None:  # a grid is cut to its size by the store
        learning["trials"] = MAX_TRIALS if learning["method"] == "grid" else DEFAULT_TRIALS
    return learning


def create_learning_sweep(
    spec: Any,
    overrides: tuple[str, ...],
    learning: dict[str, Any],
    seed: int | None,
    uri: str | None,
    token: str | None,
    as_json: bool,
    snapshot_kwargs: dict[str, Any],
) -> None:
    """Store the sweep (with one code snapshot for all its trials) and queue its first
    trials when Optuna is here."""
    import random

    from tracker.cli.remote import is_http
    from tracker.cli.snapshot import attach_snapshot
    from tracker.rules.sweep_search import SweepSettings
    from tracker.store import sweeps as store_sweeps

    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    name = learning.pop("sweep_name")
    settings = SweepSettings(seed=seed, **learning)
    if is_http(uri):
        assert uri is not None  # is_http says so; for mypy
        _create_on_dashboard(uri, token, spec, overrides, settings, name, as_json,
                             snapshot_kwargs)  # fmt: skip
        return
    store = open_store(uri, create=True)
    spec = attach_snapshot(spec, store, snapshot_kwargs)
    created = store_sweeps.create_sweep(store, spec, list(overrides), settings, name=name)
    queued: list[str] = []
    try:
        import optuna  # noqa: F401 - only to know whether this process can decide trials
    except ImportError:
        pass
    else:
        queued = store_sweeps.control_once(store)
    created = store_sweeps.get_sweep(store, created.id)
    if as_json:
        echo_json(_public(created))
        return
    _say_created(created)
    for line in queued:
        click.echo(f"  {line}")
    click.echo(
        "The dashboard, a worker or `tracker scheduler` queues the next trials as slots free up; "
        f"follow it with `tracker sweeps show {created.id}`."
    )


def _create_on_dashboard(
    uri: str,
    token: str | None,
    spec: Any,
    overrides: tuple[str, ...],
    settings: SweepSettings,
    name: str | None,
    as_json: bool,
    snapshot_kwargs: dict[str, Any],
) -> None:
    """``tracker sweep --method ... --uri http://...``: the sweep is stored by the dashboard,
    whose periodic work queues its trials (nothing is decided here)."""
    from tracker.cli.remote_submit import create_sweep_remote

    created = create_sweep_remote(uri, token, spec, snapshot_kwargs, overrides, settings, name)
    if as_json:
        echo_json(_public(created))
        return
    _say_created(created)
    click.echo("  the dashboard queues the first trials within about 2 s")
    click.echo(
        "It queues the next trials as slots free up; follow the sweep on its page, "
        f"{uri.rstrip('/')}/sweeps/{created.id}."
    )


def _say_created(created: SweepInfo) -> None:
    click.echo(
        f"sweep {created.id} created ({created.method}, {created.goal} {created.metric}, "
        f"{created.trials} trials, {created.parallel} at once, prune {created.prune}, "
        f"seed {created.seed}); trials are jobs tagged sweep-{created.id}"
    )


def _public(sweep: SweepInfo) -> dict[str, Any]:
    """A sweep as JSON: the spec's env names only, never their values."""
    data = dataclasses.asdict(sweep)
    env = data["spec"].pop("env", None) or {}
    data["spec"]["env_keys"] = sorted(env)
    return data


# ----------------------------------------------------------------------------- sweeps


def _open_store(uri: str | None) -> Any:
    """The store of ``tracker sweeps ...``. A dashboard's http:// address is refused with
    where to go instead (its Sweeps page shows, stops and resumes sweeps), as InvalidInput
    naming ``uri``."""
    from tracker.cli.remote import is_http
    from tracker.errors import InvalidInput

    if is_http(uri):
        ctx = click.get_current_context(silent=True)
        command = " ".join(ctx.command_path.split()[1:]) if ctx is not None else "sweeps"
        raise InvalidInput(
            f"`tracker {command}` reads the database, and {uri} is a dashboard: open its Sweeps "
            f"page ({str(uri).rstrip('/')}/sweeps) to follow, stop or resume a sweep, or give a "
            "database URL (sqlite:///path/to/tracker.db or postgresql+psycopg://user@host/db) "
            "with --uri or TRACKER_URI",
            field="uri",
        )
    return open_store(uri)


@click.group(cls=SuggestingGroup)
def sweeps() -> None:
    """List, inspect, stop and resume sweeps that learn (`tracker sweep --method`)."""


def _value(v: float | None) -> str:
    return "-" if v is None else f"{v:.6g}"


def _done(s: SweepInfo) -> str:
    ended = sum(n for state, n in s.counts.items() if state != "running")
    return f"{ended}/{s.trials}"


@sweeps.command("ls")
@click.option("--status", type=click.Choice(["running", "stopped", "finished"]), default=None,
              help="Only sweeps in this state.")  # fmt: skip
@click.option("--project", default=None, help="Only sweeps of this project.")
@limit_option("sweeps")
@uri_option
@json_option
def sweeps_ls(status: str | None, project: str | None, limit: int, uri: str | None,
              as_json: bool) -> None:  # fmt: skip
    """List sweeps, newest first: DONE is ended trials of the budget, BEST the best value."""
    from tracker.store import sweeps as store_sweeps

    found = store_sweeps.list_sweeps(_open_store(uri), project=project, status=status, limit=limit)
    if as_json:
        echo_json([_public(s) for s in found])
        return
    rows = [
        [s.id, s.name, s.status, s.method, s.prune, f"{s.goal} {s.metric}", _done(s),
         s.counts.get("running", 0), s.counts.get("pruned", 0),
         _value(s.best.value if s.best else None), fmt_time(s.created_at)]
        for s in found
    ]  # fmt: skip
    print_table(
        ["ID", "NAME", "STATUS", "METHOD", "PRUNE", "OBJECTIVE", "DONE", "RUNNING", "PRUNED",
         "BEST", "CREATED"], rows)  # fmt: skip


@sweeps.command("show")
@click.argument("sweep_id", type=int)
@uri_option
@json_option
def sweeps_show(sweep_id: int, uri: str | None, as_json: bool) -> None:
    """A sweep's settings and its trials: params, state, value, job and run."""
    from tracker.store import sweeps as store_sweeps

    store = _open_store(uri)
    sweep = store_sweeps.get_sweep(store, sweep_id)
    found = store_sweeps.trials(store, sweep_id)
    if as_json:
        echo_json({"sweep": _public(sweep), "trials": found})
        return
    _show_header(sweep)
    print_table(["#", "STATE", "VALUE", "JOB", "RUN", "PARAMS", "NOTE"],
                [_trial_row(t) for t in found], cap=80)  # fmt: skip


def _show_header(s: SweepInfo) -> None:
    best = f"trial {s.best.number}: {_value(s.best.value)}" if s.best else "-"
    lines = [
        ("sweep", f"{s.id} {s.name}"),
        ("status", s.status + (f" ({s.note})" if s.note else "")),
        ("search", f"{s.method}, seed {s.seed}; prune {s.prune}"),
        ("objective", f"{s.goal} {s.metric} ({s.objective} value)"),
        ("budget", f"{s.trials} trials, {s.parallel} at once; {_done(s)} ended"),
        ("space", "  ".join(f"-c {text}" for text in s.space)),
        ("best", best),
        ("jobs", f"tagged sweep-{s.id}"),
    ]
    for key, value in lines:
        click.echo(f"{key:>10}  {value}")
    click.echo("")


def _trial_row(t: TrialInfo) -> list[Any]:
    params = " ".join(f"{k}={_param(v)}" for k, v in t.params.items())
    state = t.state if t.pruned_step is None else f"pruned@{t.pruned_step}"
    return [t.number, state, _value(t.value), t.job_id or "-", t.run_id or "-", params,
            t.note or ""]  # fmt: skip


def _param(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


@sweeps.command("stop")
@click.argument("sweep_id", type=int)
@click.option("--kill", is_flag=True, help="Cancel the running trials too (default: they finish).")
@uri_option
@json_option
def sweeps_stop(sweep_id: int, kill: bool, uri: str | None, as_json: bool) -> None:
    """Queue no more trials: the queued ones are cancelled; running ones finish (--kill:
    cancelled). `tracker sweeps resume` goes on."""
    from tracker.store import sweeps as store_sweeps

    sweep = store_sweeps.stop_sweep(_open_store(uri), sweep_id, kill=kill)
    if as_json:
        echo_json(_public(sweep))
        return
    click.echo(f"sweep {sweep.id}: {sweep.status}")


@sweeps.command("resume")
@click.argument("sweep_id", type=int)
@click.option("--trials", type=int, default=None, help="Raise the budget to this many trials.")
@uri_option
@json_option
def sweeps_resume(sweep_id: int, trials: int | None, uri: str | None, as_json: bool) -> None:
    """Queue trials again: a stopped sweep, or a finished one given more --trials."""
    from tracker.store import sweeps as store_sweeps

    sweep = store_sweeps.resume_sweep(_open_store(uri), sweep_id, trials=trials)
    if as_json:
        echo_json(_public(sweep))
        return
    click.echo(f"sweep {sweep.id}: {sweep.status}, {sweep.trials} trials")
