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
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

constraints="constraints.txt"
extras="${TRACKER_EXTRAS:-dev}"
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
    echo "==> $venv is up to date (pyproject.toml and $constraints unchanged), skipping install"
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
echo "==> installing the project: pip install -c $constraints -e '.[$extras]'"
"$py" -m pip install --quiet -c "$constraints" -e ".[$extras]"
echo "$want" >"$stamp"
echo "==> install done"
