// tessel_bench: performance targets live here (and in the CLI's --json), never in tests.
// Each bench_*.cc file registers its benchmarks.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
