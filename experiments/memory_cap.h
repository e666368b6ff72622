#pragma once
// --memory-cap BYTES|FRACTION on simulate, run and compare: the task graph is rewritten
// by core's plan_memory() (evicts and loads) so that no device holds more than the cap.
// --offload-order free|fixed on the same commands: the planned graph as it is (TURNIP's
// free order) or core's fixed_order() of it (the ZeRO-Offload-style baseline).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/graph.h"
#include "core/machine.h"
#include "core/memory_plan.h"
#include "core/task_graph.h"
#include "experiments/offload_order.h"
#include "runtime/cpu_executor.h"
#include "sim/simulator.h"

namespace tessel::cli {

// --memory-cap BYTES|FRACTION (parse_memory_cap, core/memory_plan.h). `extra`: what the
// command adds (how it chooses the prefetch rule).
void add_memory_cap_option(CLI::App& cmd, std::string& text, const std::string& extra = "");
// --prefetch one-range|packed|dry-run|fastest (simulate): the prefetch rule of the memory
// plan (PrefetchRoom, core/memory_plan.h); fastest, the default, plans with each and keeps
// the one whose capped graph simulates fastest.
void add_prefetch_option(CLI::App& cmd, std::string& text);

// --offload-order free|fixed (OffloadOrder, experiments/offload_order.h).
// `extra`: what the command adds (simulate: how --prefetch fastest chooses the plan).
void add_offload_order_option(CLI::App& cmd, std::string& text, const std::string& extra = "");
// An Error naming both options when `order` is fixed and `memory_cap` is empty: without a
// cap there are no evicts or loads to order.
void check_offload_order(OffloadOrder order, const std::string& memory_cap);
// --copy-lane worker|thread (run, compare): where the CPU backend runs a memory-capped
// graph's evicts and loads (runtime::CopyLane, parsed by runtime::parse_copy_lane); compare
// simulates the same choice (host_copy_lane on calibrated, single-lane machines).
// `extra`: what the command adds (compare: how the simulation takes it).
void add_copy_lane_option(CLI::App& cmd, std::string& text, const std::string& extra = "");
// Checks `lane` for `backend` on `devices` devices: thread is an error with any backend
// but cpu (cuda has copy streams of its own; mpi and block run evicts and loads on the
// worker); thread warns without --memory-cap (`capped` false: nothing to copy), with
// --offload-order fixed (transfers are synchronous there: the copy lane only adds a
// hand-off per transfer), and on fewer than 2 x devices cores (copy_lane_cores_shared).
void check_copy_lane(runtime::CopyLane lane, const std::string& backend, bool capped, OffloadOrder order,
                     int devices);
// True when `lane` is thread and this machine has fewer than 2 x `devices` cores: the
// executor leaves the copy lanes unpinned, time-sharing the workers' cores
// (runtime::copy_lane_core).
[[nodiscard]] bool copy_lane_cores_shared(runtime::CopyLane lane, int devices);
// copy_lane in run's and compare's JSON: "worker" or "thread" with --backend cpu; null
// with the other backends, which have no per-device worker to choose for.
[[nodiscard]] nlohmann::json copy_lane_json(const std::string& backend, runtime::CopyLane lane);

struct MemoryCapped {
  TaskGraph graph;  // with evicts and loads
  MemoryPlanStats stats;
  std::vector<std::int64_t> cap_bytes;  // per device
  PrefetchRoom prefetch = PrefetchRoom::one_range;  // the rule `graph` was planned with
  // With "fastest": every rule and the makespan it simulated to, in kPrefetchRooms order.
  std::vector<std::pair<PrefetchRoom, double>> tried;
  // With "fastest": the rules whose plan failed (skipped), with the error.
  std::vector<std::pair<PrefetchRoom, std::string>> skipped;
  double plan_wall_s = 0;  // plan_memory's wall time, summed over the rules planned
  OffloadOrder offload_order = OffloadOrder::free;  // fixed: `graph` is fixed_order() of the plan
};

// With fixed, replaces c.graph by fixed_order(c.graph) (the same tasks, renumbered, with
// each device's kernels and transfers chained); records the order either way. The plan's
// figures (stats, prefetch, tried) stay those of the plan, which both orders share.
void apply_offload_order(MemoryCapped& c, OffloadOrder order);

// The limits of a memory cap that simulate, run, compare and sweep share, each an Error
// naming `what` (the cap as its command takes it: "--memory-cap", or sweep's "memory cap
// 0.5"): the policy must be async (`policy_option` names where it was set), since evicts
// and loads are placed where memory frees, not in bsp phases; and no --fuse-collectives,
// whose per-task times the memory planner's renumbered graph does not carry.
void check_memory_cap_policy(std::string_view policy, std::string_view what = "--memory-cap",
                             std::string_view policy_option = "--policy");
void check_memory_cap_fusion(bool fuse_collectives, std::string_view what = "--memory-cap");

// An Error naming --prefetch and the accepted values unless `prefetch` is one-range,
// packed, dry-run or fastest.
void check_prefetch(const std::string& prefetch);

// Plans `tg` under the cap `text` (parse_memory_cap) with the prefetch rule `prefetch`
// ("one-range", "packed", "dry-run"), or with "fastest" with each rule, keeping the graph
// for which `makespan_of` is least (the first in kPrefetchRooms order among equals); a
// rule whose plan throws an Error is skipped with a warning on stderr (`skipped`), and
// when every rule fails the first rule's error is thrown.
// With a machine, its hosts' RAM bounds what may be evicted (Host::memory_capacity_bytes);
// without one (an executor on this machine), this machine's physical memory does (see
// check_ram too). `graph` (the graph `tg` was lowered from; null for a task graph read
// from a file) names the graph nodes in errors. Errors name --memory-cap (or --prefetch).
[[nodiscard]] MemoryCapped cap_memory(const TaskGraph& tg, const std::string& text, const Machine* machine,
                                      const std::string& prefetch = "one-range",
                                      const std::function<double(const TaskGraph&)>& makespan_of = {},
                                      const Graph* graph = nullptr);

// The bytes of this machine's RAM that running `c.graph` here takes: the host arenas of
// its evicted copies and host-resident inputs and, with `devices_in_ram` (the cpu and
// block backends, whose device memory is this machine's RAM too), every device's arena —
// as the CPU executor sizes them (runtime/cpu_arena.h: f32 computed as float, f16 and
// bf16 as float too, so twice their planned bytes; double where a buffer is f64).
[[nodiscard]] std::int64_t ram_bytes(const MemoryCapped& c, bool devices_in_ram);
// This machine's physical memory in bytes (0: unknown).
[[nodiscard]] std::int64_t physical_memory_bytes();
// run and compare, before running the capped graph here: an Error naming --memory-cap and
// the bytes when ram_bytes(c, devices_in_ram) exceeds `physical_bytes` (0: unchecked).
void check_ram(const MemoryCapped& c, bool devices_in_ram, std::int64_t physical_bytes = physical_memory_bytes());

// simulate's --memory-cap, shared with sweep's capped points: `tg` planned under `cap` by
// cap_memory() on machine `m` with the rule `prefetch` (with "fastest", each rule's graph
// simulated in free order with `so` and the fastest kept), put in `order`
// (apply_offload_order) and simulated. A run already simulated while choosing the rule is
// not simulated again. `graph`, where given, names its nodes in the planner's errors.
struct CappedSimulation {
  MemoryCapped capped;  // the plan kept; `capped.graph` is the graph `result` ran
  sim::SimResult result;
  std::optional<double> free_order_makespan_s;  // with fixed: the same plan in free order
  double sim_wall_s = 0;                        // every simulation run here, each rule's included
};
[[nodiscard]] CappedSimulation simulate_capped(const TaskGraph& tg, const std::string& cap, const Machine& m,
                                               const sim::SimOptions& so, const std::string& prefetch,
                                               OffloadOrder order, const Graph* graph = nullptr);

// memory_cap_bytes, uncapped_peak_bytes, planned_peak_bytes (per device; uncapped: tasks
// one at a time in the planner's order), evicts, loads, drops, host_inputs, bytes_evicted, bytes_loaded,
// host_bytes, prefetch (the rule), offload_order (free or fixed), memory_plan_wall_s (planning time, summed over the
// rules planned), and with "fastest" prefetch_tried ([{prefetch, makespan_s}]: each rule and
// the makespan its plan simulated to in free order) and, when a rule's plan failed,
// prefetch_skipped ([{prefetch, error}]).
[[nodiscard]] nlohmann::json memory_cap_json(const MemoryCapped& c);

// Lines: the cap, the uncapped peak (largest device), evicts and loads with their bytes;
// the prefetch rule; the offload order.
void print_memory_cap(const MemoryCapped& c);

}  // namespace tessel::cli
