#!/usr/bin/env bash
# ThreadSanitizer over the tests that start threads: the CPU executor (its workers, copy
# lanes, pooled threads, in-place profiles), the timing loop and the calibrator, the
# remote link's hooks, and the run/compare CLI tests of memory caps and copy lanes (whose
# `tessel` is the instrumented binary too). It is SANITIZE=thread scripts/test.sh (into
# build-thresan/, every report fatal) restricted to those suites: a few minutes on 2
# cores, where the whole suite under TSan takes far longer. Extra ctest arguments:
# CTEST_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
suites='CpuCopyLane|CpuExecutor|CpuExecutorOffload|CpuExecutorStrategies|CpuKernels|InPlaceProfile|Measure|CpuCalibrator|RemoteLink|CopyLaneCli|MemoryCapCli'
export SANITIZE=thread
export CTEST_ARGS="-R ^($suites)\\. ${CTEST_ARGS:-}"
exec scripts/test.sh
