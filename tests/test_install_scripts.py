"""scripts/demo.sh installs only what the demo needs (issue 14, item 11); scripts/test.sh
keeps the dev extra; torch is the CPU wheel of the version pinned in constraints.txt.

Static checks of the scripts (running pip here would download gigabytes): which extras each
script asks install.sh for, what those extras pull in (from pyproject.toml), and the exact
pip command that installs torch.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
DEV_ONLY = {"pytest", "mypy", "playwright", "mlflow", "ruff", "hypothesis", "import-linter"}


def install_calls(script: str) -> list[str]:
    """The lines of ``script`` that run scripts/install.sh (with their env assignments)."""
    text = (SCRIPTS / script).read_text()
    return [ln.strip() for ln in text.splitlines()
            if "scripts/install.sh" in ln and not ln.lstrip().startswith("#")]  # fmt: skip


def extras_of(call: str) -> list[str]:
    m = re.search(r"TRACKER_EXTRAS=([\w,]+)", call)
    return m.group(1).split(",") if m else ["dev"]  # install.sh's default


def requirements(extras: list[str]) -> set[str]:
    """Distribution names an install of ``.[extras]`` pulls in (extras expanded)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    names: set[str] = set()
    todo = list(extras)
    while todo:
        for req in optional[todo.pop()]:
            nested = re.fullmatch(r"tracker\[([\w,]+)\]", req)
            if nested:
                todo += nested.group(1).split(",")
            else:
                names.add(re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0].lower())
    return names


def test_demo_asks_for_the_server_and_runner_extras_only() -> None:
    (call,) = install_calls("demo.sh")
    extras = extras_of(call)
    assert "dev" not in extras
    assert set(extras) == {"server", "runner"}
    assert not requirements(extras) & DEV_ONLY
    assert {"flask", "gunicorn", "apscheduler"} <= requirements(extras)


def test_tests_still_install_the_dev_extra() -> None:
    (call,) = install_calls("test.sh")
    assert extras_of(call) == ["dev"]
    assert requirements(["dev"]) >= DEV_ONLY


def test_install_defaults_to_dev_and_puts_the_extras_in_its_stamp() -> None:
    text = (SCRIPTS / "install.sh").read_text()
    assert 'extras="${TRACKER_EXTRAS:-dev}"' in text
    assert '-e ".[$extras]"' in text
    assert "[$extras]" in re.search(r"^want=.*$", text, re.M).group(0)  # another set reinstalls


def test_the_demo_installs_the_project_as_a_user_does_not_editable() -> None:
    """An editable install of this layout makes setuptools print "Editable installation ...
    Please be careful with folders ..." (issue 24, item 6); the demo is not development."""
    (call,) = install_calls("demo.sh")
    assert "TRACKER_EDITABLE=0" in call
    (test_call,) = install_calls("test.sh")
    assert "TRACKER_EDITABLE" not in test_call  # the suite keeps the default: editable
    text = (SCRIPTS / "install.sh").read_text()
    assert 'editable="${TRACKER_EDITABLE:-1}"' in text
    assert re.search(r'pip install --quiet -c "\$constraints" "\.\[\$extras\]"$', text, re.M)
    # installed as a copy, it is reinstalled when a file of the package changes
    assert 'want+=" wheel $(find -L tracker -type f' in text
    assert text.index("rm -rf build/lib") < text.index(
        '"$py" -m pip install --quiet -c "$constraints" ".[$extras]"'
    )


def test_torch_is_the_pinned_cpu_wheel() -> None:
    text = (SCRIPTS / "install.sh").read_text()
    assert 'torch_index="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"' in text
    joined = text.replace("\\\n", " ")  # backslash-continued lines as one
    torch_line = re.compile(r"pip install .*\btorch(; then)?$")
    installs = [ln for ln in joined.splitlines() if torch_line.search(ln)]
    first, fallback = installs  # the CPU index first; the package index if it is unreachable
    assert '-c "$constraints"' in first and '-c "$constraints"' in fallback  # the version pin
    assert '--index-url "$torch_index"' in first  # the CPU build, not PyPI's CUDA one
    assert "--retries 0" in first  # an unreachable index costs one quick try, not five
    assert "--index-url" not in fallback
    pins = re.findall(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert len(pins) == 1 and re.fullmatch(r"\d+\.\d+\.\d+", pins[0])
    # the project install comes after torch, so its torch requirement is already satisfied
    assert joined.index('--index-url "$torch_index" torch') < joined.index('-e ".[$extras]"')
