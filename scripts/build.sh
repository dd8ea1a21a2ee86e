#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Configures and builds KVLens into build/ with two parallel jobs (the reference machine has 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${KVLENS_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${KVLENS_BUILD_TYPE:-Release}" "$@" >/dev/null
cmake --build "$build_dir" -j2
