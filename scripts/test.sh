#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Quick start 2/2: install what is missing, build, and run the whole test suite through CTest.
#
# By default (and in CI) the suite is built and run under AddressSanitizer + UBSan, then the
# threaded core tests under ThreadSanitizer, then every fuzz target for 60 s: scripts/sanitize.sh.
# The sanitized build runs the same tests on the same code (results are deterministic and
# bit-identical across optimisation levels: no fast-math), so the Release build is not built a
# second time here; scripts/run.sh builds it.
#   KVLENS_SANITIZERS=0 ./scripts/test.sh     the Release build in build/ and the suite, nothing else
#   ./scripts/test.sh -R tst_spec             the same, with arguments passed to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
if [ "${KVLENS_SANITIZERS:-1}" != 0 ] && [ $# -eq 0 ]; then
  exec ./scripts/sanitize.sh "${KVLENS_FUZZ_SECONDS:-60}"
fi
./scripts/build.sh
export QT_QPA_PLATFORM=offscreen
cd "${KVLENS_BUILD_DIR:-build}"
ctest --output-on-failure -j2 "$@"
