#!/usr/bin/env bash
# Sets up, builds, and runs the whole test suite with ctest (GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${GP_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
echo "test.sh: finished in $(( $(date +%s) - start )) s"
