#!/usr/bin/env bash
# Configures and builds graphpipe. Extra args go to cmake --build (e.g. --target graphpipe).
#
#   scripts/build.sh                               ./build (or $GP_BUILD_DIR), RelWithDebInfo, gcc
#   scripts/build.sh --sanitize=address,undefined  ./build-asan: clang, ASan+UBSan, libFuzzer targets
#   scripts/build.sh --sanitize=thread             ./build-tsan: clang, TSan
#
# GP_CMAKE_ARGS adds configure flags (CI: -DGP_WERROR=ON). GP_DEBUG_INFO=0 builds ./build without
# DWARF (-O2 -DNDEBUG, no -g: about 30% less compile time a file; CI sets it, since nothing there
# reads debug info). Prints the build folder's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=""
build_args=()
for arg in "$@"; do
  case "$arg" in
    --sanitize=*) sanitize="${arg#--sanitize=}" ;;
    *) build_args+=("$arg") ;;
  esac
done
config=(-DCMAKE_BUILD_TYPE=${GP_BUILD_TYPE:-RelWithDebInfo})
# The Python package builds against Debian's interpreter (its numpy and torch are what the tests
# use), not whichever python3 comes first on PATH; GP_PYTHON picks another.
python=${GP_PYTHON:-/usr/bin/python3}
if [[ -x "$python" ]]; then config+=(-DPython_EXECUTABLE="$python"); fi
case "$sanitize" in
  "")
    BUILD_DIR=${GP_BUILD_DIR:-build}
    if [[ "${GP_DEBUG_INFO:-1}" == 0 ]]; then
      config+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG"
               "-DCMAKE_CUDA_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG")
    fi
    ;;
  address,undefined|undefined,address|address|thread)
    BUILD_DIR=build-asan
    fuzz=ON
    if [[ "$sanitize" == thread ]]; then BUILD_DIR=build-tsan; fuzz=OFF; fi
    # -O1 and line tables keep a sanitized build of the whole tree affordable on 2 cores.
    config+=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
             "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG"
             "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG"
             -DGP_SANITIZE="$sanitize" -DGP_FUZZ=$fuzz -DGP_WITH_CUDA=OFF -DGP_BUILD_BENCH=OFF -DGP_WITH_PYTHON=OFF)
    ;;
  *)
    echo "build.sh: unknown --sanitize=$sanitize (use address,undefined or thread)" >&2
    exit 2
    ;;
esac
GENERATOR=()
if command -v ninja >/dev/null 2>&1 && [[ ! -f "$BUILD_DIR/Makefile" ]]; then GENERATOR=(-G Ninja); fi
cmake -S . -B "$BUILD_DIR" ${GENERATOR[@]+"${GENERATOR[@]}"} "${config[@]}" ${GP_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" ${build_args[@]+"${build_args[@]}"}
