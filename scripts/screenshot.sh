#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Regenerates the README screenshots: the window on the default experiment, one PNG per view,
# rendered by kvlens itself (--screenshot) on the offscreen platform (no display needed).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh >/dev/null
mkdir -p docs
# A 1366 x 768 laptop screen: the window sizes itself to it, as it does on a real one.
export QT_QPA_PLATFORM="offscreen:configfile=$PWD/tests/data/screen_1366x768.json"
for view in shannon_phi scatter_6d kl_distribution routing_recall comparisons theory sweep teaching; do
  build/app/kvlens --view "$view" --screenshot "docs/screenshot_${view}.png"
done
cp docs/screenshot_shannon_phi.png docs/screenshot.png
# The Model map on the shipped tiny model (every layer and head), its advice measured end to end.
build/app/kvlens --spec resources/examples/tiny_lm_map.json --view model_map --screenshot docs/screenshot_model_map.png
# The Output tab: the shipped model over its held-out text, the worst-predicted token drilled down.
build/app/kvlens --view output --screenshot docs/screenshot_output.png
echo "wrote docs/screenshot*.png"
