#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Quick start 2/2: install what is missing, build, and run the whole test suite through CTest.
#
# Stages, each timed (the times go in the README):
#   1. the Release build users run (GCC, build/, reusing what run.sh built) and the whole suite on it;
#   2. scripts/sanitize.sh: core's suite under AddressSanitizer + UBSan (Clang, build-asan/), the
#      threaded core tests under ThreadSanitizer five times in a row (build-tsan/), and every fuzz
#      target for 20 s (KVLENS_FUZZ_SECONDS; scripts/fuzz.sh 600 for a long run), built in the ASan tree.
#   KVLENS_SANITIZERS=0 ./scripts/test.sh     stage 1 only
#   ./scripts/test.sh -R tst_spec             stage 1 only, with arguments passed to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
export QT_QPA_PLATFORM=offscreen
build_dir=${KVLENS_BUILD_DIR:-build}
started=$(date +%s)

SECONDS=0
printf '\n== Release: build (%s/) ==\n' "$build_dir"
./scripts/build.sh
echo "(built in ${SECONDS} s)"; SECONDS=0
printf '\n== Release: the whole suite ==\n'
(cd "$build_dir" && ctest --output-on-failure -j2 "$@")
echo "(ran in ${SECONDS} s)"
if [ "${KVLENS_SANITIZERS:-1}" != 0 ] && [ $# -eq 0 ]; then
  ./scripts/sanitize.sh "${KVLENS_FUZZ_SECONDS:-20}"
fi
elapsed=$(( $(date +%s) - started ))
echo "test.sh: every stage passed in $((elapsed / 60)) min $((elapsed % 60)) s"
