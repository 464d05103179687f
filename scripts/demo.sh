#!/usr/bin/env bash
# Install into .venv (scripts/install.sh) and start the tracker with demo data:
#   ./scripts/demo.sh [tracker up args...]
# Needs neither Chromium nor PostgreSQL: the demo uses the default SQLite store.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Only what the demo needs: the dashboard (server) and the worker (runner) extras, and torch
# (the CPU wheel of the version pinned in constraints.txt; install.sh installs it first).
# scripts/test.sh installs the dev extra instead. Not editable: the demo runs the tracker as
# a user installs it (and setuptools prints no editable-install warning).
TRACKER_EXTRAS=server,runner TRACKER_EDITABLE=0 ./scripts/install.sh
exec .venv/bin/tracker up --demo "$@"
