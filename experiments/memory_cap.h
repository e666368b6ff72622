#pragma once
// --memory-cap BYTES|FRACTION on simulate, run and compare: the task graph is rewritten
// by core's plan_memory() (evicts and loads) so that no device holds more than the cap.

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/machine.h"
#include "core/memory_plan.h"
#include "core/task_graph.h"

namespace tessel::cli {

void add_memory_cap_option(CLI::App& cmd, std::string& text);

struct MemoryCapped {
  TaskGraph graph;  // with evicts and loads
  MemoryPlanStats stats;
  std::vector<std::int64_t> cap_bytes;  // per device
};

// Plans `tg` under the cap `text` (parse_memory_cap). With a machine, its hosts' RAM
// bounds what may be evicted (Host::memory_capacity_bytes); without one (an executor on
// this machine), this machine's physical memory does. Errors name --memory-cap.
[[nodiscard]] MemoryCapped cap_memory(const TaskGraph& tg, const std::string& text, const Machine* machine);

// memory_cap_bytes, uncapped_peak_bytes, planned_peak_bytes (per device; uncapped: tasks
// one at a time in the planner's order), evicts, loads, drops, host_inputs, bytes_evicted, bytes_loaded,
// host_bytes.
[[nodiscard]] nlohmann::json memory_cap_json(const MemoryCapped& c);

// One line: the cap, the uncapped peak (largest device), evicts and loads with their bytes.
void print_memory_cap(const MemoryCapped& c);

}  // namespace tessel::cli
