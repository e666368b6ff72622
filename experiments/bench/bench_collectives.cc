// Collectives at scale as one task graph node (sim/collective_engine.h): a 1 GiB ring
// all-reduce and a 1 GiB all-to-all on 1,024 devices (cluster:128xh100-sxm-8) and 8,192
// devices (cluster:1024xh100-sxm-8). Goals (issue #13): all-reduce ≤ 1 s and ≤ 100 MB on
// 1,024, ≤ 10 s and ≤ 1 GB on 8,192; all-to-all ≤ 1 s on 1,024, ≤ 60 s on 8,192.
// rss_growth_MB is the process's peak resident set (VmHWM) less what it held before the
// first iteration: the simulator's own memory when the benchmark runs alone
// (--benchmark_filter naming one benchmark).
// The ring all-reduces run on one node of ranks for all (sim/collective_symmetry.h) by
// default: `events` counts what was simulated, `events_unreduced` what the full run has;
// the BM_CollFull* variants turn the reduction off (SimOptions::symmetry), the full engine's speed.
// BM_CollHierarchicalAllReduce*: the tuner's choice across nodes (intra-node reduce-scatter,
// a ring per rail, intra-node all-gather), generated with every rank simulated; its tasks
// grow as n²/g (the rails' steps and the node all-gather's move per rail chunk), its memory
// with n (per rank and piece, 2 bytes per rail step for the order of its B touches).
#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

#include "core/machine.h"
#include "sim/collectives.h"
#include "sim/simulator.h"

namespace {

// A field of /proc/self/status in kB (0 where there is none).
double status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1));
  return 0;
}

void run(benchmark::State& state, tessel::sim::Collective c, const char* machine, int n, bool symmetry = true,
         tessel::sim::Algorithm algorithm = tessel::sim::Algorithm::ring) {
  using namespace tessel;
  const Machine m = machine_preset(machine);
  sim::CollectivePlan plan = sim::plan_collective(c, n, std::int64_t{1} << 30, DType::f32, m,
                                                  c == sim::Collective::alltoall ? sim::Algorithm::pairwise : algorithm);
  plan.spec.window = plan.spec.ranks_per_node > 0 ? 0 : 1;
  const TaskGraph tg = sim::collective_node_graph(plan.spec);
  sim::SimOptions o;
  o.channels_per_link = true;  // as simulate --collective runs them
  o.symmetry = symmetry;
  const double rss0 = status_kb("VmRSS");
  double makespan = 0, wall = 0;
  std::int64_t events = 0, events_unreduced = 0;
  int period = 0;
  for (auto _ : state) {
    const sim::SimResult r = sim::simulate(tg, m, o);
    makespan = r.makespan_s;
    wall = r.sim_wall_s;
    events = r.events;
    events_unreduced = r.events_unreduced;
    period = r.symmetry_period;
  }
  state.counters["symmetry_period"] = period;
  state.counters["events_unreduced"] = static_cast<double>(events_unreduced);
  state.counters["ranks"] = n;
  state.counters["events"] = static_cast<double>(events);
  state.counters["makespan_ms"] = makespan * 1e3;
  state.counters["sim_wall_s"] = wall;
  state.counters["busbw_GBps"] = static_cast<double>(plan.spec.bytes) / makespan / 1e9 *
                                 sim::bus_bandwidth_factor(c, n);
  state.counters["rss_growth_MB"] = (status_kb("VmHWM") - rss0) / 1024;
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_CollRingAllReduce1GiB1024(benchmark::State& s) { run(s, tessel::sim::Collective::allreduce, "cluster:128xh100-sxm-8", 1024); }
void BM_CollRingAllReduce1GiB8192(benchmark::State& s) { run(s, tessel::sim::Collective::allreduce, "cluster:1024xh100-sxm-8", 8192); }
void BM_CollFullRingAllReduce1GiB1024(benchmark::State& s) {
  run(s, tessel::sim::Collective::allreduce, "cluster:128xh100-sxm-8", 1024, false);
}
void BM_CollFullRingAllReduce1GiB8192(benchmark::State& s) {
  run(s, tessel::sim::Collective::allreduce, "cluster:1024xh100-sxm-8", 8192, false);
}
void BM_CollAllToAll1GiB1024(benchmark::State& s) { run(s, tessel::sim::Collective::alltoall, "cluster:128xh100-sxm-8", 1024); }
void BM_CollAllToAll1GiB8192(benchmark::State& s) { run(s, tessel::sim::Collective::alltoall, "cluster:1024xh100-sxm-8", 8192); }
BENCHMARK(BM_CollRingAllReduce1GiB1024)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_CollRingAllReduce1GiB8192)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_CollFullRingAllReduce1GiB1024)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_CollFullRingAllReduce1GiB8192)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_CollAllToAll1GiB1024)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_CollAllToAll1GiB8192)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
void BM_CollHierarchicalAllReduce1GiB256(benchmark::State& s) {
  run(s, tessel::sim::Collective::allreduce, "cluster:32xh100-sxm-8", 256, true, tessel::sim::Algorithm::hierarchical);
}
void BM_CollHierarchicalAllReduce1GiB1024(benchmark::State& s) {
  run(s, tessel::sim::Collective::allreduce, "cluster:128xh100-sxm-8", 1024, true, tessel::sim::Algorithm::hierarchical);
}
BENCHMARK(BM_CollHierarchicalAllReduce1GiB256)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_CollHierarchicalAllReduce1GiB1024)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace
