// One point of `tessel sweep` (experiments/sweep.h): planned, lowered, capped when it has
// a memory cap, then simulated or run on this machine's cores.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "core/machine.h"
#include "core/stats.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "experiments/memory_cap.h"
#include "experiments/overlap_cli.h"
#include "experiments/sweep.h"
#include "planner/placement.h"
#include "planner/strategy.h"
#include "runtime/cpu_executor.h"
#include "sim/simulator.h"

namespace tessel::experiments {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The cap as its errors name it (the point's key columns say which point it was).
std::string cap_name(const SweepPoint& p) { return "memory cap " + p.memory_cap; }

void record_plan(const cli::MemoryCapped& c, SweepOutcome& o) {
  o.evicts = c.stats.evicts;
  o.loads = c.stats.loads;
  o.bytes_evicted = c.stats.bytes_evicted;
  o.bytes_loaded = c.stats.bytes_loaded;
  o.prefetch = std::string(to_string(c.prefetch));
  o.memory_plan_wall_s = c.plan_wall_s;
}

// Measured on this machine's cores: the median of 3 runs after one warm-up; a capped
// point runs the graph `tessel run --memory-cap` runs (one-range prefetch, host copies
// bounded by this machine's RAM) with evicts and loads on the workers.
void run_on_cpu(const SweepPoint& p, const Graph& g, TaskGraph tg, SweepOutcome& o) {
  if (!p.memory_cap.empty()) {
    cli::MemoryCapped c = cli::cap_memory(tg, p.memory_cap, nullptr, "one-range", {}, &g);
    cli::check_ram(c, true);  // the devices' arenas and the host copies, in this machine's RAM
    cli::apply_offload_order(c, cli::parse_offload_order(p.offload_order));
    record_plan(c, o);
    tg = std::move(c.graph);
    o.tasks = tg.size();
  }
  runtime::CpuExecutor exec({runtime::parse_policy(p.policy), true});
  const runtime::TensorMap inputs = runtime::random_inputs(g, 1);
  (void)exec.run(g, tg, inputs);  // warm-up
  std::vector<double> spans;
  std::vector<runtime::RunResult> runs;
  const auto t0 = Clock::now();
  for (int r = 0; r < 3; ++r) {
    runs.push_back(exec.run(g, tg, inputs));
    spans.push_back(runs.back().timeline.makespan_s());
  }
  o.sim_wall_s = seconds_since(t0);
  const runtime::RunResult& mid = runs[stats::median_index(spans)];
  o.makespan_s = stats::median(spans);
  std::vector<double> busy(static_cast<std::size_t>(tg.num_devices), 0.0);
  for (const Span& s : mid.timeline.spans)
    if (tg.task(s.task).kind == TaskKind::compute) busy[static_cast<std::size_t>(s.device.value)] += s.end_s - s.start_s;
  double sum = 0;
  for (double b : busy) sum += b;
  const double span = mid.timeline.makespan_s();
  o.compute_utilization = span > 0 && !busy.empty() ? sum / static_cast<double>(busy.size()) / span : 0.0;
  double comm = 0;
  for (const Span& s : mid.timeline.spans)
    if (tg.task(s.task).kind == TaskKind::move) comm += s.end_s - s.start_s;
  o.comm_utilization = span > 0 && !busy.empty() ? comm / static_cast<double>(busy.size()) / span : 0.0;
  o.bytes_moved = tg.summary().bytes_moved;
  o.peak_memory_bytes = 0;  // not measured by the CPU backend
}

void simulate_point(const SweepPoint& p, const Graph& g, TaskGraph tg, const Machine& m, SweepOutcome& o) {
  if (tg.num_devices > m.num_devices())
    fail("the decomposition uses ", tg.num_devices, " devices but machine '", p.machine, "' has ", m.num_devices());
  sim::SimOptions so;
  so.network = p.network;
  so.policy = sim::parse_policy(p.policy);
  so.priority = p.ready_order;
  sim::SimResult r;
  if (!p.memory_cap.empty()) {  // as simulate plans it: each prefetch rule, the fastest kept
    cli::check_memory_cap_fusion(p.fuse_collectives, cap_name(p));
    cli::CappedSimulation run =
        cli::simulate_capped(tg, p.memory_cap, m, so, "fastest", cli::parse_offload_order(p.offload_order), &g);
    record_plan(run.capped, o);
    o.tasks = run.capped.graph.size();
    o.sim_wall_s = run.sim_wall_s;
    r = std::move(run.result);
  } else {
    // Nothing to fuse: a warning naming the point, and the point runs unfused.
    o.fused_kernels = cli::apply_fusion(p.fuse_collectives, tg, m, so,
                                        p.workload + " (-d " + std::to_string(p.devices) + ", " + p.strategy + ", " +
                                            p.machine + ")");
    r = sim::simulate(tg, m, so);
    o.sim_wall_s = r.sim_wall_s;
  }
  o.makespan_s = r.makespan_s;
  o.bytes_moved = r.bytes_moved;
  o.peak_memory_bytes = r.peak_memory_bytes;
  o.events = r.events;
  double busy = 0, comm = 0;
  for (const auto& d : r.devices) {
    busy += d.compute_busy_s;
    comm += d.comm_busy_s;
  }
  const double device_s = r.makespan_s * static_cast<double>(r.devices.size());
  o.compute_utilization = device_s > 0 ? busy / device_s : 0.0;
  o.comm_utilization = device_s > 0 ? comm / device_s : 0.0;
}

}  // namespace

SweepOutcome run_sweep_point(const SweepPoint& p) {
  SweepOutcome o;
  try {
    if (!p.memory_cap.empty()) cli::check_memory_cap_policy(p.policy, cap_name(p), "policy");
    const Graph g = build_workload(p.workload);
    Machine m = load_machine(p.machine);
    p.interference.apply(m);
    planner::PlanOptions po;
    po.devices = p.devices;
    po.placement = p.placement;
    po.machine = m;
    po.weights = planner::parse_weights(p.weights);
    auto t0 = Clock::now();
    const planner::Plan plan = planner::plan(g, p.strategy, po);
    o.plan_wall_s = seconds_since(t0);
    t0 = Clock::now();
    TaskGraph tg = lower(g, plan.decomposition);
    o.lower_wall_s = seconds_since(t0);
    o.tasks = tg.size();
    if (p.backend == "cpu")
      run_on_cpu(p, g, std::move(tg), o);
    else
      simulate_point(p, g, std::move(tg), m, o);
  } catch (const std::exception& e) {
    o = SweepOutcome{};
    o.error = e.what();
  }
  return o;
}

std::vector<SweepOutcome> run_points(const std::vector<SweepPoint>& points, int jobs) {
  std::vector<SweepOutcome> out(points.size());
  std::vector<std::size_t> sim, cpu;
  for (std::size_t i = 0; i < points.size(); ++i) (points[i].backend == "cpu" ? cpu : sim).push_back(i);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t k; (k = next.fetch_add(1)) < sim.size();) out[sim[k]] = run_sweep_point(points[sim[k]]);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, std::min<int>(jobs, static_cast<int>(sim.size()))); ++t) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  for (std::size_t i : cpu) out[i] = run_sweep_point(points[i]);
  return out;
}

}  // namespace tessel::experiments
