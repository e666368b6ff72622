// CUDA executor (first run on an H200, 2026-11-28): the decomposed 8192³ bf16 GEMM on 4
// virtual devices of one GPU against the same GEMM as one cuBLAS call (goal: >= 85%), and
// the executor's per-task overhead (goal: <= 10 us), with the run launched as one CUDA
// graph (the default) and task by task to streams. Each benchmark reports an error and
// measures nothing where this build has no CUDA backend or no GPU is visible.
#include <benchmark/benchmark.h>

#include "core/error.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"

#ifdef TESSEL_HAVE_CUDA
#include "runtime/cuda/cuda_calibrate.h"
#include "runtime/cuda/cuda_executor.h"
#endif

namespace {

using namespace tessel;

#ifdef TESSEL_HAVE_CUDA

// Empty string when a GPU is usable, else why not.
std::string no_gpu() {
  try {
    (void)runtime::cuda_devices();
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

// One GEMM C[M,N] = A[M,K] B[K,N] in bf16, split over `devices` virtual devices of GPU 0,
// or whole on one device: one cublasGemmStridedBatchedEx call. Third argument: 0 =
// split_largest (the largest indices first, aggregation included), 1 = a 2 × 2 grid of
// output blocks (A split by rows, B by columns, C left where computed: no aggregation,
// each device receives the halves of A and B it lacks). Time: the task graph's span on
// the GPU (CUDA events), manual time; flop_rate = 2·M·N·K / span.
void BM_CudaDecomposedGemm(benchmark::State& state) {
  const std::string why = no_gpu();
  if (!why.empty()) {
    state.SkipWithError(("no GPU: " + why).c_str());
    return;
  }
  const std::int64_t n = state.range(0);
  const int devices = static_cast<int>(state.range(1));
  const bool grid = state.range(2) == 1;
  GraphBuilder b(DType::bf16);
  const NodeId x = b.input("A", {n, n});
  const NodeId y = b.input("B", {n, n});
  const NodeId c = b.matmul(x, y, "C");
  const NodeId out = b.output(c, "out");
  const Graph g = b.build();
  std::vector<std::vector<int>> parts(g.size());
  parts[x.index()] = {2, 1};
  parts[y.index()] = {1, 2};
  parts[c.index()] = {2, 2, 1};
  parts[out.index()] = {2, 2};
  const TaskGraph tg = lower(g, grid && devices == 4 ? decomposition_from_parts(g, devices, parts)
                                                      : split_largest(g, devices));
  const runtime::TensorMap inputs = runtime::random_inputs(g, 1);
  runtime::CudaExecutor exec(runtime::CudaOptions{runtime::Policy::async, 1});
  (void)exec.run(g, tg, inputs);  // warm-up: kernels compiled, cuBLAS heuristics cached
  double span_s = 0;
  for (auto _ : state) {
    const runtime::RunResult r = exec.run(g, tg, inputs);
    const double s = r.timeline.makespan_s();
    span_s += s;
    state.SetIterationTime(s);
  }
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["devices"] = devices;
  state.counters["tasks"] = static_cast<double>(tg.size());
  state.counters["flop_rate"] = flops * static_cast<double>(state.iterations()) / span_s;
}
BENCHMARK(BM_CudaDecomposedGemm)
    ->Args({8192, 1, 0})
    ->Args({8192, 4, 0})
    ->Args({8192, 4, 1})
    ->Iterations(5)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// A chain of 200 elementwise nodes on 256 floats on one device: the kernels are tiny, so
// the graph's span per compute task is the executor's per-task cost on the GPU (launch,
// event records and waits).
void BM_CudaExecutorOverheadPerTask(benchmark::State& state) {
  const std::string why = no_gpu();
  if (!why.empty()) {
    state.SkipWithError(("no GPU: " + why).c_str());
    return;
  }
  const Graph g = runtime::overhead_probe_graph();
  const TaskGraph tg = lower(g, split_largest(g, 1));
  const runtime::TensorMap inputs = runtime::random_inputs(g, 1);
  runtime::CudaOptions o{runtime::Policy::async, 1};
  o.launch = state.range(0) == 0 ? runtime::LaunchMode::graph : runtime::LaunchMode::stream;
  runtime::CudaExecutor exec(o);
  (void)exec.run(g, tg, inputs);
  double span_s = 0;
  for (auto _ : state) {
    const runtime::RunResult r = exec.run(g, tg, inputs);
    span_s += r.timeline.makespan_s();
    state.SetIterationTime(r.timeline.makespan_s());
  }
  state.counters["compute_tasks"] = 200;
  state.counters["us_per_task"] = span_s / static_cast<double>(state.iterations()) / 200 * 1e6;
}
// Argument: 0 = one CUDA graph launch (the default), 1 = tasks issued to streams.
BENCHMARK(BM_CudaExecutorOverheadPerTask)->Arg(0)->Arg(1)->Iterations(20)->UseManualTime()->Unit(benchmark::kMicrosecond);

#endif

}  // namespace
