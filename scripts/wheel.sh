#!/usr/bin/env bash
# graphpipe's Python package as a user installs it: `pip install .` (scikit-build-core builds the C++
# libraries and the nanobind extension) into a fresh venv that sees the system's packages (numpy,
# torch), then, from outside the repository, `import graphpipe` and the worked example.
#
#   scripts/wheel.sh                        venv in build/wheel-venv, CMake build in build/python-wheel
#   scripts/wheel.sh --reuse-build DIR      CMake build in DIR (scripts/test.sh: its own build, so only
#                                           the extension is rebuilt; its tests and benches stay configured)
#
# Needs scripts/setup.sh first (Debian packages, ONNX and nanobind in .deps/) and PyPI (pip fetches
# scikit-build-core and nanobind for the isolated build).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${GP_PYTHON:-/usr/bin/python3}
settings=()
case "${1:-}" in
  --reuse-build)
    [[ -n "${2:-}" && -f "$2/CMakeCache.txt" ]] || { echo "wheel.sh: --reuse-build needs a configured build folder" >&2; exit 2; }
    build=$(cd "$2" && pwd)
    settings=(--config-settings=build-dir="$build"
              --config-settings=cmake.define.GP_BUILD_TESTS="$(sed -n 's/^GP_BUILD_TESTS:BOOL=//p' "$build/CMakeCache.txt")"
              --config-settings=cmake.define.GP_BUILD_BENCH="$(sed -n 's/^GP_BUILD_BENCH:BOOL=//p' "$build/CMakeCache.txt")")
    ;;
  "") ;;
  *) echo "wheel.sh: unknown argument '$1' (use --reuse-build DIR or nothing)" >&2; exit 2 ;;
esac
venv=$root/build/wheel-venv
start=$(date +%s)
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
echo "wheel.sh: pip install . into $venv"
"$venv/bin/python" -m pip install -q --no-deps ${settings[@]+"${settings[@]}"} "$root"
cd "$(mktemp -d)"  # outside the tree: the installed package, not python/ or the build folder
"$venv/bin/python" -c "import graphpipe, os; print('wheel.sh: graphpipe', graphpipe.__version__, 'from', os.path.dirname(graphpipe.__file__))"
"$venv/bin/python" - <<'PY'
import graphpipe as gp
plan = gp.partition(gp.load("zoo:mmt:tiny"), devices=4, memory="4GiB", batch=32)
assert plan.samples_per_s > 0 and plan.stages
print(f"wheel.sh: planned zoo mmt on 4 devices: {len(plan.stages)} stages, {plan.samples_per_s:.1f} samples/s")
PY
if "$venv/bin/python" -c "import torch" 2>/dev/null; then
  "$venv/bin/python" "$root/examples/python/two_branch.py" >/dev/null
  echo "wheel.sh: examples/python/two_branch.py ran from the installed package (weights equal PyTorch's)"
else
  echo "wheel.sh: PyTorch missing: examples/python/two_branch.py not run"
fi
echo "wheel.sh: finished in $(( $(date +%s) - start )) s"
