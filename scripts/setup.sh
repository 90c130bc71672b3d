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
