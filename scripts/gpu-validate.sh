#!/usr/bin/env bash
# Validates the CUDA backend on a machine with a GPU, in one command:
#   build      configures ${BUILD_DIR:-build-gpu} with -DTESSEL_CUDA=ON and builds
#   test       tessel_cuda_tests (ctest label cuda: NVRTC, no device needed) and
#              tessel_gpu_tests (label gpu: the executor on the GPU), run directly
#   check      tessel run --backend cuda for every built-in workload (f32, and bf16 where
#              marked) on 1, 2 and 4 virtual devices of GPU 0 under async and bsp, each
#              checked against the reference evaluator (tolerance by dtype); and three of
#              them under --memory-cap 75% and 50% (async) on 1, 2 and 4 virtual devices
#   calibrate  tessel calibrate --backend cuda for 1 and 4 (virtual) devices, and once with
#              --overlap (issue 19: GEMM stream against copy-engine and SM-kernel
#              communication, normal/high priority, SMs reserved) into machine-overlap.json,
#              its slowdowns drawn by plots/overlap_slowdown.py (overlap-slowdown.png), and
#              the overlap-priority experiment simulated with those measured rows
#   bench      tessel_bench --benchmark_filter=Cuda (decomposed 8192^3 bf16 GEMM on 4
#              virtual devices vs one cuBLAS GEMM; per-task overhead)
#   compare    tessel compare --backend cuda over mid-sized workloads on 4 virtual devices,
#              with the 4-device calibration: MAPE and the ranking check
# Everything lands in a work folder (${GPU_VALIDATE_WORK:-out/gpu-validate-work}, emptied
# first): one log / JSON per step, summary.json (every figure) and summary.txt (device,
# driver, date, every figure), printed last. The output folder (first argument, or $OUT,
# or out/gpu-validate) receives only summary.txt, summary.json, env.txt, steps.txt,
# failed.txt and gpu-validate.tar.gz (the whole work folder): a device lease brings back
# at most 8 files from $OUT.
#
# A lent GPU machine has no network, and its image is described as holding CUDA 13, CMake,
# ninja and PyTorch but none of Boost, Eigen, nlohmann-json, CLI11, GoogleTest, Google
# Benchmark or protobuf (not yet seen: check env.txt), so tessel cannot be built there:
# run scripts/gpu-bundle.sh on the machine you work on first and carry gpu-bundle/ with
# the call; its binaries replace the build stage. cuBLAS, NVRTC and NCCL are taken from the machine
# (found under /usr/local/cuda*, /usr/lib or a Python environment's nvidia/ packages).
#
# A device lease allows 10 minutes per command: every step runs under `timeout` within a
# budget of ${BUDGET_S:-540} seconds from the start, and at most ${STEP_S:-300} seconds
# itself (a hang costs one step, not the call); a step the budget cannot hold is
# recorded as skipped, and the summary is always written. On an H200 (2026-11-28) the whole
# script after the build took about 4 minutes: test 25 s, check 50 s (70 runs), calibrate
# 45 s, bench 65 s, compare 70 s, and the overlap rows 4 s for the LLaMA block (the chain
# row, then chain:size=2048, ran out of its 150 s in the reference check: now 1024);
# Stages run in the order STAGES names them. A task's device time is 15 minutes in all
# (2026-12), the machine's start included, so one call does it: issue 19's figures first,
#   STAGES="calibrate compare check bench test"
# (each step that the budget cannot hold is skipped and named in the summary). A failing
# step is recorded and the script goes on; it exits non-zero when any step failed.
#
# Subsets (space-separated lists, each with the default shown in the code below):
# CHECK_WORKLOADS, CHECK_DEVICES, CHECK_POLICIES (check), STREAM_WORKLOADS (check, with
# --launch stream), CAP_WORKLOADS, CAP_PERCENTS (check, --memory-cap), CALIBRATE_DEVICES,
# OVERLAP_WORKLOADS (calibrate), COMPARE_WORKLOADS (compare); UNMARKED_WORKLOADS (check,
# with --unmarked); COMPARE_FLAGS (compare's extra options, default --unmarked: set it empty
# to compare without the unmarked runs).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-out/gpu-validate}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=${GPU_VALIDATE_WORK:-out/gpu-validate-work}
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
build=${BUILD_DIR:-build-gpu}
bundle=${GPU_BUNDLE:-gpu-bundle}
stages=${STAGES:-build test check calibrate bench compare}
budget=${BUDGET_S:-540}
bin=$build/bin
if [ -f "$bundle/bin/tessel" ]; then
  chmod +x "$bundle"/bin/* 2>/dev/null  # in case the copy to the GPU machine dropped the modes
  bin=$bundle/bin
fi
bin=$(mkdir -p "$bin" && cd "$bin" && pwd)
tessel=$bin/tessel
python_ld=${LD_LIBRARY_PATH:-}  # Python (summary, plot) runs with the machine's own library path
failed=()
step() {  # step NAME LOGFILE COMMAND...: runs within the time budget, records the exit status
  local name=$1 log=$2
  shift 2
  local left=$((budget - SECONDS - 15))
  if [ $left -lt 20 ]; then
    echo "$name skipped 0" >>"$work/steps.txt"
    failed+=("$name (skipped: time budget)")
    echo "== $name SKIPPED: ${BUDGET_S:-540} s budget spent" >&2
    return 0
  fi
  # A hung step (a stream waiting forever, say) ends at STEP_S, not with the whole budget.
  [ $left -gt "${STEP_S:-300}" ] && left=${STEP_S:-300}
  local t0=$SECONDS
  echo "== $name ($(date -u +%H:%M:%S))" >&2
  timeout --kill-after=5 "$left" "$@" >"$log" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && echo "tessel gpu-validate: timed out after $left s (STEP_S or the budget left)" >>"$log"
  echo "$name $rc $((SECONDS - t0))" >>"$work/steps.txt"
  if [ $rc -ne 0 ]; then
    failed+=("$name")
    echo "   $name FAILED (exit $rc): $(tail -n 3 "$log" | tr '\n' ' ')" >&2
  fi
  return 0
}
finish() {
  printf '%s\n' "${failed[@]:-}" >"$work/failed.txt"
  if command -v python3 >/dev/null; then
    LD_LIBRARY_PATH=$python_ld python3 scripts/gpu_validate_summary.py "$work" >"$work/summary.txt" 2>"$work/summary.err" ||
      echo "summary failed: $(cat "$work/summary.err")" >>"$work/summary.txt"
  else
    echo "python3 not found: no summary; see the JSON files in gpu-validate.tar.gz" >"$work/summary.txt"
  fi
  if [ "$out" != "$work" ]; then
    for f in summary.txt summary.json env.txt steps.txt failed.txt; do
      [ -f "$work/$f" ] && cp "$work/$f" "$out/"
    done
    tar -czf "$out/gpu-validate.tar.gz" -C "$work" .
  fi
  cat "$work/summary.txt"
}

# The CUDA libraries the binaries load (cuBLAS, cuBLASLt, NVRTC, NCCL): where the loader
# does not find one, the first copy under the usual places is put on LD_LIBRARY_PATH.
libdirs=()
[ -d "$bundle/lib" ] && libdirs+=("$(cd "$bundle/lib" && pwd)")
ld_cache=$(ldconfig -p 2>/dev/null)
for lib in libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libnccl.so.2; do
  [[ $ld_cache == *"$lib "* ]] && continue
  found=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda* /usr/lib /opt /usr/local/lib \
            -name "$lib" -print -quit 2>/dev/null)
  [ -n "$found" ] && libdirs+=("$(dirname "$found")")
done
if [ ${#libdirs[@]} -gt 0 ]; then
  LD_LIBRARY_PATH=$(IFS=:; echo "${libdirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
fi

{
  echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git_commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "host: $(hostname)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv,noheader |
      sed 's/^/gpu: /'
  else
    echo "gpu: nvidia-smi not found"
  fi
  echo "nvcc: $(command -v nvcc >/dev/null && nvcc --version | tail -n 2 | head -n 1 || echo none)"
  echo "binaries: $bin"
  [ -f "$bundle/BUNDLE.txt" ] && sed 's/^/bundle_/' "$bundle/BUNDLE.txt"
  echo "ld_library_path: ${LD_LIBRARY_PATH:-}"
  for f in "$bin/tessel" "$bin/libtessel_cuda.so" "$bin/tessel_gpu_tests" "$bin/tessel_bench"; do
    [ -f "$f" ] && ldd "$f" 2>&1 | grep -E "not found|cublas|nvrtc|nccl" | sed "s|^|ldd_$(basename "$f"): |"
  done
} >"$work/env.txt"
grep "^ldd_.*not found" "$work/env.txt" | sed 's/^/WARNING: a library the binaries need is missing: /' >&2
: >"$work/steps.txt"

stage_build() {
  if [ "$bin" = "$(cd "$bundle/bin" 2>/dev/null && pwd)" ]; then
    echo "== build: using the carried bundle $bundle ($(grep '^commit' "$bundle/BUNDLE.txt" 2>/dev/null))" >&2
  else
    step build "$work/build.log" env BUILD_DIR="$build" \
      CMAKE_ARGS="-DTESSEL_CUDA=ON ${CMAKE_ARGS:-}" bash scripts/build.sh
  fi
}

stage_test() {
  # The test binaries themselves, not ctest: a carried bundle has no CTest files. The GPU
  # tests run one process per test, as ctest would: an asynchronous fault (an illegal
  # address, say) leaves the process's CUDA context unusable, and would fail every later
  # test of the same process.
  mkdir -p "$work/test-cuda" "$work/test-gpu"
  step test-cuda "$work/test-cuda/all.log" "$bin/tessel_cuda_tests" --gtest_output="xml:$work/test-cuda/all.xml"
  for t in $("$bin/tessel_gpu_tests" --gtest_list_tests 2>/dev/null |
             awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}'); do
    step "test-gpu $t" "$work/test-gpu/$t.log" "$bin/tessel_gpu_tests" --gtest_filter="$t" \
      --gtest_output="xml:$work/test-gpu/$t.xml"
  done
}

stage_check() {
  mkdir -p "$work/runs"
  # Default sizes: the reference evaluator (doubles, no BLAS, large einsums on every core) checks each.
  for w in ${CHECK_WORKLOADS:-chain chain-sum chain-sum:skewed=1 ffn llama-block:model=tiny \
           chain:dtype=bf16 ffn:dtype=bf16 llama-block:model=tiny,dtype=bf16 ffn:dtype=f16}; do
    for d in ${CHECK_DEVICES:-1 2 4}; do
      for p in ${CHECK_POLICIES:-async bsp}; do
        name="$(echo "$w" | tr ':,=' '___')-d$d-$p"
        step "run $w -d $d $p" "$work/runs/$name.log" \
          bash -c "'$tessel' run -w '$w' -d $d --backend cuda --gpus 1 --policy $p --repeat 3 --json > '$work/runs/$name.json'"
      done
    done
  done
  # The same graph run first without its per-task marks and timed whole (--unmarked:
  # graph_unmarked_s beside graph_s), the buffers reset before the marked run.
  for w in ${UNMARKED_WORKLOADS:-chain llama-block:model=tiny ffn:dtype=bf16}; do
    for p in async bsp; do
      name="$(echo "$w" | tr ':,=' '___')-d4-$p-unmarked"
      step "run $w -d 4 $p --unmarked" "$work/runs/$name.log" \
        bash -c "'$tessel' run -w '$w' -d 4 --backend cuda --gpus 1 --policy $p --unmarked --repeat 3 --json > '$work/runs/$name.json'"
    done
  done
  # The same runs issued task by task to streams (--launch stream) instead of one graph.
  for w in ${STREAM_WORKLOADS:-llama-block:model=tiny ffn:dtype=bf16}; do
    for p in async bsp; do
      name="$(echo "$w" | tr ':,=' '___')-d4-$p-stream"
      step "run $w -d 4 $p --launch stream" "$work/runs/$name.log" \
        bash -c "'$tessel' run -w '$w' -d 4 --backend cuda --gpus 1 --policy $p --launch stream --repeat 3 --json > '$work/runs/$name.json'"
    done
  done
  # Memory-capped graphs (--memory-cap: buffers at planned offsets, evicts and loads to
  # page-locked host memory on the copy stream; async only), against the reference too.
  # Caps every task fits under (a cap below one task's working set has no schedule and is
  # refused, as chain-sum -d 4 at 50% and ffn at 75% on 1 and 2 devices are).
  for w in ${CAP_WORKLOADS:-llama-block:model=tiny llama-block:model=tiny,dtype=bf16}; do
    for d in ${CHECK_DEVICES:-1 2 4}; do
      for c in ${CAP_PERCENTS:-75 50}; do
        name="$(echo "$w" | tr ':,=' '___')-d$d-async-cap$c"
        step "run $w -d $d async --memory-cap $c%" "$work/runs/$name.log" \
          bash -c "'$tessel' run -w '$w' -d $d --backend cuda --gpus 1 --policy async --memory-cap $c% --repeat 3 --json > '$work/runs/$name.json'"
      done
    done
  done
}

stage_calibrate() {
  for d in ${CALIBRATE_DEVICES:-1 4}; do
    step "calibrate -d $d" "$work/calibrate-$d.log" \
      bash -c "'$tessel' calibrate --backend cuda -d $d --gpus 1 -o '$work/machine-cuda-$d.json' --json > '$work/calibration-$d.json'"
  done
  step "calibrate --overlap" "$work/calibrate-overlap.log" \
    bash -c "'$tessel' calibrate --backend cuda -d 4 --gpus 1 --overlap -o '$work/machine-overlap.json' --json > '$work/calibration-overlap.json'"
  step "plot overlap slowdown" "$work/plot-overlap.log" \
    env LD_LIBRARY_PATH="$python_ld" bash plots/python.sh plots/overlap_slowdown.py "$work/calibration-overlap.json" "$work/overlap-slowdown.png"
  # The LLaMA block and the chain on 4 virtual devices, async: simulated with the published
  # defaults and with the measured rows, beside the measured run (issue 19's row set).
  # Each round simulated twice against the same measured runs: with the measured
  # interference rows (machine-overlap.json) and, --interference-beside published, with
  # the published defaults in their place.
  # chain:size=4096,dtype=bf16: 24 tasks, GEMMs long enough for moves of 8-32 MiB to run beside them,
  # the row whose simulation the interference rows change most (data-parallel 0.49 ms
  # with the 2026-11-28 rows against 0.42 ms without interference); its reference check
  # took 96 s on the 2 cores of the machine that builds the bundle (2026-12-07, the
  # reference on every core), so some 12-25 s on the GPU machine's 16.
  for w in ${OVERLAP_WORKLOADS:-llama-block:model=tiny,seq=256 chain:size=4096,dtype=bf16 chain:size=1024}; do
    name=$(echo "$w" | tr ':,=' '___')
    step "overlap rows $w" "$work/overlap-$name.log" \
      bash -c "'$tessel' simulate -w '$w' -d 4 -s eindecomp -m '$work/machine-overlap.json' --json > '$work/overlap-$name-measured.json' &&
               '$tessel' compare -w '$w' -d 4 --backend cuda --gpus 1 -s eindecomp,data-parallel --policy async --repeat 5 \
                 -m '$work/machine-overlap.json' --interference-beside published --json > '$work/overlap-$name-compare.json'"
  done
}

stage_bench() {
  step bench "$work/bench.log" \
    "$bin/tessel_bench" --benchmark_filter=Cuda --benchmark_format=json --benchmark_out="$work/bench.json"
}

stage_compare() {
  mkdir -p "$work/compare"
  machine="$work/machine-cuda-4.json"
  # compare without -m would calibrate in every call: calibrate once here when the
  # calibrate stage did not run in this call.
  [ -f "$machine" ] || step "calibrate -d 4" "$work/calibrate-4.log" \
    bash -c "'$tessel' calibrate --backend cuda -d 4 --gpus 1 -o '$machine' --json > '$work/calibration-4.json'"
  margs=()
  [ -f "$machine" ] && margs=(-m "$machine")
  # Sizes whose reference (doubles, no BLAS: 1.8 s for two 1024^3 products on 2 cores)
  # every compare checks each run against: GPU kernels of tens of microseconds.
  for w in ${COMPARE_WORKLOADS:-chain:size=1024 chain-sum:size=768 chain-sum:size=1000,skewed=1 ffn:tokens=512,dim=512,hidden=1024 \
           llama-block:model=tiny,seq=256 llama-block:model=tiny,seq=256,dtype=bf16}; do
    name=$(echo "$w" | tr ':,=' '___')
    step "compare $w" "$work/compare/$name.log" \
      bash -c "'$tessel' compare -w '$w' -d 4 --backend cuda --gpus 1 -s eindecomp,data-parallel,megatron,sqrt-split ${COMPARE_FLAGS:---unmarked} \
               --repeat 5 --warmup 1 ${margs[*]} --json > '$work/compare/$name.json'"
  done
}

# Stages run in the order STAGES names them (the default: build test check calibrate bench
# compare), so that a short lease can put first what it is for.
for s in $stages; do
  case $s in
    build|test|check|calibrate|bench|compare) "stage_$s" ;;
    *) echo "tessel gpu-validate: unknown stage '$s' in STAGES (build, test, check, calibrate, bench, compare)" >&2
       failed+=("unknown stage $s") ;;
  esac
done

finish
[ ${#failed[@]} -eq 0 ]
