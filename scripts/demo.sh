#!/usr/bin/env bash
# Install into .venv (scripts/install.sh) and start the tracker with demo data:
#   ./scripts/demo.sh [tracker up args...]
# Needs neither Chromium nor PostgreSQL: the demo uses the default SQLite store.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/install.sh
exec .venv/bin/tracker up --demo "$@"
