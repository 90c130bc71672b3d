#!/usr/bin/env bash
# Installs every Debian package graphpipe needs and builds the pinned ONNX C++ library into .deps/
# (idempotent; fast when all are present).
# CUDA, cuDNN and NCCL are not Debian packages: they are used when found under /usr/local/cuda.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  libboost-graph-dev libspdlog-dev
  libdnnl-dev ocl-icd-opencl-dev opencl-headers
  libopenmpi-dev openmpi-bin
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev
  # The relocatable bundle (scripts/package.sh): run paths of the copied executables and libraries.
  patchelf
  # Sanitizers, libFuzzer and the format check (scripts/test.sh --sanitize, scripts/fuzz.sh, scripts/format.sh).
  clang libclang-rt-14-dev clang-format
  # Reference models and checks: torch.onnx.export, ONNX's own conformance data.
  python3-torch python3-torchvision python3-onnx python3-numpy libonnx-testdata
  # pip fetches the pinned ONNX source distribution (and cudnn-frontend's headers) from PyPI.
  python3-pip
  # The Python package (python/): headers for the extension, pytest, a venv for the wheel's check,
  # PyYAML for configs given as YAML paths.
  python3-dev python3-venv python3-pytest python3-yaml
)

missing=()
for p in "${PACKAGES[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# cudnn-frontend (MIT, header-only C++ over cuDNN's graph API) is not a Debian package: its PyPI
# wheel carries the headers. Pinned, unpacked into .deps/ (ignored by git), only where the CUDA
# toolkit is present (the CUDA backend is the only user).
CUDNN_FRONTEND_VERSION=1.32.0
install_cudnn_frontend() {
  local dest=.deps/cudnn-frontend-$CUDNN_FRONTEND_VERSION
  [[ -f "$dest/include/cudnn_frontend.h" ]] && return 0
  [[ -x /usr/local/cuda/bin/nvcc ]] || return 0
  echo "setup: fetching cudnn-frontend $CUDNN_FRONTEND_VERSION headers from PyPI"
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download -q "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" --no-deps --only-binary=:all: \
    --python-version 3.11 --platform manylinux_2_28_x86_64 -d "$tmp"
  mkdir -p .deps
  python3 - "$tmp"/nvidia_cudnn_frontend-*.whl "$dest.partial" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.startswith("include/") or n.endswith("LICENSE.txt")]
    z.extractall(sys.argv[2], names)
PY
  rm -rf "$dest" && mv "$dest.partial" "$dest" && rm -rf "$tmp"
}

# ONNX: Debian's libonnx is 1.12 (IR <= 8, opsets <= 17), too old for models from a current
# PyTorch. Pinned ONNX release built from its PyPI source distribution against the system
# Protobuf: only the C++ libraries (static onnx and onnx_proto, ONNX_ML on), installed into
# .deps/ (ignored by git); CMake links this one and never Debian's. python3-onnx stays installed
# for the tests' Python side.
ONNX_VERSION=1.18.0
# Its own C++ namespace and proto package (as PyTorch's onnx_torch): Debian's libonnx (which libtorch
# and python3-onnx load) registers package `onnx` in the shared Protobuf, and a second registration
# of it in one process aborts it, so graphpipe's Python extension could not share a process with them.
ONNX_NAMESPACE=onnx_gp
ONNX_SDIST_SHA256=3d8dbf9e996629131ba3aa1afd1d8239b660d1f830c6688dd7e03157cccd6b9c
install_onnx() {
  local dest=$PWD/.deps/onnx-$ONNX_VERSION-$ONNX_NAMESPACE
  [[ -f "$dest/lib/cmake/ONNX/ONNXConfig.cmake" ]] && return 0
  local tmp t0
  tmp=$(mktemp -d)
  t0=$(date +%s)
  fail() { echo "setup: building ONNX $ONNX_VERSION failed: $* (log: $tmp/build.log)" >&2; exit 1; }
  echo "setup: fetching the ONNX $ONNX_VERSION source distribution from PyPI"
  python3 -m pip download -q "onnx==$ONNX_VERSION" --no-deps --no-binary :all: -d "$tmp" \
    || fail "pip download onnx==$ONNX_VERSION --no-binary :all:"
  echo "$ONNX_SDIST_SHA256  $tmp/onnx-$ONNX_VERSION.tar.gz" | sha256sum -c --quiet \
    || fail "the sdist's sha256 is not the pinned $ONNX_SDIST_SHA256"
  tar -xzf "$tmp/onnx-$ONNX_VERSION.tar.gz" -C "$tmp"
  install_onnx_node_tests "$tmp/onnx-$ONNX_VERSION.tar.gz"
  echo "setup: configuring ONNX $ONNX_VERSION (C++ libraries only, system Protobuf)"
  cmake -S "$tmp/onnx-$ONNX_VERSION" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$dest.partial" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DBUILD_SHARED_LIBS=OFF -DONNX_USE_PROTOBUF_SHARED_LIBS=ON -DONNX_ML=ON -DONNX_NAMESPACE=$ONNX_NAMESPACE \
    -DONNX_BUILD_TESTS=OFF -DONNX_BUILD_PYTHON=OFF -DONNX_GEN_PB_TYPE_STUBS=OFF \
    -DONNX_WERROR=OFF >"$tmp/build.log" 2>&1 || fail "cmake configure"
  echo "setup: building ONNX $ONNX_VERSION with $(nproc) jobs (about 6 minutes on 2 cores)"
  cmake --build "$tmp/build" -j "$(nproc)" >>"$tmp/build.log" 2>&1 || fail "cmake --build"
  rm -rf "$dest.partial"
  cmake --install "$tmp/build" >>"$tmp/build.log" 2>&1 || fail "cmake --install"
  rm -rf "$dest" && mv "$dest.partial" "$dest" && rm -rf "$tmp"
  echo "setup: ONNX $ONNX_VERSION installed into .deps/ in $(( $(date +%s) - t0 )) s"
}

# ONNX's own node tests of the pinned release (1,450 models with inputs and expected outputs, about
# 10 MB; Debian's libonnx-testdata holds 1.12's): unpacked from the same sha256-checked source
# distribution into .deps/, where the conformance tests read them. $1: the sdist, when at hand.
install_onnx_node_tests() {
  local dest=$PWD/.deps/onnx-$ONNX_VERSION-node-tests
  [[ -f "$dest/test_abs/model.onnx" ]] && return 0
  local tmp sdist=${1:-}
  tmp=$(mktemp -d)
  if [[ -z "$sdist" ]]; then
    echo "setup: fetching the ONNX $ONNX_VERSION source distribution from PyPI (for its node tests)"
    python3 -m pip download -q "onnx==$ONNX_VERSION" --no-deps --no-binary :all: -d "$tmp" \
      || { echo "setup: pip download onnx==$ONNX_VERSION --no-binary :all: failed" >&2; exit 1; }
    sdist=$tmp/onnx-$ONNX_VERSION.tar.gz
    echo "$ONNX_SDIST_SHA256  $sdist" | sha256sum -c --quiet \
      || { echo "setup: the ONNX sdist's sha256 is not the pinned $ONNX_SDIST_SHA256" >&2; exit 1; }
  fi
  tar -xzf "$sdist" -C "$tmp" "onnx-$ONNX_VERSION/onnx/backend/test/data/node" \
    || { echo "setup: $sdist holds no onnx/backend/test/data/node" >&2; exit 1; }
  mkdir -p .deps
  rm -rf "$dest" && mv "$tmp/onnx-$ONNX_VERSION/onnx/backend/test/data/node" "$dest" && rm -rf "$tmp"
  echo "setup: ONNX $ONNX_VERSION's node tests unpacked into .deps/"
}

# nanobind (the Python extension's binding library) is not a Debian package: its pinned PyPI
# wheel (pure Python: headers, sources and CMake files) is unpacked into .deps/.
NANOBIND_VERSION=3.1.0
NANOBIND_WHEEL_SHA256=96984dbe8154ffb86e653b1b60aaeed6985c710c5e75ad0279eb87943c66292d
install_nanobind() {
  local dest=.deps/nanobind-$NANOBIND_VERSION
  [[ -f "$dest/nanobind/cmake/nanobind-config.cmake" ]] && return 0
  echo "setup: fetching nanobind $NANOBIND_VERSION from PyPI"
  local tmp
  tmp=$(mktemp -d)
  /usr/bin/python3 -m pip download -q "nanobind==$NANOBIND_VERSION" --no-deps --only-binary=:all: -d "$tmp"
  echo "$NANOBIND_WHEEL_SHA256  $tmp/nanobind-$NANOBIND_VERSION-py3-none-any.whl" | sha256sum -c --quiet \
    || { echo "setup: the nanobind wheel's sha256 is not the pinned $NANOBIND_WHEEL_SHA256" >&2; exit 1; }
  mkdir -p .deps
  /usr/bin/python3 - "$tmp/nanobind-$NANOBIND_VERSION-py3-none-any.whl" "$dest.partial" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
  rm -rf "$dest" && mv "$dest.partial" "$dest" && rm -rf "$tmp"
}

cd "$(dirname "$0")/.."
install_cudnn_frontend

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# After the packages: the ONNX build needs cmake, ninja, protoc and libprotobuf-dev.
install_onnx
install_onnx_node_tests
install_nanobind
echo "setup: done"
