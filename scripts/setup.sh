#!/usr/bin/env bash
# Installs every Debian package graphpipe needs (idempotent; fast when all are present).
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
cd "$(dirname "$0")/.."
install_cudnn_frontend

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
