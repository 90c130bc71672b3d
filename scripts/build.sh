#!/usr/bin/env bash
# Configures and builds graphpipe in ./build (or $GP_BUILD_DIR). Extra args go to cmake --build.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GP_BUILD_DIR:-build}
GENERATOR=()
if command -v ninja >/dev/null 2>&1 && [[ ! -f "$BUILD_DIR/Makefile" ]]; then GENERATOR=(-G Ninja); fi
cmake -S . -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=${GP_BUILD_TYPE:-RelWithDebInfo} ${GP_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" "$@"
