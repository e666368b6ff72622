// Planning time of EinDecomp's DP on the LLaMA-65B block. Goal: < 1 s at 1,024 devices.
#include <benchmark/benchmark.h>

#include "core/workloads.h"
#include "planner/strategy.h"

namespace {

void BM_PlanEinDecompLlama65b(benchmark::State& state) {
  tessel::Graph g = tessel::build_workload("llama-block:model=65b");
  tessel::planner::PlanOptions o;
  o.devices = static_cast<int>(state.range(0));
  double cost = 0;
  for (auto _ : state) {
    tessel::planner::Plan p = tessel::planner::plan(g, "eindecomp", o);
    cost = p.total_cost();
    benchmark::DoNotOptimize(p.decomposition.nodes.data());
  }
  state.counters["cost_elements"] = cost;
}
BENCHMARK(BM_PlanEinDecompLlama65b)->Arg(8)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
