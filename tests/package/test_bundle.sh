#!/usr/bin/env bash
# The relocatable bundle (scripts/package.sh) of this build, unpacked in a temporary folder: the
# binary runs from there, ldd resolves every library of every bundled ELF inside the bundle (or
# to glibc and libstdc++) except the CUDA family, none of which is bundled, and bin/gpu-check
# writes its report and fails when a test fails.
#   test_bundle.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
fail() {
  echo "test_bundle: $*" >&2
  exit 1
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gp_bundle_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

tarball=$("$src/scripts/package.sh" --build-dir "$build" --out "$tmp/dist" --fast | tail -1)
[[ -f "$tarball" ]] || fail "package.sh printed '$tarball', which is not a file"
[[ "$(basename "$tarball")" =~ ^graphpipe-[0-9]+\.[0-9]+\.[0-9]+-linux-x86_64\.tar\.gz$ ]] ||
  fail "unexpected tarball name $(basename "$tarball")"
mkdir "$tmp/elsewhere" "$tmp/cwd"
tar -C "$tmp/elsewhere" -xzf "$tarball"
rm -rf "$tmp/dist"
# --xz: the same bundle as .tar.xz.
xz_tarball=$("$src/scripts/package.sh" --build-dir "$build" --out "$tmp/dist" --fast --xz | tail -1)
[[ "$(basename "$xz_tarball")" =~ ^graphpipe-[0-9]+\.[0-9]+\.[0-9]+-linux-x86_64\.tar\.xz$ ]] ||
  fail "unexpected --xz tarball name $(basename "$xz_tarball")"
tar -tJf "$xz_tarball" >"$tmp/xz-list" || fail "tar cannot list the --xz tarball"
grep -q '^graphpipe-[^/]*/bin/gpu-check$' "$tmp/xz-list" || fail "the --xz tarball has no bin/gpu-check"
rm -rf "$tmp/dist"
root=$(echo "$tmp"/elsewhere/graphpipe-*)
[[ -d "$root" ]] || fail "the tarball has no graphpipe-* folder"
cd "$tmp/cwd"

version=$("$root/bin/graphpipe" --version) || fail "bin/graphpipe --version failed in the unpacked bundle"
[[ "$version" == "graphpipe "* ]] || fail "bin/graphpipe --version printed '$version'"
"$root/bin/graphpipe" --help >/dev/null || fail "bin/graphpipe --help failed in the unpacked bundle"

cuda_re='^(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc[a-z-]*|libnvJitLink)\.so'
system_re='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libutil|libresolv|libmvec|libstdc\+\+|libgcc_s)\.so'
elves=0
problems=()
while IFS= read -r f; do
  [[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" == '177ELF' ]] || continue
  elves=$((elves + 1))
  rel=${f#"$root"/}
  [[ "$(basename "$f")" =~ $cuda_re ]] && problems+=("$rel: a CUDA-family library is bundled")
  while read -r soname arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    if [[ "$soname" =~ $cuda_re ]]; then
      [[ "$path" != "$root"/* ]] || problems+=("$rel: $soname resolves inside the bundle ($path)")
    elif [[ "$path" == "not" ]]; then
      problems+=("$rel: $soname not found")
    elif [[ ! "$soname" =~ $system_re && "$(readlink -f "$path")" != "$root"/lib/* ]]; then
      problems+=("$rel: $soname resolves outside the bundle ($path)")
    fi
  done < <(ldd "$f")
done < <(find "$root/bin" "$root/lib" "$root/tests" "$root/bench" -type f)
((${#problems[@]} == 0)) || fail "${problems[0]} (${#problems[@]} problems in all)"
((elves >= 2)) || fail "only $elves ELF files in the bundle"

# gpu-check from another folder: one host test, its report, the absent CUDA tests named as such.
"$root/bin/gpu-check" --tests '^test_gemm_mapping$' --no-bench --no-memcheck --report "$tmp/report.txt" >/dev/null 2>&1 ||
  fail "bin/gpu-check failed: $(head -1 "$tmp/report.txt" 2>/dev/null)"
grep -q '^gpu-check: PASS' "$tmp/report.txt" || fail "the report has no PASS summary line"
grep -q '^test_gemm_mapping  *ok  *passed' "$tmp/report.txt" || fail "the report has no test_gemm_mapping result"
if [[ ! -x "$root/tests/test_cuda_backend" ]]; then
  grep -q 'CUDA tests absent' "$tmp/report.txt" || fail "a bundle without CUDA tests must say they are absent"
fi

# The CUDA tests' data travels in the bundle (a GPU machine has no source tree or libonnx-testdata):
# the kernel-parity test reads the torch fixtures and ONNX's node tests from there, none skipped.
if [[ -x "$root/tests/test_kernel_parity" ]]; then
  "$root/bin/gpu-check" --tests '^test_kernel_parity$' --no-bench --no-memcheck --report "$tmp/parity.txt" >/dev/null 2>&1 ||
    fail "test_kernel_parity failed in the bundle: $(grep -m1 'failed:' "$tmp/parity.txt" 2>/dev/null)"
  grep -Eq '^test_kernel_parity +ok +passed +[0-9]+ +failed +0 +skipped +0 ' "$tmp/parity.txt" ||
    fail "test_kernel_parity did not pass every test unskipped in the bundle: $(grep -m1 '^test_kernel_parity' "$tmp/parity.txt")"
fi

# A benchmark run it does not know is a bad argument (exit 2), named with the ones it has.
rc=0
"$root/bin/gpu-check" --runs gpu,graphs --report "$tmp/runs.txt" >/dev/null 2>"$tmp/runs.err" || rc=$?
((rc == 2)) || fail "gpu-check --runs gpu,graphs exited $rc, not 2"
grep -q 'cuda-graphs' "$tmp/runs.err" || fail "gpu-check's --runs error does not name the runs: $(cat "$tmp/runs.err")"

# gpu-check can fail: a test executable that reports a failing test makes it exit 1 and name it.
cat >"$root/tests/test_zz_fails" <<'SH'
#!/bin/sh
echo "[  FAILED  ] Canary.Fails (0 ms)"
echo "[  PASSED  ] 1 test."
echo "[  FAILED  ] 1 test, listed below:"
echo "[  FAILED  ] Canary.Fails"
exit 1
SH
chmod +x "$root/tests/test_zz_fails"
if "$root/bin/gpu-check" --tests 'test_zz_fails' --no-bench --no-memcheck --report "$tmp/fail.txt" >/dev/null 2>&1; then
  fail "bin/gpu-check passed although a test failed"
fi
grep -q '^gpu-check: FAIL' "$tmp/fail.txt" || fail "the failing run's report has no FAIL summary"
grep -q 'failed:  Canary.Fails' "$tmp/fail.txt" || fail "the failing run's report does not name Canary.Fails"

# --jobs N: the executables N at a time and test_cuda_backend in N shards; a failure among them is
# still found and named; --jobs 0 is a bad argument.
if "$root/bin/gpu-check" --jobs 3 --tests '^test_(zz_fails|gemm_mapping|cuda_backend)$' --no-bench --no-memcheck \
  --report "$tmp/jobs.txt" >/dev/null 2>&1; then
  fail "bin/gpu-check --jobs 3 passed although a test failed"
fi
grep -q 'failed:  Canary.Fails' "$tmp/jobs.txt" || fail "gpu-check --jobs 3 does not name Canary.Fails"
grep -q '^test_gemm_mapping  *ok  *passed' "$tmp/jobs.txt" || fail "gpu-check --jobs 3 has no test_gemm_mapping result"
if [[ -x "$root/tests/test_cuda_backend" ]]; then
  for k in 1 2 3; do
    grep -q "^test_cuda_backend\[$k/3\]  *ok  *passed" "$tmp/jobs.txt" || fail "gpu-check --jobs 3 has no shard $k/3 of test_cuda_backend"
  done
  shards=$(grep -o '^gpu-check: FAIL: .* in [0-9]* executables' "$tmp/jobs.txt" | head -1)
  [[ "$shards" == *" in 3 executables" ]] || fail "gpu-check --jobs 3 counted the shards as executables: $shards"
fi
rc=0
"$root/bin/gpu-check" --jobs 0 --report "$tmp/jobs0.txt" >/dev/null 2>&1 || rc=$?
((rc == 2)) || fail "gpu-check --jobs 0 exited $rc, not 2"
echo "test_bundle: $elves ELF files resolve; $version; gpu-check passes and fails as it should"
