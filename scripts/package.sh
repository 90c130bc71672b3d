#!/usr/bin/env bash
# Packs a build into a relocatable tarball for a machine with a GPU:
#   dist/graphpipe-<version>-linux-x86_64.tar.gz (or .tar.xz with --xz)
# with bin/graphpipe, bin/gpu-check, the CUDA test executables (tests/), the benchmarks (bench/)
# and the non-CUDA shared libraries they need (lib/, found with ldd; run path $ORIGIN/../lib).
# The CUDA, cuDNN, NCCL and driver libraries are never bundled: the target provides them (a CUDA
# install, or PyTorch's pip wheels, which bin/gpu-check finds by itself).
#
#   scripts/package.sh [--build-dir DIR] [--out DIR] [--fast] [--xz] [--keep-debug]
#
#   --build-dir DIR   an existing build (default ./build or $GP_BUILD_DIR); it is only read
#   --out DIR         where the tarball goes (default ./dist)
#   --fast            gzip -1 (the bundle test); default gzip -6
#   --xz              xz -9e on every core instead of gzip (xz -1 with --fast): a third of the size
#                     (a CUDA build: 40 MB against 122 MB, for a transfer with a size limit), a
#                     minute and a half on 2 cores; unpack with tar xf
#   --keep-debug      keep DWARF debug info (the default keeps only the symbol tables)
#
# Prints the tarball's path last. Needs patchelf (scripts/setup.sh installs it).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
die() {
  echo "package.sh: $*" >&2
  exit 1
}

build_dir=${GP_BUILD_DIR:-$repo/build}
out_dir=$repo/dist
level=6
xz=0
keep_debug=0
while (($#)); do
  case "$1" in
    --build-dir) [[ $# -ge 2 ]] || die "--build-dir needs a folder"; build_dir=$2; shift ;;
    --build-dir=*) build_dir=${1#*=} ;;
    --out) [[ $# -ge 2 ]] || die "--out needs a folder"; out_dir=$2; shift ;;
    --out=*) out_dir=${1#*=} ;;
    --fast) level=1 ;;
    --xz) xz=1 ;;
    --keep-debug) keep_debug=1 ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

((!xz)) || command -v xz >/dev/null || die "--xz needs xz (apt-get install xz-utils)"
command -v patchelf >/dev/null || die "patchelf is missing (scripts/setup.sh installs it; or apt-get install patchelf)"
[[ -f "$build_dir/CMakeCache.txt" ]] || die "$build_dir is not a CMake build folder (no CMakeCache.txt): run scripts/build.sh first"
build_dir=$(cd "$build_dir" && pwd)
[[ -x "$build_dir/cli/graphpipe" ]] || die "$build_dir/cli/graphpipe is not built: run scripts/build.sh (or --build-dir a complete build)"

cache() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt" | head -1; }
version=$(cache CMAKE_PROJECT_VERSION)
[[ -n "$version" ]] || die "no CMAKE_PROJECT_VERSION in $build_dir/CMakeCache.txt"
source_dir=$(cache CMAKE_HOME_DIRECTORY)
git_rev=$(git -C "${source_dir:-$repo}" describe --tags --always --dirty 2>/dev/null || echo unknown)
name=graphpipe-$version-linux-x86_64

# ---- what goes in -------------------------------------------------------------------------------
# (bundle path) <- (build path); the GPU tests are every test_* executable built in tests/cuda.
declare -a dests=() srcs=()
add() { dests+=("$1"); srcs+=("$2"); }
add bin/graphpipe "$build_dir/cli/graphpipe"
cuda_tests=0
for f in "$build_dir"/tests/cuda/test_* "$build_dir"/tests/cuda/nccl_bootstrap_main; do
  [[ -f "$f" && -x "$f" ]] || continue
  add "tests/$(basename "$f")" "$f"
  [[ "$(basename "$f")" == test_cuda_backend ]] && cuda_tests=1
done
for f in "$build_dir"/bench/ops/bench_ops "$build_dir"/bench/train/bench_train "$build_dir"/bench/runtime/bench_runtime \
  "$build_dir"/bench/gpu/*; do
  [[ -f "$f" && -x "$f" ]] || continue
  add "bench/$(basename "$f")" "$f"
done

# ---- which shared libraries -----------------------------------------------------------------------
# Never bundled: glibc (every Linux has one), and the CUDA family, which must match the target's
# driver. libstdc++/libgcc_s only when ours is newer than Ubuntu 24.04's (GLIBCXX_3.4.33).
base_re='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl|libmvec)\.so'
cuda_re='^(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc[a-z-]*|libnvJitLink|libnvidia-[a-z-]*|libcufft[a-z]*|libcurand|libcusparse[a-zA-Z]*|libcusolver[a-zA-Z]*|libnvToolsExt|libnvtx3interop)\.so'
declare -A libs=()
missing=()
for src in "${srcs[@]}"; do
  while read -r soname arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    [[ "$soname" =~ $base_re || "$soname" =~ $cuda_re ]] && continue
    if [[ "$path" == "not" ]]; then
      missing+=("$(basename "$src") needs $soname")
    else
      libs[$soname]=$path
    fi
  done < <(ldd "$src" 2>/dev/null || true)
done
((${#missing[@]} == 0)) || die "ldd cannot find ${missing[0]} (and ${#missing[@]} in all): install it or fix the build"
glibcxx_max=33
bundle_cxx=0
if [[ -n "${libs[libstdc++.so.6]:-}" ]]; then
  ours=$(strings "${libs[libstdc++.so.6]}" | sed -n 's/^GLIBCXX_3\.4\.\([0-9]*\)$/\1/p' | sort -n | tail -1)
  if ((${ours:-0} > glibcxx_max)); then bundle_cxx=1; fi
  if ((!bundle_cxx)); then unset 'libs[libstdc++.so.6]' 'libs[libgcc_s.so.1]'; fi
fi

# ---- stage, patch, pack -------------------------------------------------------------------------
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
stage=$(mktemp -d "$out_dir/.package.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/$name
mkdir -p "$root"/{bin,lib,tests,bench,share}
for i in "${!dests[@]}"; do
  d=$root/${dests[$i]}
  if [[ "$(head -c 4 "${srcs[$i]}")" != $'\x7fELF' ]]; then  # a script (bench_gpu.py): as it is
    install -m 755 "${srcs[$i]}" "$d"
    continue
  fi
  if ((keep_debug)); then cp "${srcs[$i]}" "$d"; else objcopy --strip-debug "${srcs[$i]}" "$d"; fi
  patchelf --set-rpath '$ORIGIN/../lib' "$d"
done
for soname in "${!libs[@]}"; do
  cp -L "${libs[$soname]}" "$root/lib/$soname"
  chmod u+w "$root/lib/$soname"
  patchelf --set-rpath '$ORIGIN' "$root/lib/$soname"
done
install -m 755 "$repo/scripts/bundle/gpu-check" "$root/bin/gpu-check"
install -m 644 "$repo/scripts/bundle/train-memcheck.yaml" "$root/share/train-memcheck.yaml"
install -m 644 "$repo/scripts/bundle/train-shared-gpu.yaml" "$root/share/train-shared-gpu.yaml"
install -m 644 "$repo/scripts/bundle/train-plan-cache.yaml" "$root/share/train-plan-cache.yaml"
install -m 644 "$repo/scripts/bundle/README.txt" "$root/README.txt"
# The data the CUDA tests read (a GPU machine has no source tree and no libonnx-testdata): the
# models of the torch fixtures (test_kernel_parity) and ONNX's node tests (test_kernel_parity, and
# test_cuda_backend's conformance on the GPU; Debian's and the pinned ONNX release's). bin/gpu-check
# points GP_TEST_DATA, GP_ONNX_NODE_TESTS and GP_CURRENT_ONNX_NODE_TESTS at them.
if ((cuda_tests)); then
  for m in "$repo"/tests/data/torch2/*/model.onnx; do
    [[ -f "$m" ]] || continue
    d=$root/share/test-data/torch2/$(basename "$(dirname "$m")")
    mkdir -p "$d"
    install -m 644 "$m" "$d/model.onnx"
  done
  node_tests=/usr/share/libonnx-testdata/data/node
  [[ -d "$node_tests" ]] || die "$node_tests is missing: the CUDA tests need ONNX's node tests (apt-get install libonnx-testdata; scripts/setup.sh does)"
  cp -r "$node_tests" "$root/share/onnx-node-tests"
  # The release the build links (ONNX_DIR: .deps/onnx-<version>-<namespace>/lib/cmake/ONNX).
  onnx_version=$(cache ONNX_DIR | sed -n 's|.*/onnx-\([0-9.]*\)-[^/]*/lib/cmake/ONNX$|\1|p')
  current_node_tests=$repo/.deps/onnx-$onnx_version-node-tests
  [[ -d "$current_node_tests" ]] || die "$current_node_tests is missing: run scripts/setup.sh (it unpacks the pinned ONNX release's node tests)"
  cp -r "$current_node_tests" "$root/share/onnx-current-node-tests"
fi
glibc_needed=$(for i in "${!dests[@]}"; do objdump -T "$root/${dests[$i]}" || true; done 2>/dev/null |
  grep -o 'GLIBC_2\.[0-9]*' | sort -V | tail -1)
{
  echo "graphpipe $version"
  echo "git: $git_rev"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "build type: $(cache CMAKE_BUILD_TYPE); CUDA: $( ((cuda_tests)) && echo "on ($(cache GP_CUDA_ARCHITECTURES))" || echo off)"
  echo "needs: glibc >= ${glibc_needed#GLIBC_}; libstdc++ $( ((bundle_cxx)) && echo bundled || echo "from the system (GLIBCXX_3.4.${ours:-?} or newer)")"
} >"$root/VERSION"
(cd "$root" && find bin tests bench lib share -type f | sort) >"$root/MANIFEST"

if ((xz)); then
  tarball=$out_dir/$name.tar.xz
  tar -C "$stage" -cf - "$name" | xz -T0 "$( ((level == 1)) && echo -1 || echo -9e)" >"$tarball.partial"
else
  tarball=$out_dir/$name.tar.gz
  tar -C "$stage" -cf - "$name" | gzip -"$level" >"$tarball.partial"
fi
mv "$tarball.partial" "$tarball"
echo "package.sh: ${#dests[@]} executables, ${#libs[@]} libraries, CUDA tests $( ((cuda_tests)) && echo included || echo "absent (a build without GP_WITH_CUDA)")" >&2
echo "$tarball"
