"""``pip install tracker`` is the client, the store and the store commands; the dashboard and
the worker/scheduler are extras. A command whose extra is missing names it.

"Not installed" is simulated in a subprocess by ``sys.modules[name] = None``, which makes
``import name`` fail exactly as it does when the distribution is absent.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tracker.cli import COMMANDS, EXTRAS

ROOT = Path(__file__).resolve().parents[2]
EXTRA_MODULES = sorted({module for modules in EXTRAS.values() for module in modules})


def _tracker(block: list[str], *args: str, code: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``tracker ARGS`` (or ``code`` when given) with the ``block`` modules uninstalled."""
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in block)
    body = code or f"from tracker.cli import main\nsys.argv = ['tracker', *{list(args)!r}]\nmain()"
    return subprocess.run(
        [sys.executable, "-c", f"import sys\n{blocked}{body}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("block", "args", "extra"),
    [
        (["flask"], ["ui"], "server"),
        (["gunicorn"], ["ui", "--port", "0"], "server"),
        (["flask"], ["up", "--demo"], "server"),
        (["apscheduler"], ["worker"], "runner"),
        (["tzlocal"], ["scheduler"], "runner"),
        (["apscheduler"], ["schedule", "ls"], "runner"),
        (["apscheduler"], ["worker", "--help"], "runner"),
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(v),
)
def test_a_command_without_its_extra_names_it(block: list[str], args: list[str], extra: str):
    done = _tracker(block, *args)
    assert done.returncode == 1, done.stderr
    assert f"pip install 'tracker[{extra}]'" in done.stderr
    assert f"({block[0]} is not installed)" in done.stderr
    assert "Traceback" not in done.stderr


def test_help_lists_the_commands_of_missing_extras():
    done = _tracker(["flask"], "--help")
    assert done.returncode == 0, done.stderr
    assert re.search(
        r"^\s+ui\s+\(not installed: pip install 'tracker\[server\]'\)", done.stdout, re.M
    )
    assert re.search(r"^\s+runs\s+List", done.stdout, re.M)


def test_the_store_commands_and_the_client_need_no_extra(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'base.db'}"
    code = f"""
import json, tracker
from click.testing import CliRunner
from tracker.cli import main
assert CliRunner().invoke(main, ["db", "upgrade", "--uri", {url!r}]).exit_code == 0
tracker.init(project="base", uri={url!r}, system_interval=0)
tracker.log({{"loss": 0.5}}, step=1)
tracker.finish()
runs = CliRunner().invoke(main, ["runs", "ls", "--uri", {url!r}, "--json"])
jobs = CliRunner().invoke(main, ["jobs", "ls", "--uri", {url!r}])
print(json.dumps([runs.exit_code, jobs.exit_code, json.loads(runs.output)[0]["project"]]))
"""
    done = _tracker(EXTRA_MODULES, code=code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [0, 0, "base"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_extras_table_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    base = _names(project["dependencies"])
    distributions = md.packages_distributions()
    for extra, modules in EXTRAS.items():
        declared = _names(optional[extra])
        for module in modules:
            (dist,) = {d.lower() for d in distributions[module]}
            assert dist in declared, f"{module} ({dist}) is not in the {extra} extra"
            assert dist not in base, f"{dist} belongs to an extra, not to the base install"
    needed = {extra for _, extras in COMMANDS.values() for extra in extras}
    assert needed <= set(EXTRAS) <= set(optional)
    # the dashboard draws with its vendored plotly.js: Python's plotly is only for the tests
    # (log_figure of a real plotly figure), never a runtime requirement
    runtime = {n for extra, reqs in optional.items() if extra != "dev" for n in _names(reqs)}
    assert "plotly" not in base | runtime
    assert "plotly" in _names(optional["dev"])


# Where each part of the installed package gets its third-party imports from. A part not
# listed is the base install (client, store, rules, CLI): what `pip install tracker` promises.
PART_EXTRAS = {
    "web": {"server"},
    "runner": {"runner"},
    "integrations": {"integrations"},
    "cli": {"server", "runner"},  # each command imports its extra's modules (EXTRAS table)
}
# Imported by the base install's modules only behind a check that names what to install, or
# only when the caller hands over such an object: not base dependencies, but each declared.
OPTIONAL = {
    "torch": "torch",  # the caller's own tensors and models; tracker never needs it itself
    "PIL": "media",
    "pynvml": "gpu",
    "boto3": "s3",
    "botocore": "s3",
    "psycopg": "postgres",
    "apscheduler": "runner",  # the cron rules, used by the schedule commands only
    # the sweep controller's decisions, run by the periodic work of the dashboard and the
    # runner (both extras bring it); a process without it warns once and leaves sweeps be
    "optuna": "runner",
}
BROUGHT_BY = {"werkzeug": "flask", "botocore": "boto3"}  # their dependencies, used with them


def _imports(package: Path) -> dict[str, set[str]]:
    """Top-level third-party names imported anywhere in ``package`` (lazy imports included,
    links to web/, runner/ and migrations/ followed) -> the parts that import them."""
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).parts
        part = relative[0] if len(relative) > 1 else ""
        if part == "demo":  # a training script, run by the demo's worker (torch, sklearn)
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "tracker" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(part)
    return found


def test_every_imported_module_is_declared_where_its_part_is_installed():
    """numpy shipped undeclared (issue 24): the client's media paths imported it, the dev
    extra brought it, and the demo's install line did not."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = {k: _names(v) for k, v in project["optional-dependencies"].items()}
    base = _names(project["dependencies"])
    distributions = md.packages_distributions()
    missing = []
    for module, parts in sorted(_imports(ROOT / "tracker").items()):
        (dist,) = {d.lower() for d in distributions[BROUGHT_BY.get(module, module)]}
        for part in parts:
            extras = PART_EXTRAS.get(part, set())
            if module in OPTIONAL and part not in PART_EXTRAS:
                extras = {OPTIONAL[module]}
            where = base.union(*(optional[e] for e in extras))
            if dist not in where:
                missing.append(f"{module} ({dist}), imported by tracker/{part or '*.py'}, "
                               f"is in neither the base install nor {sorted(extras)}")  # fmt: skip
    assert not missing, "\n".join(missing)
