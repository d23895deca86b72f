#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite, then the checked builds (what
# CI runs):
#   release  the Release build (build/) and the whole ctest suite;
#   asan     an AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/, clang -O1, with
#            the fuzz harnesses) and the whole ctest suite in it;
#   fuzz     every libFuzzer harness for BMPIPE_FUZZ_SECONDS (default 45) s from its checked-in
#            corpus (scripts/fuzz.sh, on build-asan/);
#   tsan     a ThreadSanitizer build of the search tests only (build-tsan/) and those tests;
#   python   the Python package built and installed into build/pyenv (pyproject.toml, nanobind) and
#            its tests (python/tests, pytest; scripts/python-tests.sh);
#   exports  the golden exports (tests/golden/exports) checked by the frameworks' own code:
#            megatron-core, DeepSpeed, torchtitan and torch pipelining in a pinned virtual
#            environment (build/pyenv, scripts/pyenv.sh; scripts/framework-tests.sh).
# Every part runs even when an earlier one failed; the summary gives each part's time and result,
# and the exit status is 1 if any failed. 29 to 41 minutes on 2 cores from a clean clone (README).
#
#   scripts/test.sh [--fast]
#
# --fast runs the fast tier instead, for the edit-build-test loop: the Release build
# (scripts/bootstrap.sh) and its ctest suite with BMPIPE_FAST=1, which skips the long property and
# scale tests (those marked BMPIPE_SLOW_TEST() in tests/), and nothing else (no asan, fuzz, tsan,
# python or exports part). 4 to 8 s on 2 cores after a build (the whole Release suite: about 60 s).
# Without --fast, BMPIPE_FAST is unset: every test runs.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
usage() {
  echo "usage: scripts/test.sh [--fast]" >&2
  exit 2
}
fast_tier=0
if (($# > 1)); then
  usage
elif (($# == 1)); then
  [[ $1 == --fast ]] || usage
  fast_tier=1
fi
unset BMPIPE_FAST
# Sanitizer reports are fatal and symbolized (llvm-14's llvm-symbolizer); leaks in third-party
# libraries are listed in scripts/lsan.supp.
export PATH=$PATH:/usr/lib/llvm-14/bin
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
clang_build=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug
             "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only" -DBMPIPE_BUILD_BENCH=OFF)

summary=()
failed=0
# part NAME COMMAND...: runs the command, timing it, and records the result.
part() {
  local name=$1
  shift
  echo "==== test.sh: $name" >&2
  local start=$SECONDS rc=0
  "$@" || rc=$?
  local took=$((SECONDS - start))
  if ((rc == 0)); then
    summary+=("$(printf '%-8s ok      %3dm%02ds' "$name" $((took / 60)) $((took % 60)))")
  else
    summary+=("$(printf '%-8s FAILED  %3dm%02ds  (exit %d)' "$name" $((took / 60)) $((took % 60)) "$rc")")
    failed=1
  fi
}

release() {
  scripts/bootstrap.sh && ctest --test-dir build --output-on-failure -j"$jobs"
}

asan() {
  scripts/bootstrap.sh --deps-only clang libclang-rt-14-dev llvm-14 &&
    cmake -S . -B build-asan "${clang_build[@]}" -DBMPIPE_SANITIZE=address,undefined -DBMPIPE_FUZZ=ON >&2 &&
    cmake --build build-asan -j"$jobs" >&2 &&
    ctest --test-dir build-asan --output-on-failure -j"$jobs"
}

fuzz() {
  BMPIPE_FUZZ_BUILD=build-asan scripts/fuzz.sh "${BMPIPE_FUZZ_SECONDS:-45}"
}

# The search plans configurations on threads; the other tests are single-threaded. clang 14's
# TSan cannot map its shadow memory under the address randomization of some newer kernels
# (vm.mmap_rnd_bits > 28), so the tests run with it turned off where setarch can.
tsan() {
  local norandom=()
  setarch "$(uname -m)" -R true 2>/dev/null && norandom=(setarch "$(uname -m)" -R)
  scripts/bootstrap.sh --deps-only clang libclang-rt-14-dev llvm-14 &&
    cmake -S . -B build-tsan "${clang_build[@]}" -DBMPIPE_SANITIZE=thread >&2 &&
    cmake --build build-tsan -j"$jobs" --target search_test >&2 &&
    "${norandom[@]}" ctest --test-dir build-tsan -R '^Search\.' --output-on-failure -j"$jobs"
}

# The fast tier: the Release build, then its suite without the slow tests.
fast_tests() {
  BMPIPE_FAST=1 ctest --test-dir build --output-on-failure -j"$jobs"
}

if ((fast_tier)); then
  part build scripts/bootstrap.sh
  ((failed)) || part fast fast_tests
  echo "==== test.sh --fast summary"
  printf '%s\n' "${summary[@]}"
  exit "$failed"
fi

part release release
part asan asan
part fuzz fuzz
part tsan tsan
part python scripts/python-tests.sh
part exports scripts/framework-tests.sh

echo "==== test.sh summary"
printf '%s\n' "${summary[@]}"
exit "$failed"
