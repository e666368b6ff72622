// Simulator throughput: events per second on the LLaMA-65B block decomposed for 1,024
// devices on cluster:128xh100-sxm-8. Goals (issue #5): >= 2 million events/s with
// alpha-beta, >= 500,000 with flow, the whole simulation under 5 s on one core.
#include <benchmark/benchmark.h>

#include "core/machine.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "sim/simulator.h"

namespace {

struct Llama65bOn1024 {
  tessel::Machine machine = tessel::machine_preset("cluster:128xh100-sxm-8");
  tessel::TaskGraph tg = [] {
    tessel::Graph g = tessel::build_workload("llama-block:model=65b");
    return tessel::lower(g, tessel::split_largest(g, 1024));
  }();
};

const Llama65bOn1024& llama65b() {
  static const Llama65bOn1024 w;  // built once, read-only
  return w;
}

void run(benchmark::State& state, const char* network) {
  const auto& w = llama65b();
  tessel::sim::SimOptions o;
  o.network = network;
  std::int64_t events = 0;
  double makespan = 0, wall = 0;
  for (auto _ : state) {
    tessel::sim::SimResult r = tessel::sim::simulate(w.tg, w.machine, o);
    events = r.events;
    makespan = r.makespan_s;
    wall = r.sim_wall_s;
    benchmark::DoNotOptimize(r.timeline.spans.data());
  }
  state.counters["tasks"] = static_cast<double>(w.tg.size());
  state.counters["events"] = static_cast<double>(events);
  state.counters["makespan_ms"] = makespan * 1e3;
  state.counters["sim_wall_s"] = wall;
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_SimLlama65b1024AlphaBeta(benchmark::State& state) { run(state, "alpha-beta"); }
void BM_SimLlama65b1024Flow(benchmark::State& state) { run(state, "flow"); }
BENCHMARK(BM_SimLlama65b1024AlphaBeta)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SimLlama65b1024Flow)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
