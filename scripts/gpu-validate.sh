#!/usr/bin/env bash
# Validates the CUDA backend on a machine with a GPU, in one command:
#   build      configures ${BUILD_DIR:-build-gpu} with -DTESSEL_CUDA=ON and builds
#   test       ctest -L cuda (NVRTC, no device needed) and ctest -L gpu (the executor on the GPU)
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
# Everything lands in the output folder (first argument, or $OUT, or out/gpu-validate):
# one log / JSON per step, summary.json (every figure) and summary.txt (device, driver,
# date, every figure), printed last. STAGES="build test check" runs a subset (a device
# lease allows 10 minutes per command: build+test+check in one call, calibrate+bench+compare
# in a second, if one is not enough). A failing step is recorded and the script goes on;
# it exits non-zero when any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-out/gpu-validate}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${BUILD_DIR:-build-gpu}
stages=${STAGES:-build test check calibrate bench compare}
tessel=$build/bin/tessel
failed=()
has_stage() { [[ " $stages " == *" $1 "* ]]; }
step() {  # step NAME LOGFILE COMMAND...: runs, records the exit status
  local name=$1 log=$2
  shift 2
  local t0=$SECONDS
  echo "== $name ($(date -u +%H:%M:%S))" >&2
  "$@" >"$log" 2>&1
  local rc=$?
  echo "$name $rc $((SECONDS - t0))" >>"$out/steps.txt"
  if [ $rc -ne 0 ]; then
    failed+=("$name")
    echo "   $name FAILED (exit $rc): $(tail -n 3 "$log" | tr '\n' ' ')" >&2
  fi
  return 0
}

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
} >"$out/env.txt"
: >"$out/steps.txt"

if has_stage build; then
  step build "$out/build.log" env BUILD_DIR="$build" \
    CMAKE_ARGS="-DTESSEL_CUDA=ON ${CMAKE_ARGS:-}" scripts/build.sh
fi

if has_stage test; then
  step ctest-cuda "$out/ctest-cuda.log" \
    ctest --test-dir "$build" -L cuda --output-on-failure --output-junit "$out/ctest-cuda.xml"
  step ctest-gpu "$out/ctest-gpu.log" \
    ctest --test-dir "$build" -L gpu --output-on-failure --output-junit "$out/ctest-gpu.xml"
fi

if has_stage check; then
  mkdir -p "$out/runs"
  # Default sizes: the reference evaluator (one CPU thread, doubles, no BLAS) checks each.
  for w in chain chain-sum chain-sum:skewed=1 ffn llama-block:model=tiny \
           chain:dtype=bf16 ffn:dtype=bf16 llama-block:model=tiny,dtype=bf16 ffn:dtype=f16; do
    for d in 1 2 4; do
      for p in async bsp; do
        name="$(echo "$w" | tr ':,=' '___')-d$d-$p"
        step "run $w -d $d $p" "$out/runs/$name.log" \
          bash -c "'$tessel' run -w '$w' -d $d --backend cuda --gpus 1 --policy $p --repeat 3 --json > '$out/runs/$name.json'"
      done
    done
  done
  # Memory-capped graphs (--memory-cap: buffers at planned offsets, evicts and loads to
  # page-locked host memory on the copy stream; async only), against the reference too.
  for w in llama-block:model=tiny chain-sum ffn:dtype=bf16; do
    for d in 1 2 4; do
      for c in 75 50; do
        name="$(echo "$w" | tr ':,=' '___')-d$d-async-cap$c"
        step "run $w -d $d async --memory-cap $c%" "$out/runs/$name.log" \
          bash -c "'$tessel' run -w '$w' -d $d --backend cuda --gpus 1 --policy async --memory-cap $c% --repeat 3 --json > '$out/runs/$name.json'"
      done
    done
  done
fi

if has_stage calibrate; then
  for d in 1 4; do
    step "calibrate -d $d" "$out/calibrate-$d.log" \
      bash -c "'$tessel' calibrate --backend cuda -d $d --gpus 1 -o '$out/machine-cuda-$d.json' --json > '$out/calibration-$d.json'"
  done
  step "calibrate --overlap" "$out/calibrate-overlap.log" \
    bash -c "'$tessel' calibrate --backend cuda -d 1 --gpus 1 --overlap -o '$out/machine-overlap.json' --json > '$out/calibration-overlap.json'"
  step "plot overlap slowdown" "$out/plot-overlap.log" \
    plots/python.sh plots/overlap_slowdown.py "$out/calibration-overlap.json" "$out/overlap-slowdown.png"
  # The LLaMA block and the chain on 4 virtual devices, async: simulated with the published
  # defaults and with the measured rows, beside the measured run (issue 19's row set).
  for w in llama-block:model=tiny,seq=256 chain:size=2048; do
    name=$(echo "$w" | tr ':,=' '___')
    step "overlap rows $w" "$out/overlap-$name.log" \
      bash -c "'$tessel' simulate -w '$w' -d 4 -s eindecomp -m '$out/machine-overlap.json' --json > '$out/overlap-$name-measured.json' &&
               '$tessel' compare -w '$w' -d 4 --backend cuda --gpus 1 -s eindecomp --policy async --repeat 5 \
                 -m '$out/machine-overlap.json' --json > '$out/overlap-$name-compare.json'"
  done
fi

if has_stage bench; then
  step bench "$out/bench.log" \
    "$build/bin/tessel_bench" --benchmark_filter=Cuda --benchmark_format=json --benchmark_out="$out/bench.json"
fi

if has_stage compare; then
  mkdir -p "$out/compare"
  machine="$out/machine-cuda-4.json"
  margs=()
  [ -f "$machine" ] && margs=(-m "$machine")
  # Sizes whose reference (one CPU thread, no BLAS: ~20-50 s for two 1024^3 products)
  # every compare checks each run against: GPU kernels of tens of microseconds.
  for w in chain:size=1024 chain-sum:size=768 chain-sum:size=1000,skewed=1 ffn:tokens=512,dim=512,hidden=1024 \
           llama-block:model=tiny,seq=256 llama-block:model=tiny,seq=256,dtype=bf16; do
    name=$(echo "$w" | tr ':,=' '___')
    step "compare $w" "$out/compare/$name.log" \
      bash -c "'$tessel' compare -w '$w' -d 4 --backend cuda --gpus 1 -s eindecomp,data-parallel,megatron,sqrt-split \
               --repeat 5 --warmup 1 ${margs[*]} --json > '$out/compare/$name.json'"
  done
fi

printf '%s\n' "${failed[@]:-}" >"$out/failed.txt"
if command -v python3 >/dev/null; then
  python3 scripts/gpu_validate_summary.py "$out" >"$out/summary.txt" 2>"$out/summary.err" ||
    echo "summary failed: $(cat "$out/summary.err")" >>"$out/summary.txt"
else
  echo "python3 not found: no summary; see the JSON files in $out" >"$out/summary.txt"
fi
cat "$out/summary.txt"
[ ${#failed[@]} -eq 0 ]
