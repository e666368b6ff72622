// Lowering throughput.
#include <benchmark/benchmark.h>

#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"

namespace {

// lower() on the LLaMA-7B block decomposed for 1,024 devices. Goal: >= 1 million
// tasks lowered per second on one core.
void BM_LowerLlama7bBlock(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  tessel::Graph g = tessel::build_workload("llama-block:model=7b");
  tessel::Decomposition d = tessel::split_largest(g, devices);
  std::size_t tasks = 0;
  for (auto _ : state) {
    tessel::TaskGraph tg = tessel::lower(g, d);
    tasks = tg.size();
    benchmark::DoNotOptimize(tg.tasks.data());
  }
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["tasks_per_s"] =
      benchmark::Counter(static_cast<double>(tasks) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_LowerLlama7bBlock)->Arg(8)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace

