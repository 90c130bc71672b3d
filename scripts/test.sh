#!/usr/bin/env bash
# Sets up, builds and runs the test suite with ctest (GPU tests skip without a GPU).
#
#   scripts/test.sh [ctest args]                       the whole suite, in ./build
#   scripts/test.sh --sanitize=address,undefined ...   the whole suite under ASan+UBSan (clang), ./build-asan
#   scripts/test.sh --sanitize=thread ...              the multi-threaded tests under TSan (clang), ./build-tsan
#   scripts/test.sh --fast ...                         skip the tests labelled slow (torch parity, conformance)
#
# Without --sanitize, the Python package's tests (pytest, python/tests) run after ctest against the
# build's package, then scripts/wheel.sh installs it with `pip install .` into a fresh venv and runs
# it from outside the tree (GP_SKIP_PYTHON=1 skips both).
#
# GP_CMAKE_ARGS adds configure flags (CI: -DGP_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
sanitize=""
ctest_args=()
for arg in "$@"; do
  case "$arg" in
    --sanitize=*) sanitize="${arg#--sanitize=}" ;;
    --fast) ctest_args+=(-LE slow) ;;
    *) ctest_args+=("$arg") ;;
  esac
done
scripts/setup.sh

# The suppressions cover leaks and races inside libraries we do not build (OpenMPI, oneDNN's OpenMP
# runtime); findings in graphpipe's own code are never suppressed.
supp="$PWD/tests/sanitizers"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="suppressions=$supp/tsan.supp:ignore_noninstrumented_modules=1:halt_on_error=1:second_deadlock_stack=1"

build_dir=${GP_BUILD_DIR:-build}
case "$sanitize" in
  "") scripts/build.sh ;;
  thread)
    build_dir=build-tsan
    scripts/build.sh --sanitize=thread --target runtime_tests sanitizer_canaries test_caching_allocator
    # The in-process pipeline runtime (workers, communicator, routing, faults), the thread-safety
    # tests of what workers share (oneDNN, the allocator) and the trainer's prefetching data
    # source (a worker thread): all of runtime_tests; and the all-reduce of GPU replicas on fake
    # GPUs (test_caching_allocator), whose sum runs outside the hub's lock.
    ctest_args+=(-R "^(Runtime|InProcessCommunicator|Routing|CpuBackend\.Concurrent|Tensor\.AllocatorIsThreadSafe|Prefetch|SanitizerCanary|CachingAllocatorAdapter\.GpuReplicas)")
    ;;
  *)
    build_dir=build-asan
    scripts/build.sh --sanitize="$sanitize"
    ;;
esac
run_ctest() { ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "$@"; }
if [[ "$sanitize" == *address* ]]; then
  # OpenMPI's plugins (dlopen'ed, unloaded at exit) leave allocations LeakSanitizer can neither
  # symbolize nor suppress, so the ranks that mpirun starts run without leak checking; every other
  # ASan and UBSan check stays on, and the same code paths run with leak checking in-process.
  run_ctest -LE mpi ${ctest_args[@]+"${ctest_args[@]}"}
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" run_ctest -L mpi ${ctest_args[@]+"${ctest_args[@]}"}
else
  run_ctest ${ctest_args[@]+"${ctest_args[@]}"}
fi
if [[ -z "$sanitize" && "${GP_SKIP_PYTHON:-0}" != 1 ]]; then
  echo "test.sh: pytest python/tests (the package in $build_dir/python)"
  # Fails when a test fails and when none is collected (exit code 5).
  PYTHONPATH="$PWD/$build_dir/python" GP_BUILD_DIR="$build_dir" "${GP_PYTHON:-/usr/bin/python3}" -m pytest -q \
    -p no:cacheprovider python/tests
  scripts/wheel.sh --reuse-build "$build_dir"
fi
echo "test.sh${sanitize:+ --sanitize=$sanitize}: finished in $(( $(date +%s) - start )) s"
