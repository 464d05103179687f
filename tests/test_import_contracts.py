"""The import contracts in pyproject.toml (``lint-imports``, run by scripts/test.sh) fail when
the code breaks them: a contract that cannot fail would prove nothing.

The ``tracker`` package (through its links to web/, runner/ and migrations/) is copied into a
temporary directory, a forbidden import is added to the copy, and ``lint-imports`` checks the
copy with the repository's contracts. The untouched copy keeps them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter comes with the dev extra")

ROOT = Path(__file__).resolve().parent.parent
LAYERS = "Layers: cli > (web | runner) > store > pure rules"
INDEPENDENCE = "The dashboard and the runner never import each other"
PURE_RULES = "Pure rules import no other part of tracker and do no I/O"
SQL_IN_STORE = "SQLAlchemy and the ORM models only inside tracker.store (and its migrations)"
INTEGRATIONS = "Only tracker.integrations imports Lightning and transformers"

# module file in the copy -> the import line added to it
BREAKAGES = {
    "web/views/pages.py": "import tracker.runner.worker",
    "web/plumbing/params.py": "import sqlalchemy",
    "rules/keys.py": "import tracker.store",
    "client/lifecycle.py": "import lightning",
}


def _only_python(directory: str, names: list[str]) -> list[str]:
    """copytree's ignore: caches and every file that is not Python (plotly.js, templates)."""
    return [
        n
        for n in names
        if n == "__pycache__" or (Path(directory, n).is_file() and not n.endswith(".py"))
    ]


def _copy_project(tmp_path: Path) -> Path:
    """The tracker package (links followed, Python files only) and pyproject.toml."""
    shutil.copytree(ROOT / "tracker", tmp_path / "tracker", ignore=_only_python)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint_imports(project: Path) -> str:
    """lint-imports' report on the copy in ``project``, after a line ``exit <status>``."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint if lint.exists() else "lint-imports"), "--no-cache", "--no-logo",
         "--config", str(project / "pyproject.toml")],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(project)},
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )  # fmt: skip
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def _verdict(report: str, contract: str) -> str:
    match = re.search(rf"^{re.escape(contract)} (KEPT|BROKEN)", report, re.M)
    assert match is not None, f"no verdict for {contract!r} in:\n{report}"
    return match[1]


def test_the_code_keeps_the_layers_and_the_independence(tmp_path: Path) -> None:
    report = _lint_imports(_copy_project(tmp_path))
    assert "tracker.web.views.pages" not in report  # the breakage below is not there already
    for contract in (LAYERS, INDEPENDENCE, PURE_RULES, INTEGRATIONS):
        assert _verdict(report, contract) == "KEPT", report


def test_a_forbidden_import_breaks_its_contract(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    for name, line in BREAKAGES.items():
        module = project / "tracker" / name
        module.write_text(f"{line}  # added by the test\n{module.read_text()}")
    report = _lint_imports(project)
    assert report.startswith("exit 1\n"), report
    for contract in (LAYERS, INDEPENDENCE, PURE_RULES, SQL_IN_STORE, INTEGRATIONS):
        assert _verdict(report, contract) == "BROKEN", report
    assert "tracker.web.views.pages -> tracker.runner.worker" in report
    assert "tracker.web.plumbing.params -> sqlalchemy" in report
    assert "tracker.rules.keys -> tracker.store" in report
    assert "tracker.client.lifecycle -> lightning" in report
