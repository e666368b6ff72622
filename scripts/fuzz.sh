#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer, every finding fatal) into ${FUZZ_BUILD_DIR:-build-fuzz} and
# runs each for SECONDS_PER_TARGET seconds (default 60), one after the other, starting
# from its seed corpus in tests/fuzz/corpus/<target>/. Fails on any crash, sanitizer
# report, escaped exception, hang (an input running longer than ${FUZZ_TIMEOUT_S:-10} s),
# leak or allocation over ${FUZZ_RSS_MB:-2048} MB, and prints the input that caused it
# and the command that replays it.
#   scripts/fuzz.sh 600                      # ten minutes per target
#   FUZZ_TARGETS="npy join" scripts/fuzz.sh  # some targets only
# New inputs that reached new code go to ${FUZZ_BUILD_DIR}/corpus/<target>/ (kept
# between runs, never into the repository's seeds); findings to
# ${FUZZ_BUILD_DIR}/findings/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${FUZZ_BUILD_DIR:-build-fuzz}
timeout_s=${FUZZ_TIMEOUT_S:-10}
rss_mb=${FUZZ_RSS_MB:-2048}
all_targets=(einsum join npy graph_json decomposition_json machine_json task_graph_json bytes workload)
read -r -a targets <<< "${FUZZ_TARGETS:-${all_targets[*]}}"

scripts/install-deps.sh clang libclang-rt-dev
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ -f "$build/CMakeCache.txt" ] && [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  # -O1 as libFuzzer advises (fast to build, still fast to run), asserts kept (no NDEBUG)
  # so that a broken invariant is a finding too; -gline-tables-only: file and line in
  # every stack trace at little cost.
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS=-gline-tables-only \
    -DTESSEL_FUZZ=ON -DTESSEL_BUILD_TESTS=OFF -DTESSEL_BUILD_BENCH=OFF -DTESSEL_CUDA=OFF -DTESSEL_MPI=OFF \
    ${CMAKE_ARGS:-}
fi
cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
printf '\n%-20s %10s %8s %10s  %s\n' target execs cov seconds result
for t in "${targets[@]}"; do
  seeds=tests/fuzz/corpus/$t
  work=$build/corpus/$t
  findings=$build/findings/$t
  log=$build/logs/$t.log
  mkdir -p "$work" "$findings" "$(dirname "$log")"
  rm -f "$findings"/*
  start=$(date +%s)
  set +e
  "$build/bin/fuzz_$t" -max_total_time="$seconds" -timeout="$timeout_s" -rss_limit_mb="$rss_mb" \
    -malloc_limit_mb="$rss_mb" -detect_leaks=1 -print_final_stats=1 -artifact_prefix="$findings/" \
    "$work" "$seeds" > "$log" 2>&1
  rc=$?
  set -e
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ "$rc" -eq 0 ] && [ -z "$(ls -A "$findings")" ]; then
    printf '%-20s %10s %8s %10s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "$took" ok
  else
    printf '%-20s %10s %8s %10s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "$took" "FAILED (exit $rc)"
    failed+=("$t")
    grep -m1 -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|runtime error:|fuzz [a-z_]+: ' "$log" | sed 's/^/    /' || true
    # The top of the first stack trace and the input itself, so that a CI log alone (whose
    # build directory is gone) says where it failed and on what.
    grep -m8 -E '^ +#[0-9]+ 0x' "$log" | sed 's/^ */    /' || true
    for f in "$findings"/*; do
      [ -e "$f" ] || continue
      echo "    input:  $f ($(stat -c %s "$f") bytes)"
      if [ "$(stat -c %s "$f")" -le 512 ]; then
        echo "    bytes:  $(od -An -c "$f" | tr -s ' \n' ' ' | head -c 2000)"
      fi
      echo "    replay: $build/bin/fuzz_$t $f"
    done
    echo "    log:    $log"
  fi
done
echo "fuzz: $(( ${#targets[@]} - ${#failed[@]} )) passed, ${#failed[@]} failed (${seconds} s per target)"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}"
  exit 1
fi
