// tessel simulate: score a task graph (or a collective) on a machine model.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>

#include "core/collective_rewrite.h"
#include "core/error.h"
#include "core/io.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "core/timeline.h"
#include "experiments/cli.h"
#include "experiments/overlap_cli.h"
#include "experiments/memory_cap.h"
#include "sim/collective_engine.h"
#include "sim/collectives.h"
#include "sim/network.h"
#include "sim/simulator.h"
#include "sim/task_graph_json.h"

namespace tessel::cli {

std::int64_t parse_bytes(const std::string& text) {
  std::size_t end = 0;
  double v = 0;
  try {
    v = std::stod(text, &end);
  } catch (...) {
    fail("--bytes '", text, "': expected a size such as 4096, 1e9, 64MB or 1GiB");
  }
  std::string unit = text.substr(end);
  double scale = 1;
  const std::pair<const char*, double> units[] = {
      {"", 1},       {"B", 1},       {"K", 1024.0},   {"KiB", 1024.0},  {"KB", 1e3},     {"M", 1048576.0},
      {"MiB", 1048576.0}, {"MB", 1e6}, {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9},
      {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12}};
  bool found = false;
  for (const auto& [name, s] : units)
    if (unit == name) {
      scale = s;
      found = true;
    }
  if (!found) fail("--bytes '", text, "': unknown unit '", unit, "' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  double bytes = v * scale;
  if (!(bytes >= 1) || bytes > 9e18 || std::floor(bytes) != bytes)
    fail("--bytes '", text, "': must be a whole number of bytes >= 1");
  return static_cast<std::int64_t>(bytes);
}

namespace {

using nlohmann::json;

struct Opts {
  GraphOptions graph;
  DecompositionOptions dec;
  std::string task_graph_file;
  std::string machine;
  std::string network = "flow";
  std::string policy = "async";
  OverlapOptions overlap;
  bool no_interference = false;
  int comm_channels = 1;
  int pieces_in_flight = 0;  // --pieces-in-flight; 0: the planner's
  std::string collective;
  std::string algorithm = "auto";
  std::string bytes;
  std::string dtype = "f32";
  bool devices_given = false, dtype_given = false;  // -d, --dtype on the command line
  std::string trace;
  std::string trace_devices;
  std::string machine_out;
  std::string memory_cap;
  std::string prefetch;  // empty: not given (fastest with --memory-cap)
  std::string offload_order = "free";
  bool json_out = false;
  bool expand_collectives = false;
  bool no_symmetry = false;
};

void print_report(const sim::SimResult& r, const TaskGraph& tg, const Machine& m) {
  const double ms = r.makespan_s;
  double compute = 0, comm = 0, idle = 0, max_compute = 0;
  for (const auto& d : r.devices) {
    compute += d.compute_busy_s;
    comm += d.comm_busy_s;
    idle += d.idle_s;
    max_compute = std::max(max_compute, d.compute_busy_s);
  }
  const double nd = static_cast<double>(std::max<std::size_t>(1, r.devices.size()));
  auto pct = [&](double v) { return ms > 0 ? 100.0 * v / ms : 0.0; };
  std::printf("  tasks         %s\n", task_counts(tg).c_str());
  std::printf("  makespan      %s\n", human_seconds(ms).c_str());
  if (r.dispatch_held_tasks > 0) {
    double interval = 0;
    for (const DeviceType& t : m.device_types) interval = std::max(interval, t.dispatch_interval_s);
    std::printf("  dispatch      %lld of %zu tasks waited for their chip's dispatch gate (one start per %s), %s in all\n",
                static_cast<long long>(r.dispatch_held_tasks), tg.tasks.size(), human_seconds(interval).c_str(),
                human_seconds(r.dispatch_wait_s).c_str());
  }
  std::printf("  per device    compute busy %.1f%% (max %.1f%%), comm busy %.1f%%, idle %.1f%% (means over %zu devices)\n",
              pct(compute / nd), pct(max_compute), pct(comm / nd), pct(idle / nd), r.devices.size());
  std::size_t busiest = 0;
  for (std::size_t l = 0; l < r.link_bytes.size(); ++l)
    if (r.link_bytes[l] > r.link_bytes[busiest]) busiest = l;
  std::printf("  bytes moved   %s", human_bytes(static_cast<double>(r.bytes_moved)).c_str());
  if (!r.link_bytes.empty() && r.link_bytes[busiest] > 0)
    std::printf("; busiest link %s carried %s", m.links[busiest].name.c_str(),
                human_bytes(static_cast<double>(r.link_bytes[busiest])).c_str());
  std::printf("\n");
  std::size_t peak_dev = 0;
  for (std::size_t d = 0; d < r.devices.size(); ++d)
    if (r.devices[d].peak_memory_bytes > r.devices[peak_dev].peak_memory_bytes) peak_dev = d;
  if (tg.has_collectives()) {
    std::printf("  peak memory   not tracked by the generated collective (--expand-collectives tracks it)\n");
  } else if (!r.devices.empty()) {
    std::printf("  peak memory   %s on device %zu at %s\n", human_bytes(static_cast<double>(r.peak_memory_bytes)).c_str(),
                peak_dev, human_seconds(r.devices[peak_dev].peak_memory_time_s).c_str());
  }
  int kinds[kNumTaskKinds] = {};
  for (TaskId t : r.critical_path) ++kinds[static_cast<int>(tg.task(t).kind)];
  if (!tg.has_collectives())
    std::printf("  critical path %zu tasks (compute %d, move %d, touch %d)\n", r.critical_path.size(),
              kinds[static_cast<int>(TaskKind::compute)], kinds[static_cast<int>(TaskKind::move)],
              kinds[static_cast<int>(TaskKind::touch)]);
  std::printf("  simulator     %lld events in %.3f s (%.3g events/s)\n", static_cast<long long>(r.events), r.sim_wall_s,
              r.sim_wall_s > 0 ? static_cast<double>(r.events) / r.sim_wall_s : 0.0);
  std::size_t shown = 0;
  for (const auto& o : r.over_capacity) {
    if (shown++ == 5) {
      std::fprintf(stderr, "tessel: warning: ... and %zu more devices over capacity\n", r.over_capacity.size() - 5);
      break;
    }
    std::fprintf(stderr,
                 "tessel: warning: device %d exceeds its memory capacity (%s) by %s: first at %s, peak %s at %s%s\n",
                 o.device.value, human_bytes(static_cast<double>(o.capacity_bytes)).c_str(),
                 human_bytes(static_cast<double>(o.excess_bytes)).c_str(), human_seconds(o.first_exceeded_s).c_str(),
                 human_bytes(static_cast<double>(o.peak_bytes)).c_str(), human_seconds(o.peak_time_s).c_str(),
                 shown == 1 ? "; --memory-cap BYTES|FRACTION (at most the capacity) plans evicts and loads to host "
                              "memory so that the run fits"
                            : "");
  }
}

void run_simulate(const Opts& o) {
  Machine m = load_machine(o.machine);
  o.overlap.apply(m);
  sim::SimOptions so;
  so.network = o.network;
  {
    bool known = false;
    for (const auto& n : sim::network_models()) known = known || n.name == o.network;
    if (!known) {
      std::string list;
      for (const auto& n : sim::network_models()) list += (list.empty() ? "" : ", ") + n.name;
      fail("--network: unknown network model '", o.network, "' (expected ", list, ")");
    }
  }
  so.policy = sim::parse_policy(o.policy, "--policy");
  so.priority = o.overlap.ready();
  so.interference = !o.no_interference;
  so.comm_channels = o.comm_channels;

  if (o.trace == "-" && o.machine_out == "-") fail("--trace and --write-machine cannot both write to stdout ('-')");
  const bool collective = !o.collective.empty();
  const int sources = (!o.graph.workload.empty() || !o.graph.graph_file.empty()) + !o.task_graph_file.empty() + collective;
  if (sources > 1) fail("give one of -w/-g, --task-graph or --collective");
  if (sources == 0) fail("nothing to simulate: give -w WORKLOAD, -g GRAPH.json, --task-graph FILE or --collective NAME");
  // Options the chosen source has no use for are refused, not ignored.
  if (collective || !o.task_graph_file.empty()) {
    const char* source = collective ? "--collective" : "--task-graph (a task graph is decomposed and placed already)";
    if (!o.dec.strategy.empty()) fail("-s applies to -w/-g only, not to ", source);
    if (!o.dec.parts.empty()) fail("--parts applies to -w/-g only, not to ", source);
    if (!o.dec.decomposition_file.empty()) fail("--decomposition applies to -w/-g only, not to ", source);
    if (!collective && o.devices_given) fail("-d applies to -w/-g and --collective, not to ", source);
  }
  if (!collective && !o.bytes.empty()) fail("--bytes applies to --collective only");
  if (!collective && o.dtype_given) fail("--dtype applies to --collective only (a graph's nodes carry their own)");
  // Every output checked now and written together once the simulation has succeeded.
  OutputBatch out({{"-g", o.graph.graph_file},
                   {"--task-graph", o.task_graph_file},
                   {"--decomposition", o.dec.decomposition_file},
                   {"-m", o.machine}});
  out.add("--trace", o.trace);
  out.add("--write-machine", o.machine_out);

  TaskGraph tg;
  Graph g;
  std::string what;
  sim::Collective coll = sim::Collective::allreduce;
  std::int64_t coll_bytes = 0;
  sim::CollectivePlan plan;
  bool expanded = false;
  std::string why_expanded;
  double plan_wall_s = 0, lower_wall_s = 0;  // -w / -g: building and planning the graph, lowering it
  if (!collective && o.expand_collectives) fail("--expand-collectives applies to --collective only");
  if (!collective && o.algorithm != "auto") fail("--algorithm applies to --collective only");
  if (!collective && o.pieces_in_flight > 0) fail("--pieces-in-flight applies to --collective only");
  if (o.memory_cap.empty() && !o.prefetch.empty()) fail("--prefetch applies with --memory-cap only");
  const OffloadOrder offload_order = parse_offload_order(o.offload_order);
  check_offload_order(offload_order, o.memory_cap);
  // The fused tasks' times and flags (sim/fuse.h) are indexed by the task ids of the fused
  // graph; the memory planner inserts evicts and loads and renumbers them.
  if (!o.memory_cap.empty()) check_memory_cap_fusion(o.overlap.fuse_collectives);
  so.symmetry = !o.no_symmetry;
  if (collective) {
    coll = sim::parse_collective(o.collective, "--collective");
    if (o.bytes.empty()) fail("--collective needs --bytes SIZE");
    coll_bytes = parse_bytes(o.bytes);
    if (o.dec.devices > m.num_devices())
      fail("-d ", o.dec.devices, ": machine '", m.name, "' has only ", m.num_devices(), " devices");
    std::optional<sim::Algorithm> forced;
    if (o.algorithm != "auto") {
      try {
        forced = sim::parse_algorithm(o.algorithm, "--algorithm");
      } catch (const Error&) {
        fail("--algorithm: unknown algorithm '", o.algorithm, "' (expected auto, ring, tree, hierarchical or pairwise)");
      }
    }
    so.channels_per_link = true;  // one connection per peer link, as NCCL keeps them
    plan = sim::plan_collective(coll, o.dec.devices, coll_bytes, parse_dtype(o.dtype, "--dtype"), m, forced);
    plan.spec.window = plan.spec.ranks_per_node > 0 ? 0 : so.comm_channels;
    if (o.pieces_in_flight > 0) {
      if (int* w = sim::pieces_in_flight(plan.spec)) {
        *w = o.pieces_in_flight;
      } else {
        fail("--pieces-in-flight applies to a ring reduce-scatter or all-reduce and to the hierarchical all-reduce; "
             "this is ", sim::to_string(coll), " (", sim::to_string(plan.spec.algorithm), ")",
             coll == sim::Collective::allgather ? ", whose pieces are not windowed" : "");
      }
    }
    // One collective node, whose steps the simulator generates as it runs; the expanded
    // form when asked, or for a trace (which names every task).
    // The report names tasks of the graph simulated, so an expanded run gets the expanded graph.
    if (o.expand_collectives || !o.trace.empty()) {
      why_expanded = o.expand_collectives ? "--expand-collectives" : "--trace names every task";
    } else {
      why_expanded = sim::generated_form_unsupported(plan.spec, m, so);
    }
    expanded = !why_expanded.empty();
    tg = expanded ? sim::collective_task_graph(plan.spec) : sim::collective_node_graph(plan.spec);
    what = std::string(sim::to_string(coll)) + " (" + std::string(sim::to_string(plan.spec.algorithm)) + ") of " +
           human_bytes(static_cast<double>(coll_bytes)) + " over " + std::to_string(o.dec.devices) + " ranks";
  } else if (!o.task_graph_file.empty()) {
    tg = sim::task_graph_from_json(read_json_file(o.task_graph_file), o.task_graph_file);
    what = o.task_graph_file;
  } else {
    // -d against the machine before any planning (a decomposition file names its own count).
    if (o.dec.decomposition_file.empty() && o.dec.devices > m.num_devices())
      fail("-d: ", o.dec.devices, " devices asked for, but machine '", m.name, "' has only ", m.num_devices());
    const auto plan_start = std::chrono::steady_clock::now();
    g = o.graph.load();
    Decomposition d = o.dec.load(g, &m);
    plan_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - plan_start).count();
    if (d.num_devices > m.num_devices())
      fail("the decomposition places blocks on ", d.num_devices, " devices (",
           o.dec.decomposition_file.empty() ? "-d" : o.dec.decomposition_file + ": \"devices\"", ") but machine '",
           m.name, "' has ", m.num_devices());
    const auto lower_start = std::chrono::steady_clock::now();
    tg = lower(g, d, o.dec.lower_options());
    // Collective nodes simulate as NCCL's pipelined ring (sim/collectives.h); expanded
    // here so that the critical path and the trace name the tasks that ran.
    if (has_lowered_collectives(tg)) tg = sim::expand_collectives(tg);
    lower_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - lower_start).count();
    what = o.graph.describe();
  }
  if (tg.num_devices > m.num_devices())
    fail(what, " is placed on ", tg.num_devices, " devices but machine '", m.name, "' has ", m.num_devices());
  if (o.no_symmetry && !collective && !tg.has_collectives())
    fail("--no-symmetry applies to --collective or a --task-graph file with a collective node only");

  const int fused = apply_fusion(o.overlap.fuse_collectives, tg, m, so, what);

  std::optional<std::vector<bool>> trace_devices;  // checked before simulating: no trace on bad input
  if (!o.trace_devices.empty()) {
    if (o.trace.empty()) fail("--trace-devices needs --trace FILE");
    trace_devices = parse_device_list(o.trace_devices, m.num_devices(), "--trace-devices");
  }

  // --memory-cap: the uncapped run first (for the slowdown), then the capped graph
  // (simulate_capped: the plan kept by its free-order makespan, run in the order asked).
  std::optional<MemoryCapped> capped;
  std::optional<sim::SimResult> uncapped;
  std::optional<sim::SimResult> capped_result;
  std::optional<double> free_order_makespan_s;  // with fixed: the same plan in free order
  if (!o.memory_cap.empty()) {
    if (collective) fail("--memory-cap applies to task graphs (-w, -g, --task-graph), not to --collective");
    check_memory_cap_policy(o.policy);
    uncapped = sim::simulate(tg, m, so);
    CappedSimulation run = simulate_capped(tg, o.memory_cap, m, so, o.prefetch.empty() ? "fastest" : o.prefetch,
                                           offload_order, g.size() ? &g : nullptr);
    free_order_makespan_s = run.free_order_makespan_s;
    capped = std::move(run.capped);
    tg = std::move(capped->graph);
    capped_result = std::move(run.result);
  }
  sim::SimResult r = capped_result ? std::move(*capped_result) : sim::simulate(tg, m, so);
  // Files only once the command has succeeded: a failing command leaves none behind.
  if (!o.trace.empty()) {
    std::ostringstream os;
    write_chrome_trace(os, r.timeline, &tg, g.size() ? &g : nullptr, trace_devices ? &*trace_devices : nullptr);
    out.stage(o.trace, os.str());
  }
  if (!o.machine_out.empty()) out.stage(o.machine_out, to_json(m).dump(2) + "\n");
  out.commit();
  if (o.trace == "-" || o.machine_out == "-") return;  // a file went to stdout in place of the report
  json j = sim::to_json(r, m);
  j["graph"] = what;  // what was simulated, as run, lower and compare name it
  if (!collective && o.task_graph_file.empty()) j["weights"] = o.dec.weights_used();
  j["tasks"] = tg.size();
  if (!collective && o.task_graph_file.empty()) {
    j["plan_wall_s"] = plan_wall_s;  // the same phases as sweep's columns of these names
    j["lower_wall_s"] = lower_wall_s;
  }
  j["interference"] = so.interference;
  j["ready_order"] = std::string(sim::to_string(so.priority));
  j["comm_priority"] = std::string(to_string(m.interference.comm_priority));
  j["comm_sms"] = m.interference.comm_sms;
  j["comm_mechanism"] = std::string(to_string(m.interference.comm_mechanism));
  j["fused_kernels"] = fused;
  if (so.interference && !m.device_types.empty()) {
    const SlowdownFactors f = m.interference.resolve(m.device_types[0].sm_count);
    j["compute_slowdown"] = f.compute_slowdown;
    j["comm_slowdown"] = f.comm_slowdown;
    j["interference_source"] = f.source;
  }
  if (capped) {
    json mc = memory_cap_json(*capped);
    mc["uncapped_makespan_s"] = uncapped->makespan_s;
    mc["uncapped_peak_memory_bytes"] = uncapped->peak_memory_bytes;
    mc["slowdown"] = uncapped->makespan_s > 0 ? r.makespan_s / uncapped->makespan_s : 1.0;
    if (free_order_makespan_s) mc["free_order_makespan_s"] = *free_order_makespan_s;
    j["memory_cap"] = mc;
  }
  double algbw = 0, busbw = 0;
  if (collective) {
    algbw = r.makespan_s > 0 ? static_cast<double>(coll_bytes) / r.makespan_s / 1e9 : 0.0;
    busbw = algbw * sim::bus_bandwidth_factor(coll, o.dec.devices);
    j["collective"] = std::string(sim::to_string(coll));
    j["bytes"] = coll_bytes;
    j["ranks"] = o.dec.devices;
    j["algbw_bytes_per_s"] = algbw * 1e9;  // nccl-tests prints GB/s; JSON keeps bytes/s
    j["busbw_bytes_per_s"] = busbw * 1e9;
    j["algorithm"] = std::string(sim::to_string(plan.spec.algorithm));
    j["slices"] = plan.spec.slices;
    if (const int* w = sim::pieces_in_flight(plan.spec)) j["pieces_in_flight"] = *w;
    j["comm_channels"] = so.comm_channels;
    j["collective_form"] = expanded ? "expanded" : "generated";
    // The symmetry reduction (to_json() writes symmetry, symmetry_period, symmetry_note and
    // events_unreduced): the expanded form is never reduced.
    if (expanded) j["symmetry_note"] = "expanded form (" + why_expanded + ")";
    json est = json::array();
    for (const auto& e : plan.estimates)
      est.push_back({{"algorithm", std::string(sim::to_string(e.algorithm))},
                     {"latency_s", e.latency_s},
                     {"algbw_bytes_per_s", e.algbw_bytes_per_s},
                     {"time_s", e.time_s}});
    j["tuner_estimates"] = est;
    if (auto pub = sim::published_busbw(coll, o.dec.devices, m))
      j["published_busbw"] = {{"low_bytes_per_s", pub->low_GBps * 1e9},
                              {"high_bytes_per_s", pub->high_GBps * 1e9},
                              {"system", std::string(pub->system)},
                              {"source", std::string(pub->source)}};
  }
  if (o.json_out) {
    print_json(j);
    return;
  }
  std::printf("%s on %s (%d of %d devices), network %s, policy %s%s\n", what.c_str(), m.name.c_str(), tg.num_devices,
              m.num_devices(), o.network.c_str(), o.policy.c_str(), so.interference ? "" : ", no interference");
  if (so.interference && !m.device_types.empty()) {
    const SlowdownFactors f = m.interference.resolve(m.device_types[0].sm_count);
    std::printf("  overlap       comm %s, %s priority, %d SMs reserved: compute x%.3g, comm x%.3g while both run%s\n",
                std::string(to_string(m.interference.comm_mechanism)).c_str(),
                std::string(to_string(m.interference.comm_priority)).c_str(), m.interference.comm_sms,
                f.compute_slowdown, f.comm_slowdown, "");
  }
  if (fused > 0)
    std::printf("  fused         %d GEMMs send their output in %d tiles as they finish (comm occupancy %.3g)\n", fused,
                m.interference.fused.tiles, m.interference.fused.comm_occupancy);
  print_report(r, tg, m);
  if (capped) {
    print_memory_cap(*capped);
    std::printf("  vs uncapped   makespan %s against %s (%.3fx), peak memory %s against %s\n",
                human_seconds(r.makespan_s).c_str(), human_seconds(uncapped->makespan_s).c_str(),
                uncapped->makespan_s > 0 ? r.makespan_s / uncapped->makespan_s : 1.0,
                human_bytes(static_cast<double>(r.peak_memory_bytes)).c_str(),
                human_bytes(static_cast<double>(uncapped->peak_memory_bytes)).c_str());
    if (free_order_makespan_s)
      std::printf("  vs free order makespan %s against %s in free order, the same plan (%.3fx): what the freedom of "
                  "order buys\n",
                  human_seconds(r.makespan_s).c_str(), human_seconds(*free_order_makespan_s).c_str(),
                  *free_order_makespan_s > 0 ? r.makespan_s / *free_order_makespan_s : 1.0);
  }
  if (collective) {
    std::printf("  bandwidth     algbw %.2f GB/s, busbw %.2f GB/s\n", algbw, busbw);
    const int* w = sim::pieces_in_flight(plan.spec);
    const std::string rail =
        w ? ", " + std::to_string(*w) +
                    (plan.spec.algorithm == sim::Algorithm::hierarchical ? " in flight per rail" : " in flight")
              : "";
    std::printf("  algorithm     %s%s, %d slices%s, %d channels; tuner estimates:",
                std::string(sim::to_string(plan.spec.algorithm)).c_str(),
                o.algorithm == "auto" ? " (tuner's choice)" : " (forced)", plan.spec.slices, rail.c_str(),
                so.comm_channels);
    for (const auto& e : plan.estimates)
      std::printf(" %s %s", std::string(sim::to_string(e.algorithm)).c_str(), human_seconds(e.time_s).c_str());
    std::printf("\n");
    std::printf("  form          %s\n", expanded ? ("expanded (" + why_expanded + ")").c_str()
                                                : "generated (one collective node, steps made as they run)");
    if (r.symmetry_period > 0)
      std::printf("  symmetry      ranks 0-%d simulated for all %d (shifting the ranks by %d maps the run onto itself; "
                  "--no-symmetry runs all)\n",
                  r.symmetry_period - 1, o.dec.devices, r.symmetry_period);
    else if (!expanded)
      std::printf("  symmetry      not used: %s\n", r.symmetry_note.c_str());
    if (auto pub = sim::published_busbw(coll, o.dec.devices, m))
      std::printf("  published     busbw %.0f-%.0f GB/s on %s (%s)\n", pub->low_GBps, pub->high_GBps,
                  std::string(pub->system).c_str(), std::string(pub->source).c_str());
  }
  if (!o.trace.empty()) std::printf("  trace         %s\n", o.trace.c_str());
}

}  // namespace

void add_sim_commands(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("simulate", "score a decomposition (or a collective) on a machine model");
  o->graph.add(*cmd);
  o->dec.add(*cmd);
  cmd->add_option("--task-graph", o->task_graph_file, "task graph JSON file (instead of -w/-g)");
  cmd->add_option("-m,--machine", o->machine,
                  "machine preset (h100-sxm-8, a100-sxm-8, h100-pcie-4, cpu, cpu:N, cluster:NODESxPRESET"
                  "[,oversubscription=R]; switch graphs: fat-tree:NODESxPRESET[,leaf=L][,pod=P][,spines=S]"
                  "[,oversubscription=R], rail:NODESxPRESET[,group=G][,spines=S][,oversubscription=R], "
                  "torus:AxB[xC]xPRESET[,link_bytes_per_s=W]) or machine JSON file (with \"switches\" and link "
                  "\"from\"/\"to\": routes are shortest paths over that graph, ECMP by hash)")
      ->required();
  cmd->add_option("--network", o->network, "network model: flow or alpha-beta")->capture_default_str();
  cmd->add_option("--policy", o->policy, "async (work-conserving) or bsp (barriers per graph node)")
      ->capture_default_str();
  o->overlap.add(*cmd);
  cmd->add_flag("--no-interference", o->no_interference, "perfect compute/communication overlap");
  cmd->add_option("--comm-channels", o->comm_channels,
                  "moves a device sends at the same time, 1 to 1024 (with --collective: per link it sends on)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--collective", o->collective, "simulate a collective instead: allreduce, reducescatter, allgather, alltoall");
  cmd->add_option("--pieces-in-flight", o->pieces_in_flight,
                  "pieces a rank keeps in flight: a ring reduce-scatter's or all-reduce's, the hierarchical "
                  "all-reduce's along its rails (inside a node 8), 1 to 65536 (default: the planner's, the fewest "
                  "whose chunks hold every hop's bandwidth-delay product, at least 8; JSON pieces_in_flight)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--bytes", o->bytes, "collective size S as nccl-tests uses it, e.g. 1GiB, 64MB, 1e9");
  cmd->add_option("--dtype", o->dtype, "collective element type")->capture_default_str();
  cmd->add_option("--algorithm", o->algorithm,
                  "collective algorithm: auto (NCCL's tuner: latency + bytes/bandwidth), ring, tree (allreduce), "
                  "hierarchical (allreduce on 2+ nodes), pairwise (alltoall)")
      ->capture_default_str();
  cmd->add_flag("--expand-collectives", o->expand_collectives,
                "simulate the collective as its n^2 moves and touches instead of one node whose steps are generated "
                "as they run (the default; same tasks, memory grows with n)");
  cmd->add_flag("--no-symmetry", o->no_symmetry,
                "simulate every rank of the collective, not one period of ranks where the machine and the ring "
                "repeat node by node (same result, n / period times the events)");
  cmd->add_option("--trace", o->trace, "write the simulated timeline as Chrome-trace JSON (Perfetto)");
  cmd->add_option("--trace-devices", o->trace_devices,
                  "with --trace: write only these devices' spans, e.g. 0-7,64 (numbers and inclusive ranges)");
  cmd->add_option("--write-machine", o->machine_out, "write the machine used as JSON");
  add_memory_cap_option(*cmd, o->memory_cap,
                        ". Planned with each prefetch rule and the plan that simulates fastest kept (--prefetch); "
                        "with --collectives nodes the rings the collectives expand to are planned (run refuses that)");
  add_prefetch_option(*cmd, o->prefetch);
  add_offload_order_option(*cmd, o->offload_order,
                           ". With --prefetch fastest the plan is the one whose free order simulates fastest (as "
                           "`reproduce offload` keeps it), so that both orders run the same plan; with fixed, "
                           "memory_cap.free_order_makespan_s reports that plan's free-order makespan");
  cmd->add_flag("--json", o->json_out, "machine-readable output");
  cmd->footer(
      "Examples:\n"
      "  tessel simulate -w chain:size=4096 -d 8 -m h100-sxm-8\n"
      "  tessel simulate -w llama-block:model=65b -d 1024 -m cluster:128xh100-sxm-8 --network alpha-beta --json\n"
      "  tessel simulate -w ffn -d 8 -m h100-sxm-8 --policy bsp --trace ffn.json\n"
      "  tessel simulate -w llama-block:model=7b -d 8 -m h100-sxm-8 --comm-priority high --comm-sms 16\n"
      "  tessel simulate -w gemm-alltoall -d 8 -m h100-sxm-8 --fuse-collectives\n"
      "  tessel simulate -w llama-block:model=65b -d 1024 -m cluster:128xh100-sxm-8 --trace t.json --trace-devices 0-7,64\n"
      "  tessel simulate --collective allreduce --bytes 1GiB -d 8 -m h100-sxm-8\n"
      "  tessel simulate --collective allreduce --bytes 1GiB -d 16 -m cluster:2xh100-sxm-8 --algorithm hierarchical\n"
      "  tessel simulate --collective alltoall --bytes 1GiB -d 64 -m fat-tree:8xh100-sxm-8,leaf=2,pod=4,oversubscription=4\n"
      "  tessel simulate -w llama-block:model=7b -d 64 -m torus:4x2xh100-sxm-8 --write-machine torus.json\n"
      "  tessel simulate -m h100-sxm-8 --write-machine m.json --collective alltoall --bytes 64MB -d 8\n"
      "  tessel simulate -w llama-block:model=7b -d 8 -m h100-sxm-8 --memory-cap 50%\n"
      "  tessel simulate -w llama-block:model=7b -d 8 -m h100-sxm-8 --memory-cap 50% --offload-order fixed");
  cmd->callback([o, cmd] {
    o->devices_given = cmd->count("-d") > 0;
    o->dtype_given = cmd->count("--dtype") > 0;
    run_simulate(*o);
  });
}

}  // namespace tessel::cli
