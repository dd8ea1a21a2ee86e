#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Quick start 1/2: install what is missing, build, and run the main job: the GUI on
# the default experiment, or with no display the same experiment headless, writing
# its figures and tables to out/default/. Extra arguments go to kvlens.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
# Only the application: the first window should not wait for the test suite to compile.
./scripts/build.sh kvlens
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec build/app/kvlens "$@"
fi
echo "kvlens: no display; running the default experiment headless into out/default" >&2
exec build/app/kvlens --batch resources/presets/default.json --out out/default "$@"
