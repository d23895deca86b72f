#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang, ASan + UBSan) and runs each for a bounded time
# from a copy of its checked-in corpus (fuzz/corpus/<harness>/, which is never changed) with its
# dictionary (fuzz/dict/<harness>.dict). Prints per harness the executions per second, the
# coverage reached (libFuzzer's cov: edges, ft: features), the inputs it added, and any finding.
# Exits 1 when any harness found a crash, sanitizer report, leak, timeout or out-of-memory; the
# reproducer's path is printed (rerun it: <build>/fuzz/<harness> <reproducer>).
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]      # default 30 s each, every harness
#
# Environment: BMPIPE_FUZZ_BUILD (build directory, default build-fuzz; scripts/test.sh passes its
# build-asan), BMPIPE_FUZZ_JOBS (harnesses run at once, default the number of cores),
# BMPIPE_FUZZ_FINDINGS (where reproducers go, default <build>/fuzz-findings; each run empties its
# harness's folder first), BMPIPE_FUZZ_FLAGS (more libFuzzer flags, e.g. "-fork=1
# -ignore_crashes=1" to keep going past findings and collect them all).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
shift || true
harnesses=("$@")
if ((${#harnesses[@]} == 0)); then
  harnesses=(fuzz_document fuzz_problem fuzz_plan fuzz_mindformers_plan fuzz_launcher_plan fuzz_hf_config fuzz_device fuzz_sapp
             fuzz_run_table fuzz_plan_simulate fuzz_torch_trace fuzz_options fuzz_launcher_setup fuzz_toml)
fi
build=${BMPIPE_FUZZ_BUILD:-build-fuzz}
jobs=${BMPIPE_FUZZ_JOBS:-$(nproc)}
findings=${BMPIPE_FUZZ_FINDINGS:-$build/fuzz-findings}

scripts/bootstrap.sh --deps-only clang libclang-rt-14-dev llvm-14
if [[ ! -f $build/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only" \
    -DBMPIPE_SANITIZE=address,undefined -DBMPIPE_FUZZ=ON -DBMPIPE_BUILD_TESTS=OFF -DBMPIPE_BUILD_BENCH=OFF >&2
elif ! grep -q '^BMPIPE_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "fuzz.sh: $build is not configured with -DBMPIPE_FUZZ=ON (remove it or set BMPIPE_FUZZ_BUILD)" >&2
  exit 2
fi
cmake --build "$build" -j"$(nproc)" --target bmpipe_fuzzers >&2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Reports name file:line through llvm-symbolizer (llvm-14 installs it under /usr/lib/llvm-14/bin).
export PATH=$PATH:/usr/lib/llvm-14/bin
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp}

# One harness: a private corpus copy; reproducers under $findings/<harness>/.
run_one() {
  local h=$1
  rm -rf "${findings:?}/$h"
  mkdir -p "$work/$h.corpus" "$findings/$h"
  cp fuzz/corpus/"$h"/* "$work/$h.corpus/"
  local dict=()
  [[ -f fuzz/dict/$h.dict ]] && dict=(-dict="fuzz/dict/$h.dict")
  local rc=0
  "$build/fuzz/$h" "$work/$h.corpus" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -print_final_stats=1 -artifact_prefix="$findings/$h/" ${BMPIPE_FUZZ_FLAGS:-} >"$work/$h.log" 2>&1 || rc=$?
  echo "$rc" >"$work/$h.rc"
}

running=0
for h in "${harnesses[@]}"; do
  [[ -x $build/fuzz/$h ]] || { echo "fuzz.sh: no harness $build/fuzz/$h" >&2; exit 2; }
  [[ -d fuzz/corpus/$h ]] || { echo "fuzz.sh: no corpus fuzz/corpus/$h" >&2; exit 2; }
  run_one "$h" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
printf '%-22s %-8s %10s %7s %8s %8s %6s\n' harness result 'execs/s' cov ft corpus new
for h in "${harnesses[@]}"; do
  log=$work/$h.log
  rc=$(cat "$work/$h.rc")
  # The last status line ("#N DONE cov: C ft: F corp: ...", or the last before a crash).
  status=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$status")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$status")
  execs=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -n 1)
  [[ -n $execs ]] || execs=$(sed -nE 's/.* exec\/s:? ([0-9]+).*/\1/p' <<<"$status")
  new=$(sed -nE 's/^stat::new_units_added: *([0-9]+).*/\1/p' "$log" | tail -n 1)
  corpus=$(find "$work/$h.corpus" -type f | wc -l)
  artifacts=$(find "$findings/$h" -type f | wc -l)
  result=ok
  ((rc == 0 && artifacts == 0)) || { result=FOUND; failed=1; }
  printf '%-22s %-8s %10s %7s %8s %8s %6s\n' "$h" "$result" "${execs:--}" "${cov:--}" "${ft:--}" "$corpus" "${new:--}"
  if [[ $result == FOUND ]]; then
    artifact=$(sed -nE 's/.*Test unit written to (.*)$/\1/p' "$log" | tail -n 1)
    ((artifacts > 1)) && echo "    $artifacts reproducers in $findings/$h/"
    # What happened (an uncaught exception shows as what() before libFuzzer's "deadly signal"),
    # and the first stack frame in bmpipe's own code.
    kind=$(grep -m1 -E '^ *what\(\):|runtime error:|^PROPERTY VIOLATED|^==[0-9]+== ?ERROR' "$log" || true)
    where=$(grep -E '^ +#[0-9]+ 0x[0-9a-f]+ in .*/(src/bmpipe/[a-z]+|fuzz)/[^ /]+\.(cc|h):[0-9]+' "$log" | head -n 1 |
            sed -E 's/\(anonymous namespace\)/{anonymous}/g; s/^ +#[0-9]+ 0x[0-9a-f]+ in ([^ (]+).* ([^ ]+)$/\2 (\1)/' || true)
    echo "    exit $rc: ${kind:-see the log below}"
    [[ -n $where ]] && echo "    at $where"
    echo "    reproducer: ${artifact:-none written}   (rerun: $build/fuzz/$h ${artifact:-REPRODUCER})"
    if [[ -z $artifact || -z $where ]]; then sed 's/^/    | /' "$log" | tail -n 40; fi
  fi
done
exit "$failed"
