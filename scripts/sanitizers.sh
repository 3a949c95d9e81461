#!/usr/bin/env bash
# The sanitizer lanes of CI (docs/testing.md), each a build at -O1 without debug information (half the
# compile time of RelWithDebInfo) of the test binaries it runs:
#   asan: AddressSanitizer + UndefinedBehaviorSanitizer (UB fatal) over the core, runtime, ir, kernels and
#         seal tests (the whole suite under ASan takes about 26 minutes to build on 2 cores: `asan` preset);
#   tsan: ThreadSanitizer over the core tests (the borrow tracker's atomic counts) and the runtime tests
#         (detached submission, its reaper and completion threads). OpenMP is held to one thread:
#         libgomp is not built with TSan, so its barriers would read as races.
# Usage: scripts/sanitizers.sh [asan|tsan]... (default: both). A finding fails the lane.
set -euo pipefail
cd "$(dirname "$0")/.."
lanes=("$@")
[ ${#lanes[@]} -eq 0 ] && lanes=(asan tsan)
run_binaries() {
  local dir=$1
  shift
  for t in "$@"; do
    local bin
    bin=$(find "$dir/tests" -type f -name "$t" -perm -u+x | head -n 1)
    if [ -z "$bin" ]; then
      echo "sanitizers: $t was not built in $dir" >&2
      return 1
    fi
    echo "sanitizers: $bin"
    "$bin" --gtest_brief=1
  done
}
for lane in "${lanes[@]}"; do
  start=$(date +%s)
  case "$lane" in
    asan)
      asan_tests=(pact_core_tests pact_runtime_tests pact_ir_tests pact_kernels_tests pact_seal_tests
        pact_seal_prebuild_tests pact_seal_admission_tests pact_seal_cuda_abi_tests)
      cmake --preset asan-ci >/dev/null
      # Only what the lane runs: the rest of the tree is the release build's.
      cmake --build --preset asan-ci --target "${asan_tests[@]}"
      ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        run_binaries build/asan-ci "${asan_tests[@]}"
      ;;
    tsan)
      cmake --preset tsan >/dev/null
      cmake --build --preset tsan --target pact_core_tests pact_runtime_tests
      OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        run_binaries build/tsan pact_core_tests pact_runtime_tests
      ;;
    *)
      echo "sanitizers: unknown lane '$lane' (asan, tsan)" >&2
      exit 2
      ;;
  esac
  echo "sanitizers: $lane lane passed in $(($(date +%s) - start)) s"
done
