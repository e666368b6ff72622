#include "experiments/memory_cap.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include <unistd.h>

#include "core/error.h"
#include "experiments/cli.h"
#include "runtime/cpu_arena.h"

namespace tessel::cli {

void add_memory_cap_option(CLI::App& cmd, std::string& text, const std::string& extra) {
  cmd.add_option("--memory-cap", text,
                 "bound every device's memory, evicting buffers to host memory and loading them back (async policy "
                 "only). BYTES: a size with a unit (4096B, 64MB, 1GiB) or a whole number above 1 without one (4096, "
                 "2.5e9). FRACTION: a number up to 1 without a unit (0.5; 1 is 100%) or a percentage (50%) of each "
                 "device's uncapped peak as the planner counts it, tasks one at a time in its order (the JSON's "
                 "memory_cap.uncapped_peak_bytes; order_peak_bytes in core/memory_plan.h), which is not the peak "
                 "simulate reports (the async simulation runs devices ahead and holds more). Without a unit a number above 1 that is not "
                 "whole (1.5, 2.5) is neither, and an error" +
                     extra)
      ->check([](const std::string& value) {
        try {
          (void)parse_memory_cap(value, "");  // CLI11 puts the option's name before the message
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
}

void add_prefetch_option(CLI::App& cmd, std::string& text) {
  cmd.add_option("--prefetch", text,
                 "with --memory-cap: the room a prefetched load leaves for the buffers ahead: one-range, packed, "
                 "dry-run, or fastest (the default: plans and simulates with each rule and keeps the fastest, about three "
                 "times the work of one rule; memory_cap.memory_plan_wall_s reports the planning time). run and compare, "
                 "which do not simulate each plan, plan with one-range")
      ->check(CLI::IsMember({"one-range", "packed", "dry-run", "fastest"}));
}

void add_offload_order_option(CLI::App& cmd, std::string& text, const std::string& extra) {
  cmd.add_option("--offload-order", text,
                 "with --memory-cap: the order the capped graph runs in. free: any ready task runs (TURNIP), so a "
                 "load starts as soon as its memory is free and overlaps the kernels before its reader. fixed: the "
                 "ZeRO-Offload-style baseline of the same plan: each device's kernels and host transfers (evicts, "
                 "loads) run one after another in the plan's order, transfers synchronous, so a load holds up the "
                 "kernel behind it (each load just before the kernel or evict that first uses its buffer). What free "
                 "gains over fixed is what TURNIP's freedom of order buys" +
                     extra)
      ->capture_default_str()
      ->check(CLI::IsMember({"free", "fixed"}));
}

void check_offload_order(OffloadOrder order, const std::string& memory_cap) {
  if (order == OffloadOrder::fixed && memory_cap.empty())
    fail("--offload-order fixed needs --memory-cap: without a cap there are no evicts or loads to put in a fixed order");
}

void check_memory_cap_policy(std::string_view policy, std::string_view what, std::string_view policy_option) {
  if (policy != "async")
    fail(what, " needs ", policy_option, " async: evicts and loads are placed where memory frees, not in bsp phases");
}

void check_memory_cap_fusion(bool fuse_collectives, std::string_view what) {
  if (fuse_collectives)
    fail(what, " and --fuse-collectives cannot be combined: the memory planner inserts evict and load tasks, "
         "and the fused kernels' per-task times are not carried through it; give one of the two");
}

void apply_offload_order(MemoryCapped& c, OffloadOrder order) {
  c.offload_order = order;
  if (order == OffloadOrder::fixed) c.graph = fixed_order(c.graph);
}

void add_copy_lane_option(CLI::App& cmd, std::string& text, const std::string& extra) {
  cmd.add_option("--copy-lane", text,
                 "cpu backend, with --memory-cap: where evicts and loads run. worker: on the device's worker thread, "
                 "between its compute tasks (a load holds up the kernel behind it); thread: on a copy lane of each "
                 "device, a second thread with its own ready queue, so that loads overlap compute as a GPU's copy "
                 "engine lets them (pinned to core devices + d where the machine has one; with fewer than 2 x devices "
                 "cores the copy lanes share the workers' cores)" + extra)
      ->capture_default_str()
      ->check(CLI::IsMember({"worker", "thread"}));
}

void check_copy_lane(runtime::CopyLane lane, const std::string& backend, bool capped, OffloadOrder order,
                     int devices) {
  if (lane == runtime::CopyLane::worker) return;
  if (backend == "cuda")
    fail("--copy-lane thread: the cuda backend already runs evicts and loads on copy streams of their own "
         "(--copy-lane applies to --backend cpu)");
  if (backend != "cpu")
    fail("--copy-lane thread: --backend ", backend, " runs evicts and loads on the worker (--copy-lane applies to "
         "--backend cpu)");
  if (!capped) {
    std::fprintf(stderr, "tessel: warning: --copy-lane thread without --memory-cap: the task graph has no evicts or "
                         "loads, so there is nothing for the copy lanes to copy\n");
    return;
  }
  if (order == OffloadOrder::fixed)
    std::fprintf(stderr, "tessel: warning: --copy-lane thread with --offload-order fixed: each device's kernels and "
                         "transfers are chained there (transfers synchronous), so the copy lane overlaps nothing with "
                         "the kernels and only adds a hand-off between threads per transfer\n");
  if (copy_lane_cores_shared(lane, devices))
    std::fprintf(stderr, "tessel: warning: copy lanes share cores with the workers: %d cores for %d workers + %d copy "
                         "lanes\n", runtime::cpu_cores(), devices, devices);
}

nlohmann::json copy_lane_json(const std::string& backend, runtime::CopyLane lane) {
  return backend == "cpu" ? nlohmann::json(std::string(runtime::to_string(lane))) : nlohmann::json(nullptr);
}

bool copy_lane_cores_shared(runtime::CopyLane lane, int devices) {
  return lane == runtime::CopyLane::thread && devices > 0 && runtime::copy_lane_core(devices, devices - 1) < 0;
}

std::int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : 0;  // 0: unknown, unchecked
}

namespace {

template <class T>
std::int64_t arena_bytes(const TaskGraph& tg, bool devices_in_ram) {
  const runtime::ArenaLayout a = runtime::arena_layout<T>(tg);
  std::int64_t elements = 0;
  for (std::int64_t e : a.host_elements) elements += e;
  if (devices_in_ram)
    for (std::int64_t e : a.device_elements) elements += e;
  return elements * static_cast<std::int64_t>(sizeof(T));
}

}  // namespace

std::int64_t ram_bytes(const MemoryCapped& c, bool devices_in_ram) {
  const bool f64 = std::any_of(c.graph.buffers.begin(), c.graph.buffers.end(),
                               [](const Buffer& b) { return b.dtype == DType::f64; });
  return f64 ? arena_bytes<double>(c.graph, devices_in_ram) : arena_bytes<float>(c.graph, devices_in_ram);
}

void check_ram(const MemoryCapped& c, bool devices_in_ram, std::int64_t physical_bytes) {
  if (physical_bytes <= 0) return;
  const std::int64_t need = ram_bytes(c, devices_in_ram);
  if (need <= physical_bytes) return;
  const std::int64_t host = ram_bytes(c, false);
  if (devices_in_ram)
    fail("--memory-cap: running the capped graph here needs ", need, " bytes of this machine's RAM (", need - host,
         " for the devices' arenas, which are this machine's memory on this backend, and ", host,
         " for the host copies), more than its physical memory (", physical_bytes, " bytes)");
  fail("--memory-cap: running the capped graph here needs ", need,
       " bytes of this machine's RAM for the host copies, more than its physical memory (", physical_bytes, " bytes)");
}

void check_prefetch(const std::string& prefetch) {
  if (prefetch == "fastest") return;
  for (PrefetchRoom r : kPrefetchRooms)
    if (prefetch == to_string(r)) return;
  fail("--prefetch: unknown rule '", prefetch, "' (accepted: one-range, packed, dry-run, fastest)");
}

MemoryCapped cap_memory(const TaskGraph& tg, const std::string& text, const Machine* machine, const std::string& prefetch,
                        const std::function<double(const TaskGraph&)>& makespan_of, const Graph* graph) {
  const MemoryCap cap = parse_memory_cap(text, "--memory-cap");
  MemoryCapped out;
  out.cap_bytes = cap.bytes_for(order_peak_bytes(tg));
  MemoryPlanOptions po;
  po.capacity_bytes = out.cap_bytes;
  if (graph)
    for (const Node& n : graph->nodes()) po.node_names.push_back(n.name);
  if (machine) {
    for (int d = 0; d < tg.num_devices; ++d) po.host_of.push_back(machine->devices.at(static_cast<std::size_t>(d)).host);
    for (const Host& h : machine->hosts) po.host_capacity_bytes.push_back(h.memory_capacity_bytes);
  } else {  // an executor on this machine: every device's host copies in this process's RAM
    po.host_capacity_bytes = {physical_memory_bytes()};
    po.host_capacity_source = "this machine's physical memory";
  }
  check_prefetch(prefetch);
  using Clock = std::chrono::steady_clock;
  auto timed_plan = [&] {
    const auto start = Clock::now();
    MemoryPlan plan = plan_memory(tg, po);
    out.plan_wall_s += std::chrono::duration<double>(Clock::now() - start).count();
    return plan;
  };
  if (prefetch != "fastest") {
    po.prefetch = parse_prefetch_room(prefetch, "--prefetch");
    MemoryPlan plan = timed_plan();
    out.graph = std::move(plan.graph);
    out.stats = std::move(plan.stats);
    out.prefetch = po.prefetch;
    return out;
  }
  if (!makespan_of) fail("--prefetch fastest needs a simulation of each plan (simulate)");
  // A rule whose plan fails (a host without the RAM for its evicts) is skipped with a
  // warning; when every rule fails, the first rule's error is the command's (no warnings).
  double best = 0;
  std::exception_ptr first_error;
  for (PrefetchRoom r : kPrefetchRooms) {
    po.prefetch = r;
    MemoryPlan plan;
    try {
      plan = timed_plan();
    } catch (const Error& e) {
      if (!first_error) first_error = std::current_exception();
      out.skipped.emplace_back(r, e.what());
      continue;
    }
    const double s = makespan_of(plan.graph);
    out.tried.emplace_back(r, s);
    if (out.tried.size() == 1 || s < best) {
      best = s;
      out.graph = std::move(plan.graph);
      out.stats = std::move(plan.stats);
      out.prefetch = r;
    }
  }
  if (out.tried.empty()) std::rethrow_exception(first_error);
  for (const auto& [r, why] : out.skipped)
    std::fprintf(stderr, "tessel: warning: --prefetch fastest: rule %s skipped, its plan failed: %s\n",
                 std::string(to_string(r)).c_str(), why.c_str());
  return out;
}

CappedSimulation simulate_capped(const TaskGraph& tg, const std::string& cap, const Machine& m,
                                 const sim::SimOptions& so, const std::string& prefetch, OffloadOrder order,
                                 const Graph* graph) {
  CappedSimulation out;
  auto simulate = [&](const TaskGraph& g) {
    sim::SimResult r = sim::simulate(g, m, so);
    out.sim_wall_s += r.sim_wall_s;
    return r;
  };
  // With fixed, the plan is kept by its free-order makespan (the rule that `reproduce
  // offload` keeps too), then run in fixed order.
  std::optional<sim::SimResult> fastest;  // the fastest free-order run so far
  out.capped = cap_memory(tg, cap, &m, prefetch, [&](const TaskGraph& planned) {
    sim::SimResult run = simulate(planned);
    const double s = run.makespan_s;
    if (!fastest || s < fastest->makespan_s) fastest = std::move(run);
    return s;
  }, graph);
  if (order == OffloadOrder::fixed) {
    out.free_order_makespan_s = fastest ? fastest->makespan_s : simulate(out.capped.graph).makespan_s;
    fastest.reset();  // the fixed-order graph is simulated below
  }
  apply_offload_order(out.capped, order);
  out.result = fastest ? std::move(*fastest) : simulate(out.capped.graph);
  return out;
}

nlohmann::json memory_cap_json(const MemoryCapped& c) {
  const MemoryPlanStats& s = c.stats;
  nlohmann::json j = {{"memory_cap_bytes", c.cap_bytes},
          {"uncapped_peak_bytes", s.uncapped_peak_bytes},
          {"planned_peak_bytes", s.planned_peak_bytes},
          {"evicts", s.evicts},
          {"loads", s.loads},
          {"drops", s.drops},
          {"host_inputs", s.host_inputs},
          {"bytes_evicted", s.bytes_evicted},
          {"bytes_loaded", s.bytes_loaded},
          {"host_bytes", s.host_bytes},
          {"prefetch", std::string(to_string(c.prefetch))},
          {"offload_order", std::string(to_string(c.offload_order))}};
  if (!c.tried.empty()) {
    nlohmann::json t = nlohmann::json::array();  // rule names are values, not keys
    for (const auto& [r, s] : c.tried) t.push_back({{"prefetch", std::string(to_string(r))}, {"makespan_s", s}});
    j["prefetch_tried"] = t;
  }
  if (!c.skipped.empty()) {
    nlohmann::json t = nlohmann::json::array();
    for (const auto& [r, why] : c.skipped) t.push_back({{"prefetch", std::string(to_string(r))}, {"error", why}});
    j["prefetch_skipped"] = t;
  }
  j["memory_plan_wall_s"] = c.plan_wall_s;
  return j;
}

void print_memory_cap(const MemoryCapped& c) {
  const MemoryPlanStats& s = c.stats;
  std::size_t top = 0;  // the device with the largest uncapped peak
  for (std::size_t d = 0; d < s.uncapped_peak_bytes.size(); ++d)
    if (s.uncapped_peak_bytes[d] > s.uncapped_peak_bytes[top]) top = d;
  const double uncapped = s.uncapped_peak_bytes.empty() ? 0.0 : static_cast<double>(s.uncapped_peak_bytes[top]);
  const double cap = c.cap_bytes.empty() ? 0.0 : static_cast<double>(c.cap_bytes[top]);
  std::printf("  memory cap    %s on device %zu (%.0f%% of its uncapped peak %s, tasks one at a time): %lld evicts (%s), "
              "%lld loads (%s), %lld dropped, %lld inputs start on the host\n",
              human_bytes(cap).c_str(), top, uncapped > 0 ? 100.0 * cap / uncapped : 0.0, human_bytes(uncapped).c_str(), static_cast<long long>(s.evicts),
              human_bytes(static_cast<double>(s.bytes_evicted)).c_str(), static_cast<long long>(s.loads),
              human_bytes(static_cast<double>(s.bytes_loaded)).c_str(), static_cast<long long>(s.drops),
              static_cast<long long>(s.host_inputs));
  std::printf("  prefetch      %s", std::string(to_string(c.prefetch)).c_str());
  for (std::size_t i = 0; i < c.tried.size(); ++i)
    std::printf("%s%s %.4g ms", i == 0 ? " (the fastest of " : ", ", std::string(to_string(c.tried[i].first)).c_str(),
                c.tried[i].second * 1e3);
  std::printf("%s", c.tried.empty() ? "" : ")");
  for (const auto& [r, why] : c.skipped) std::printf("; %s skipped (its plan failed)", std::string(to_string(r)).c_str());
  std::printf("; planned in %.3f s\n", c.plan_wall_s);
  std::printf("  offload order %s\n", c.offload_order == OffloadOrder::fixed
                                         ? "fixed (ZeRO-Offload-style: each device's kernels and host transfers one "
                                           "after another in the plan's order, transfers synchronous)"
                                         : "free (TURNIP: any ready task runs; loads overlap the kernels before their "
                                           "readers)");
}

}  // namespace tessel::cli
