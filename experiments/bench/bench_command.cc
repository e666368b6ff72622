// The whole `tessel simulate -w llama-block:model=65b -d N -s eindecomp -m
// cluster:(N/8)xh100-sxm-8` path, phase by phase as the command runs it: build the
// graph, plan with EinDecomp given the machine, lower, simulate (flow network). Goals
// (issue #13) at 1,024 devices: the whole command <= 5 s, the simulator >= 1 M events/s,
// peak memory <= 1 GB (`/usr/bin/time -v` on the command; rss_growth_MB here is the
// growth of this process's peak, meaningful when the benchmark runs alone:
// --benchmark_filter=BM_SimulateCommand).
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <chrono>
#include <ctime>
#include <string>

#include "core/machine.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "planner/strategy.h"
#include "sim/simulator.h"

namespace {

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of this process: the comparable figure on a loaded machine.
double cpu_s() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

void BM_SimulateCommandLlama65b(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  const tessel::Machine m = tessel::machine_preset("cluster:" + std::to_string(devices / 8) + "xh100-sxm-8");
  const double rss0 = peak_rss_mb();
  double plan_s = 0, lower_s = 0, sim_s = 0, plan_cpu = 0, lower_cpu = 0, sim_cpu = 0;
  std::int64_t tasks = 0, events = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_s();
    const tessel::Graph g = tessel::build_workload("llama-block:model=65b");
    tessel::planner::PlanOptions o;
    o.devices = devices;
    o.machine = m;
    tessel::planner::Plan p = tessel::planner::plan(g, "eindecomp", o);
    plan_s = since(t0);
    plan_cpu = cpu_s() - c0;
    t0 = std::chrono::steady_clock::now();
    c0 = cpu_s();
    const tessel::TaskGraph tg = tessel::lower(g, p.decomposition);
    lower_s = since(t0);
    lower_cpu = cpu_s() - c0;
    c0 = cpu_s();
    tessel::sim::SimOptions so;
    so.network = "flow";
    const tessel::sim::SimResult r = tessel::sim::simulate(tg, m, so);
    sim_s = r.sim_wall_s;
    sim_cpu = cpu_s() - c0;
    tasks = static_cast<std::int64_t>(tg.size());
    events = r.events;
    benchmark::DoNotOptimize(r.makespan_s);
  }
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["events"] = static_cast<double>(events);
  state.counters["plan_wall_s"] = plan_s;
  state.counters["lower_wall_s"] = lower_s;
  state.counters["sim_wall_s"] = sim_s;
  state.counters["plan_cpu_s"] = plan_cpu;
  state.counters["lower_cpu_s"] = lower_cpu;
  state.counters["sim_cpu_s"] = sim_cpu;
  state.counters["events_per_s"] = sim_s > 0 ? static_cast<double>(events) / sim_s : 0.0;
  state.counters["events_per_cpu_s"] = sim_cpu > 0 ? static_cast<double>(events) / sim_cpu : 0.0;
  state.counters["rss_growth_MB"] = peak_rss_mb() - rss0;
}
BENCHMARK(BM_SimulateCommandLlama65b)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace
