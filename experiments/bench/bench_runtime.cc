// CPU executor: per-task overhead and the flop rate of a decomposed matrix chain
// against one Eigen GEMM on the same cores.
#include <benchmark/benchmark.h>

#include <thread>

#include <Eigen/Core>

#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "runtime/cpu_executor.h"

namespace {

using namespace tessel;

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Many tiny tasks: 8 elementwise maps over a vector cut into one-element blocks, so
// the kernel work is negligible and the time per task is the executor's bookkeeping.
// Goal: <= 5 us per task.
void BM_CpuExecutorOverheadPerTask(benchmark::State& state) {
  const int blocks = static_cast<int>(state.range(0));
  GraphBuilder b;
  NodeId x = b.input("x", {blocks});
  for (int i = 0; i < 8; ++i) x = b.map("add(x0,1)", x);
  b.output(x, "out");
  Graph g = b.build();
  const int devices = cores();
  std::vector<std::vector<int>> parts(g.size(), std::vector<int>{blocks});
  TaskGraph tg = lower(g, decomposition_from_parts(g, devices, parts));
  runtime::TensorMap inputs = runtime::random_inputs(g, 1);
  runtime::CpuExecutor exec({runtime::Policy::async, true});
  for (auto _ : state) benchmark::DoNotOptimize(exec.run(g, tg, inputs));
  state.counters["tasks"] = static_cast<double>(tg.size());
  state.counters["us_per_task"] = benchmark::Counter(static_cast<double>(tg.size()) * state.iterations() * 1e-6,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_CpuExecutorOverheadPerTask)->Arg(1024)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();

// X·Y·Z (square, size N) split over all cores by split_largest, async. Compare its
// flop_rate with BM_EigenChainAllCores. Goal: >= 80% of it.
void BM_CpuDecomposedChain(benchmark::State& state) {
  const auto n = state.range(0);
  Graph g = build_workload("chain:size=" + std::to_string(n));
  TaskGraph tg = lower(g, split_largest(g, cores()));
  runtime::TensorMap inputs = runtime::random_inputs(g, 1);
  runtime::CpuExecutor exec({runtime::Policy::async, true});
  for (auto _ : state) benchmark::DoNotOptimize(exec.run(g, tg, inputs));
  state.counters["flop_rate"] =
      benchmark::Counter(4.0 * n * n * n * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CpuDecomposedChain)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same two products as single Eigen GEMMs using every core (Eigen's OpenMP).
void BM_EigenChainAllCores(benchmark::State& state) {
  const auto n = state.range(0);
  Eigen::setNbThreads(cores());
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Mat x = Mat::Random(n, n), y = Mat::Random(n, n), z = Mat::Random(n, n), xy(n, n), out(n, n);
  for (auto _ : state) {
    xy.noalias() = x * y;
    out.noalias() = xy * z;
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["flop_rate"] =
      benchmark::Counter(4.0 * n * n * n * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["threads"] = Eigen::nbThreads();
}
BENCHMARK(BM_EigenChainAllCores)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
