#!/usr/bin/env bash
# The one command that runs the whole test suite on a fresh machine:
#   ./scripts/test.sh [pytest args...]
#
# Installs the project into .venv (scripts/install.sh), makes sure Chromium, the
# PostgreSQL server and Slurm + munge are there (apt-get when root; the Slurm tests start
# and stop their own one-node cluster, tests/support/slurm_cluster.py), runs the static checks (ruff check,
# ruff format --check, mypy, lint-imports), starts a throwaway PostgreSQL cluster, exports
# its URL as TRACKER_TEST_PG_URL and runs pytest. The cluster is stopped on exit, whatever
# happens. pytest runs even when a static check failed, so one run reports everything; the
# exit status is pytest's, or 1 when only a static check failed; "no tests collected" (5)
# counts as failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/install.sh

have_pg_server() {
    command -v pg_config >/dev/null && [[ -x "$(pg_config --bindir)/initdb" ]]
}

need_chromium=0
need_pg=0
need_slurm=0
need_faketime=0
command -v chromium >/dev/null || need_chromium=1
have_pg_server || need_pg=1
[[ -x /usr/sbin/slurmctld || -n "$(command -v slurmctld)" ]] || need_slurm=1
command -v faketime >/dev/null || need_faketime=1  # the clock-skew tests' skewed machine

if ((need_chromium || need_pg || need_slurm || need_faketime)); then
    if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "==> apt-get update"
        apt-get update -qq
        packages=()
        if ((need_chromium)); then
            packages+=(chromium)
        fi
        if ((need_pg)); then
            # postgresql-15 on Debian 12; elsewhere the distribution's default version.
            if apt-cache show postgresql-15 >/dev/null 2>&1; then
                packages+=(postgresql-15)
            else
                packages+=(postgresql)
            fi
        fi
        if ((need_slurm)); then
            packages+=(slurm-wlm munge)
        fi
        if ((need_faketime)); then
            packages+=(faketime)
        fi
        echo "==> apt-get install ${packages[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
    else
        if ((need_chromium)); then
            echo "warning: no chromium on PATH; the browser tests will skip." \
                "Install it with: sudo apt-get install chromium" >&2
        fi
        if ((need_pg)); then
            echo "warning: no PostgreSQL server binaries; the PostgreSQL tests will skip." \
                "Install them with: sudo apt-get install postgresql-15" >&2
        fi
        if ((need_slurm)); then
            echo "warning: no Slurm; the Slurm tests will skip (they also need root)." \
                "Install it with: sudo apt-get install slurm-wlm munge" >&2
        fi
    fi
fi

failed_checks=()
check() {
    echo "==> $*"
    "$@" || failed_checks+=("$*")
}
check .venv/bin/ruff check .
check .venv/bin/ruff format --check .
check .venv/bin/mypy
check .venv/bin/lint-imports

pg_dir=""
cleanup() {
    if [[ -n "$pg_dir" ]]; then
        echo "==> stopping the test PostgreSQL cluster"
        .venv/bin/python -m tests.support.pg_cluster stop "$pg_dir" ||
            echo "warning: could not stop the cluster in $pg_dir" >&2
        pg_dir=""
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if have_pg_server; then
    echo "==> starting a throwaway PostgreSQL cluster"
    pg_dir="$(mktemp -d "${TMPDIR:-/tmp}/tracker-pg.XXXXXX")"
    pg_url="$(.venv/bin/python -m tests.support.pg_cluster start "$pg_dir")"
    export TRACKER_TEST_PG_URL="$pg_url"
    echo "==> TRACKER_TEST_PG_URL=$TRACKER_TEST_PG_URL"
fi

# --durations: every CI log lists the slowest tests (setup and teardown included), so a test
# that grows slow shows up in the log of the run that made it slow.
# Parallel: TRACKER_TEST_WORKERS pytest-xdist workers (default 3: most tests wait on the
# processes they start, so three keep two cores busy), the tests of one file -- or of one
# machine-wide thing, the Slurm cluster, the install venvs -- in one worker
# (tests/conftest.py). Then the tests marked `serial` (they judge time or CPU share) alone.
# TRACKER_TEST_WORKERS=0: one plain pytest run, in order.
workers="${TRACKER_TEST_WORKERS:-3}"
# A -m EXPR of the caller's is combined with each part's own marker, not overridden by it.
marks="" rest=()
while (($#)); do
    case "$1" in
        -m) marks="${2:-}"; shift 2 || shift ;;
        -m*) marks="${1#-m}"; shift ;;
        *) rest+=("$1"); shift ;;
    esac
done
set -- ${rest[@]+"${rest[@]}"}
status=0
if ((workers > 0)); then
    not_serial="not serial${marks:+ and ($marks)}"
    only_serial="serial${marks:+ and ($marks)}"
    echo "==> python -m pytest -n $workers --dist loadgroup -m '$not_serial' --durations=30 $*"
    parallel=0
    .venv/bin/python -m pytest -n "$workers" --dist loadgroup -m "$not_serial" \
        --durations=30 "$@" || parallel=$?
    echo "==> python -m pytest -m '$only_serial' --durations=10 $*   (the timing tests, alone)"
    serial=0
    .venv/bin/python -m pytest -m "$only_serial" --durations=10 "$@" || serial=$?
    if ((parallel == 5 && serial == 5)); then
        status=5
    else
        # one part collecting nothing is fine (a path with no serial test, say)
        ((parallel == 5)) && parallel=0
        ((serial == 5)) && serial=0
        status=$((parallel != 0 ? parallel : serial))
    fi
else
    echo "==> python -m pytest ${marks:+-m '$marks' }--durations=30 $*"
    .venv/bin/python -m pytest ${marks:+-m "$marks"} --durations=30 "$@" || status=$?
fi
if ((status == 5)); then
    echo "error: pytest collected no tests (exit 5); treating that as a failure" >&2
fi
if ((${#failed_checks[@]})); then
    echo "error: static checks failed:" >&2
    printf '    %s\n' "${failed_checks[@]}" >&2
    ((status != 0)) || status=1
fi
exit "$status"
