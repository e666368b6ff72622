// CPU executor: per-task overhead, the flop rate of a decomposed matrix chain against
// one Eigen GEMM on the same cores, and the generic (non-GEMM) kernels' element rates.
#include <benchmark/benchmark.h>

#include <thread>

#include <Eigen/Core>

#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "runtime/cpu_executor.h"
#include "runtime/cpu_kernels.h"
#include "runtime/kernels.h"

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
// flop_rate with BM_EigenChainAllCores. Goal: >= 80% of it. flop_rate counts the task
// graph's own time (the measured timeline's makespan: first task start to last task
// end, moves included), as a training step with resident inputs would run it;
// flop_rate_call counts the whole run() call, which also converts and places the
// inputs in the workers' memories, starts the workers, and gathers the outputs.
void BM_CpuDecomposedChain(benchmark::State& state) {
  const auto n = state.range(0);
  Graph g = build_workload("chain:size=" + std::to_string(n));
  TaskGraph tg = lower(g, split_largest(g, cores()));
  runtime::TensorMap inputs = runtime::random_inputs(g, 1);
  runtime::CpuExecutor exec({runtime::Policy::async, true});
  double graph_s = 0;
  for (auto _ : state) {
    runtime::RunResult r = exec.run(g, tg, inputs);
    graph_s += r.timeline.makespan_s();
    benchmark::DoNotOptimize(r);
  }
  const double flops = 4.0 * static_cast<double>(n * n * n) * static_cast<double>(state.iterations());
  state.counters["flop_rate"] = flops / graph_s;
  state.counters["flop_rate_call"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
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

// The generic kernel path on one core, one block of 256 x 1024 floats (1 MiB, in L2
// or just past it) per einsum: the shapes a transformer's non-GEMM nodes take
// (elementwise, a row vector broadcast, row reductions, a transcendental). Reports
// join elements per second; the simulator's calibrated generic rate assumes these
// cost alike per element.
const std::vector<std::pair<const char*, Einsum>>& generic_cases() {
  static const std::int64_t r = 256, c = 1024;
  static const std::vector<std::pair<const char*, Einsum>> cases = {
      {"mul", Einsum::from_subscripts("ij,ij->ij", {{r, c}, {r, c}}, ScalarOp::parse("mul(x0,x1)"))},
      {"sub_row_broadcast", Einsum::from_subscripts("ij,i->ij", {{r, c}, {r}}, ScalarOp::parse("sub(x0,x1)"))},
      {"mul_col_broadcast", Einsum::from_subscripts("ij,j->ij", {{r, c}, {c}}, ScalarOp::parse("mul(x0,x1)"))},
      {"row_sum", Einsum::from_subscripts("ij->i", {{r, c}}, ScalarOp::parse("x0"), Agg::sum)},
      {"row_max", Einsum::from_subscripts("ij->i", {{r, c}}, ScalarOp::parse("x0"), Agg::max)},
      {"col_sum", Einsum::from_subscripts("ij->j", {{r, c}}, ScalarOp::parse("x0"), Agg::sum)},
      {"exp", Einsum::from_subscripts("ij->ij", {{r, c}}, ScalarOp::parse("exp(x0)"))},
  };
  return cases;
}

void BM_GenericKernel(benchmark::State& state) {
  const auto& [name, e] = generic_cases()[static_cast<std::size_t>(state.range(0))];
  state.SetLabel(name);
  std::vector<std::vector<float>> ops;
  std::vector<const float*> ptrs;
  for (std::size_t i = 0; i < e.inputs.size(); ++i) {
    ops.emplace_back(static_cast<std::size_t>(elements(e.input_shape(static_cast<int>(i)))), 0.5f);
    ptrs.push_back(ops.back().data());
  }
  std::vector<float> out(static_cast<std::size_t>(elements(e.out_shape())));
  runtime::cpu::Scratch<float> scratch;
  for (auto _ : state) {
    runtime::cpu::einsum_block<float>(e, ptrs, out.data(), scratch);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["elements_per_s"] =
      benchmark::Counter(static_cast<double>(e.join_elements()) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GenericKernel)->DenseRange(0, 6)->Unit(benchmark::kMicrosecond);

// The reference evaluator (every run and compare checks against it before the timed
// runs) on the X·Y·Z chain at size N: its einsums in doubles on `threads` threads
// (Arg 2; the evaluator itself takes every core). Reports flop/s of the chain's two GEMMs.
void BM_ReferenceChain(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const Einsum e = Einsum::from_subscripts("ij,jk->ik", {{n, n}, {n, n}}, std::nullopt, std::nullopt, DType::f64);
  Tensor a({n, n}, DType::f64, 0.5), b({n, n}, DType::f64, 0.25);
  for (auto _ : state) {
    Tensor xy = runtime::einsum_kernel(e, {&a, &b}, threads);
    Tensor xyz = runtime::einsum_kernel(e, {&xy, &b}, threads);
    benchmark::DoNotOptimize(xyz.data.data());
  }
  state.counters["flops_per_s"] =
      benchmark::Counter(2 * e.flops() * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReferenceChain)->Args({512, 1})->Args({1024, 1})->Args({1024, 2})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
