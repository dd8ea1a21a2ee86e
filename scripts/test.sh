#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Quick start 2/2: install what is missing, build, and run the whole test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
export QT_QPA_PLATFORM=offscreen
cd "${KVLENS_BUILD_DIR:-build}"
ctest --output-on-failure -j2 "$@"
