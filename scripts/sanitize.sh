#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# The test suite as CI runs it (scripts/test.sh calls this):
#   1. core and its tests built with Clang and run under AddressSanitizer + UBSan (CMake preset "asan", build-asan/;
#      the Qt layers are tested in the Release stage only);
#   2. core's runner, cancellation and import-cache tests under ThreadSanitizer (preset "tsan", build-tsan/),
#      five times in a row: a race that shows by timing must not pass by luck;
#   3. every libFuzzer target for a bounded time (scripts/fuzz.sh, linked in build-asan/).
# Usage: scripts/sanitize.sh [fuzz seconds per target, default 60]. Any finding fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
export QT_QPA_PLATFORM=offscreen

stage() { printf '\n== %s ==\n' "$*"; }

# The sanitizer presets and the fuzz targets build with Clang (and its sanitizer runtimes).
./scripts/deps.sh clang libclang-rt-dev lld

SECONDS=0
stage "AddressSanitizer + UBSan: build"
cmake --preset asan >/dev/null
cmake --build --preset asan
echo "(built in ${SECONDS} s)"; SECONDS=0
stage "AddressSanitizer + UBSan: core's suite"
ctest --preset asan

echo "(ran in ${SECONDS} s)"; SECONDS=0
stage "ThreadSanitizer: build (runner, cancellation, import cache, shards)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan
echo "(built in ${SECONDS} s)"; SECONDS=0
stage "ThreadSanitizer: run, five times in a row"
# Qt's own libraries are not instrumented; the tests exercise core's threads, which are. The few
# reports that come from inside Qt alone (its test watchdog) are suppressed by name: scripts/tsan.supp.
ctest --preset tsan --repeat until-fail:5

echo "(ran in ${SECONDS} s)"; SECONDS=0
stage "libFuzzer: ${seconds} s per target"
./scripts/fuzz.sh "$seconds"
echo "(fuzz stage took ${SECONDS} s)"
