#!/usr/bin/env bash
# Build web/static/vendor/plotly-charts.min.js: plotly.js with only the trace types the
# dashboard draws (scatter, heatmap) and those a logged figure most often uses (bar,
# histogram, histogram2d, box, violin, pie, contour). Needs node >= 18 and npm; CI never
# runs this (the built file is committed). Writes the bundle and LICENSE-plotly.txt next to
# it and prints the sha256 recorded in web/static/vendor/README.md.
#
#   scripts/build_plotly.sh            # then commit web/static/vendor/*
set -euo pipefail

PLOTLY_VERSION=4.1.1
ESBUILD_VERSION=0.24.0
TRACES=(heatmap bar histogram histogram2d box violin pie contour)  # scatter is in core

repo=$(cd "$(dirname "$0")/.." && pwd)
vendor="$repo/web/static/vendor"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm init -y >/dev/null
npm install --no-audit --no-fund --ignore-scripts \
    "plotly.js@$PLOTLY_VERSION" "esbuild@$ESBUILD_VERSION" >/dev/null

{
    echo "var Plotly = require('plotly.js/lib/core');"
    echo "Plotly.register(["
    for trace in "${TRACES[@]}"; do echo "  require('plotly.js/lib/$trace'),"; done
    echo "]);"
    echo "module.exports = Plotly;"
} > entry.js

# The options of plotly.js's own esbuild-config.js (global, define.amd, NODE_DEBUG); the
# only CSS import (maplibre's, for map traces, not bundled here) becomes empty; the
# licence comments of the bundled packages are kept at the end of the file.
node_modules/.bin/esbuild entry.js --bundle --minify --format=iife --global-name=Plotly \
    --target=es2016 --define:global=window --define:define.amd=false \
    --define:process.env.NODE_DEBUG=false --loader:.css=empty --legal-comments=eof \
    --log-level=warning --outfile=bundle.js

{
    printf '/**\n* plotly.js v%s\n' "$PLOTLY_VERSION"
    printf '* partial bundle: scatter %s (scripts/build_plotly.sh)\n' "${TRACES[*]}"
    printf '* Copyright 2012-2026, Plotly, Inc.\n* All rights reserved.\n'
    printf '* Licensed under the MIT license\n*/\n'
    cat bundle.js
} > "$vendor/plotly-charts.min.js"
cp node_modules/plotly.js/LICENSE "$vendor/LICENSE-plotly.txt"
sha256sum "$vendor/plotly-charts.min.js"
