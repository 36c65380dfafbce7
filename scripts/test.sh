#!/usr/bin/env bash
# The whole test suite: installs what is missing, configures, builds, runs every test.
# GPU tests (ctest label "gpu") skip visibly on a machine without a GPU. Exits non-zero on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
(cd "$RESHARD_BUILD_DIR" && ctest --output-on-failure -j"$(nproc)" --timeout 900)
# The sanitizer build of the fast unit tests and a short run of every fuzz target (docs/robustness.md).
FUZZ_SECONDS=${FUZZ_SECONDS:-4} bash "$RESHARD_ROOT/scripts/hardening.sh"
