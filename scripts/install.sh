#!/usr/bin/env bash
# Create .venv and install the project with the extras asked for, torch first.
#
# Versions are pinned in constraints.txt (the only place), passed to every pip install with
# -c. torch is installed before the project, from the CPU wheel index (TORCH_INDEX_URL), so
# that a stock machine gets the CPU build of the pinned version instead of PyPI's CUDA one,
# and resolving the project's `torch>=...` requirement finds it already satisfied. Where
# that index cannot be reached (a machine that sees only the package registries), the
# pinned version comes from the configured package index instead, after one quick try.
# A stamp in .venv records what was installed; when pyproject.toml, constraints.txt, the
# extras and the interpreter are unchanged, the second run does nothing.
#
# Env: PYTHON (default python3) picks the interpreter used to create .venv.
#      TRACKER_EXTRAS (default dev): the project's extras, comma-separated; scripts/demo.sh
#        asks for server,runner only (no pytest, mypy, playwright or mlflow).
#      TORCH_INDEX_URL (default https://download.pytorch.org/whl/cpu): where torch comes
#        from first; e.g. https://download.pytorch.org/whl/cu124 for a CUDA build.
#      TRACKER_EDITABLE (default 1): 1 installs the project editable (`pip install -e`, for
#        working on it: scripts/test.sh); 0 builds and installs it as a user gets it, from
#        its wheel (scripts/demo.sh). setuptools warns about every editable install of this
#        layout ("Editable installation ... folders with the same name as your package"):
#        an install that is not for development should not print that. Installed so, the
#        project is reinstalled whenever a file of the package (tracker/, with web/,
#        runner/, migrations/ and the demo script it links to) changes.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

constraints="constraints.txt"
extras="${TRACKER_EXTRAS:-dev}"
editable="${TRACKER_EDITABLE:-1}"
if [[ "$editable" != 0 && "$editable" != 1 ]]; then
    echo "error: TRACKER_EDITABLE must be 0 or 1, not '$editable'" >&2
    exit 1
fi
torch_index="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
TORCH_VERSION="$(sed -n 's/^torch==\([^[:space:]#;]*\).*/\1/p' "$constraints")"
if [[ -z "$TORCH_VERSION" ]]; then
    echo "error: $constraints has no 'torch==VERSION' line" >&2
    exit 1
fi

venv=".venv"
py="$venv/bin/python"
stamp="$venv/.tracker-install-stamp"

if [[ ! -x "$py" ]]; then
    echo "==> creating $venv with ${PYTHON:-python3}"
    if ! "${PYTHON:-python3}" -m venv "$venv"; then
        if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
            echo "==> python3 -m venv failed; installing python3-venv"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
            "${PYTHON:-python3}" -m venv "$venv"
        else
            echo "error: '${PYTHON:-python3} -m venv' failed; install python3-venv" >&2
            exit 1
        fi
    fi
fi

want="$(sha256sum pyproject.toml "$constraints" | cut -d' ' -f1 | tr '\n' ' ')$("$py" -c 'import sys; print(sys.version.split()[0])') [$extras] $torch_index"
if [[ "$editable" == 1 ]]; then
    want+=" editable"
else  # a copy in site-packages: the content of every file it is built from
    want+=" wheel $(find -L tracker -type f ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z |
        xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
fi

installed_ok() {
    [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] || return 1
    # The stamp alone is not proof: someone may have uninstalled a package since.
    "$py" - "$TORCH_VERSION" <<'PY' 2>/dev/null
import importlib.metadata as md
import sys

ok = md.version("torch").split("+")[0] == sys.argv[1] and md.version("tracker")
sys.exit(0 if ok else 1)
PY
}

if installed_ok; then
    echo "==> $venv is up to date (pyproject.toml, $constraints, extras unchanged), skipping install"
    exit 0
fi

rm -f "$stamp"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
echo "==> upgrading pip"
"$py" -m pip install --quiet --upgrade pip
echo "==> installing torch $TORCH_VERSION from $torch_index"
if ! "$py" -m pip install --quiet --retries 0 --timeout 15 -c "$constraints" \
        --index-url "$torch_index" torch; then
    echo "==> $torch_index cannot be reached: torch $TORCH_VERSION from the package index"
    "$py" -m pip install --quiet -c "$constraints" torch
fi
if [[ "$editable" == 1 ]]; then
    echo "==> installing the project: pip install -c $constraints -e '.[$extras]'"
    "$py" -m pip install --quiet -c "$constraints" -e ".[$extras]"
else
    # setuptools stages the package in build/lib and never empties it: a file deleted from
    # tracker/ would stay in the wheel
    rm -rf build/lib
    echo "==> installing the project: pip install -c $constraints '.[$extras]'"
    "$py" -m pip install --quiet -c "$constraints" ".[$extras]"
fi
echo "$want" >"$stamp"
echo "==> install done"
