#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Configures and builds KVLens into build/ with two parallel jobs (the reference machine has 2 cores).
#   scripts/build.sh                  everything: the app, the benchmark and the test suite
#   scripts/build.sh kvlens           only the named targets (run.sh builds just the app)
# Extra configure options go in KVLENS_CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${KVLENS_BUILD_DIR:-build}
# Ninja (a little faster than make on two cores) for a new tree; a tree made earlier keeps its generator.
generator=()
[ -f "$build_dir/CMakeCache.txt" ] || generator=(-G Ninja)
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE="${KVLENS_BUILD_TYPE:-Release}" ${KVLENS_CMAKE_ARGS:-} >/dev/null
targets=()
for t in "$@"; do
  targets+=(--target "$t")
done
cmake --build "$build_dir" -j2 "${targets[@]}"
