// Planning time of EinDecomp's DP on the LLaMA-65B block (goal: < 1 s at 1,024 devices),
// and of the memory planner on the LLaMA-7B block.
#include <benchmark/benchmark.h>

#include "core/memory_plan.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "planner/residency.h"
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

// plan_memory() on the graph `reproduce offload --quick` plans: the LLaMA-7B block
// (sequence 64) decomposed by eindecomp for 8 devices (4 blocks each, weights resident), each capped at the given
// percentage of its uncapped peak, default prefetch rule. Before each task the planner
// walks ahead (up to 8,192 tasks) for loads to prefetch; this is its cost.
void BM_PlanMemoryLlama7bBlock(benchmark::State& state) {
  tessel::Graph g = tessel::build_workload("llama-block:model=7b,seq=64");
  tessel::planner::PlanOptions po;
  po.devices = 8;
  po.blocks_per_device = 4;
  po.weights = tessel::planner::Weights::fetched;
  tessel::planner::Plan planned = tessel::planner::plan(g, "eindecomp", po);
  tessel::planner::make_resident(g, planned.decomposition);
  tessel::TaskGraph tg = tessel::lower(g, planned.decomposition);
  tessel::MemoryPlanOptions o;
  o.capacity_bytes = tessel::MemoryCap{true, static_cast<double>(state.range(0)) / 100}.bytes_for(tessel::order_peak_bytes(tg));
  std::size_t tasks = 0;
  for (auto _ : state) {
    tessel::MemoryPlan plan = tessel::plan_memory(tg, o);
    tasks = plan.graph.size();
    benchmark::DoNotOptimize(plan.graph.tasks.data());
  }
  state.counters["tasks_in"] = static_cast<double>(tg.size());
  state.counters["tasks_out"] = static_cast<double>(tasks);
}
BENCHMARK(BM_PlanMemoryLlama7bBlock)->Arg(100)->Arg(50)->Arg(25)->Unit(benchmark::kMillisecond);

}  // namespace
