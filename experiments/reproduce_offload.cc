#include "experiments/reproduce_offload.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/io.h"
#include "core/machine.h"
#include "core/memory_plan.h"
#include "core/workloads.h"
#include "planner/residency.h"
#include "planner/strategy.h"
#include "sim/simulator.h"

namespace tessel::experiments {

ReproduceResult offload_reproduction(const ReproduceOptions& o, const std::string& summary) {
  const std::string w = !o.workload.empty() ? o.workload : o.quick ? "llama-block:model=7b,seq=64" : "llama-block:model=7b";
  const std::string machine_name = "h100-sxm-8";
  // EinDecomp with 4 blocks per device: the fastest uncapped, and blocks small enough that
  // one task's buffers fit in 25% of a device's peak (megatron's one block per device
  // needs 37% of it at once, so no schedule exists below that).
  const std::string strategy = "eindecomp";
  const int blocks_per_device = 4;
  const int devices = 8;
  const Graph g = build_workload(w);
  const Machine m = machine_preset(machine_name);
  planner::PlanOptions po;
  po.devices = devices;
  po.blocks_per_device = blocks_per_device;
  // Planned with every weight replica charged (the fetched cost), so that eindecomp
  // shards the weights, then run with them resident: with their replicas free it keeps a
  // whole weight on every device (data parallel), one task above 25% of the peak.
  po.weights = planner::Weights::fetched;
  planner::Plan planned = planner::plan(g, strategy, po);
  planner::make_resident(g, planned.decomposition);
  const TaskGraph tg = lower(g, planned.decomposition);
  std::vector<std::int64_t> peaks = order_peak_bytes(tg);
  const std::int64_t peak = *std::max_element(peaks.begin(), peaks.end());
  std::fprintf(o.out, "offload: %s\n  %s on %d simulated H100s (%s), strategy %s (4 blocks per device), uncapped peak %.4g bytes (largest device)%s\n",
               summary.c_str(), w.c_str(), devices, machine_name.c_str(), strategy.c_str(), static_cast<double>(peak),
               o.quick ? " (--quick: reduced sizes)" : "");
  std::fflush(o.out);

  ReproduceResult res;
  std::string csv = csv_line({"system", "workload", "devices", "strategy", "machine", "cap_pct", "memory_cap_bytes",
                              "uncapped_peak_bytes", "prefetch", "makespan_s", "slowdown", "target_max_slowdown",
                              "meets_target", "peak_memory_bytes", "bytes_evicted", "bytes_loaded", "evicts", "loads",
                              "tasks", "error"});
  sim::SimOptions so;
  const sim::SimResult base = sim::simulate(tg, m, so);
  // Issue 16's target: with memory capped at 50% of the uncapped peak, makespan <= 1.25x
  // uncapped. It is set at 50%; a larger cap is held to the same bound (more memory should
  // not be slower); below 50% there is none.
  const double target = 1.25;
  const int target_pct = 50;
  auto target_of = [&](int pct) { return pct >= target_pct ? fmt("%.2f", target) : std::string(); };
  auto verdict = [&](int pct, double slowdown) {
    return pct < target_pct ? std::string() : slowdown <= target ? std::string("yes") : std::string("no");
  };
  auto row = [&](const std::string& system, int pct, std::int64_t cap, const sim::SimResult& r, const MemoryPlanStats* s,
                 std::size_t tasks, const std::string& prefetch) {
    const double slowdown = r.makespan_s / base.makespan_s;
    csv += csv_line({system, w, std::to_string(devices), strategy, machine_name, std::to_string(pct), std::to_string(cap),
                     std::to_string(peak), prefetch, fmt("%.9g", r.makespan_s), fmt("%.6f", slowdown),
                     s ? target_of(pct) : "", s ? verdict(pct, slowdown) : "", std::to_string(r.peak_memory_bytes),
                     std::to_string(s ? s->bytes_evicted : 0), std::to_string(s ? s->bytes_loaded : 0),
                     std::to_string(s ? s->evicts : 0), std::to_string(s ? s->loads : 0), std::to_string(tasks), ""});
    ++res.points;
  };
  // Per cap that planned: the fixed order's makespan over the free order's.
  std::string fixed_over_free;
  auto say = [&](std::string line) {
    std::fprintf(o.out, "  %s\n", line.c_str());
    res.headlines.push_back(std::move(line));
  };
  for (int pct : {100, 75, 50, 25}) row("uncapped", pct, peak, base, nullptr, tg.size(), "");
  say("uncapped: makespan " + fmt("%.3f ms", base.makespan_s * 1e3) + ", peak " +
      fmt("%.4g", static_cast<double>(base.peak_memory_bytes)) + " bytes");
  for (int pct : {100, 75, 50, 25}) {
    MemoryPlanOptions mo;  // every device capped at pct% of its own uncapped peak
    for (std::int64_t p : peaks) mo.capacity_bytes.push_back(std::max<std::int64_t>(1, p * pct / 100));
    const std::int64_t cap = peak * pct / 100;  // the largest device's
    for (int d = 0; d < tg.num_devices; ++d) mo.host_of.push_back(m.devices[static_cast<std::size_t>(d)].host);
    for (const Host& h : m.hosts) mo.host_capacity_bytes.push_back(h.memory_capacity_bytes);
    // The memory plan under each prefetch rule (PrefetchRoom), the one whose free-order run
    // is fastest kept (the first among equals): no rule is best at every cap. The fixed
    // order runs that same plan. A rule whose plan fails is skipped (named in the line);
    // when every rule fails, the cap is recorded as failed with the first rule's error.
    MemoryPlan plan;
    sim::SimResult async;
    PrefetchRoom chosen = PrefetchRoom::one_range;
    bool planned = false;
    std::string tried, first_error;
    for (PrefetchRoom rule : kPrefetchRooms) {
      mo.prefetch = rule;
      MemoryPlan candidate;
      try {
        candidate = plan_memory(tg, mo);
      } catch (const Error& e) {
        if (first_error.empty()) first_error = e.what();
        tried += std::string(tried.empty() ? "" : ", ") + std::string(to_string(rule)) + " failed";
        continue;
      }
      sim::SimResult r = sim::simulate(candidate.graph, m, so);
      tried += std::string(tried.empty() ? "" : ", ") + std::string(to_string(rule)) + " " +
               fmt("%.3fx", r.makespan_s / base.makespan_s);
      if (!planned || r.makespan_s < async.makespan_s) {
        plan = std::move(candidate);
        async = std::move(r);
        chosen = rule;
        planned = true;
      }
    }
    if (!planned) {  // no schedule fits this cap: recorded, the other caps go on
      res.failed += 2;
      res.points += 2;
      for (const char* system : {"turnip (free order)", "fixed order, sync"})
        csv += csv_line({system, w, std::to_string(devices), strategy, machine_name, std::to_string(pct),
                         std::to_string(peak * pct / 100), std::to_string(peak), "", "", "", target_of(pct),
                         pct >= target_pct ? "no" : "", "", "", "", "", "", "", first_error});
      say(std::to_string(pct) + "%: " + first_error + (pct >= target_pct ? "; target <= 1.25x uncapped: FAIL" : ""));
      continue;
    }
    const TaskGraph fixed = fixed_order(plan.graph);
    const sim::SimResult sync = sim::simulate(fixed, m, so);
    const std::string rule(to_string(chosen));
    row("turnip (free order)", pct, cap, async, &plan.stats, plan.graph.size(), rule);
    row("fixed order, sync", pct, cap, sync, &plan.stats, fixed.size(), rule);
    say(std::to_string(pct) + "% (" + fmt("%.4g", static_cast<double>(cap)) + " bytes): free order " +
        fmt("%.3f ms", async.makespan_s * 1e3) + " (" + fmt("%.3fx", async.makespan_s / base.makespan_s) +
        "), fixed order " + fmt("%.3f ms", sync.makespan_s * 1e3) + " (" + fmt("%.3fx", sync.makespan_s / base.makespan_s) +
        "); prefetch " + rule + " (fastest of " + tried + "); peak " +
        fmt("%.4g", static_cast<double>(async.peak_memory_bytes)) + " bytes; evicted " +
        fmt("%.4g", static_cast<double>(plan.stats.bytes_evicted)) + ", loaded " +
        fmt("%.4g", static_cast<double>(plan.stats.bytes_loaded)) + " bytes; " +
        (pct >= target_pct ? "target <= " + fmt("%.2fx", target) + " uncapped (issue 16" +
                                 (pct > target_pct ? ", set at 50%, held here too" : "") + "): free order " +
                                 (verdict(pct, async.makespan_s / base.makespan_s) == "yes" ? "PASS" : "FAIL") +
                                 ", fixed order " + (verdict(pct, sync.makespan_s / base.makespan_s) == "yes" ? "PASS" : "FAIL")
                           : std::string("no target below 50%")));
    fixed_over_free += (fixed_over_free.empty() ? "" : ", ") + fmt("%.2fx", sync.makespan_s / async.makespan_s) + " at " +
                       std::to_string(pct) + "%";
  }
  say("target (issue 16): with memory capped at 50% of the uncapped peak, makespan <= 1.25x uncapped, in the "
      "simulator and on the CPU executor; these rows are the simulator's");
  say("fixed order (ZeRO-Offload-style, synchronous transfers) over free order (TURNIP): " +
      (fixed_over_free.empty() ? std::string("no cap planned") : fixed_over_free) +
      "; nearest published comparison with a ZeRO-Offload baseline: ZeRO-Offload++ Twin-Flow (DeepSpeed blog, "
      "2023) reports 6x (OPT-30B on a DGX-H100) and 3x (OPT-13B on a DGX-A100) the training speed of ZeRO-Offload "
      "- a different system (it splits the optimizer step between CPU and GPU; it does not reorder at run time) and "
      "workload (training, not one inference block), so not a like-for-like figure; TURNIP (arXiv 2405.16283) "
      "reports its gains on other workloads");
  OutputBatch files;  // the CSV and traces: all in place before the plots, or none
  files.add_folder("-o", o.dir);
  res.csv = (std::filesystem::path(o.dir) / "offload.csv").string();
  files.stage(res.csv, csv);
  say("csv: " + res.csv);
  files.commit();
  if (o.plot) {
    const std::string png = (std::filesystem::path(o.dir) / "offload.png").string();
    const std::string cmd = shell_quote(o.plots_dir + "/python.sh") + " " + shell_quote(o.plots_dir + "/lines.py") + " " +
                            shell_quote(res.csv) + " " + shell_quote(png) +
                            " --x cap_pct --y slowdown --group system --xlabel " +
                            shell_quote("memory cap (% of the uncapped peak)") + " --ylabel " +
                            shell_quote("makespan / uncapped") + " --title " +
                            shell_quote(w + " on 8 simulated H100s, memory capped");
    std::fflush(o.out);
    std::fflush(stdout);
    if (std::system(cmd.c_str()) != 0)
      fail("reproduce offload: drawing ", png, " failed (lines.py through plots/python.sh; the CSV ", res.csv,
           " is complete)");
    res.pngs.push_back(png);
    say("png: " + png);
  }
  return res;
}

}  // namespace tessel::experiments
