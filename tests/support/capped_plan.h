#pragma once
// Memory-capped task graphs for tests: caps relative to a graph's own needs.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/memory_plan.h"
#include "core/task_graph.h"

namespace tessel::testing {

// The largest bytes one task needs on one device, each buffer rounded as the planner does.
inline std::int64_t largest_working_set(const TaskGraph& tg) {
  std::int64_t best = 0;
  for (const Task& t : tg.tasks) {
    std::vector<BufferId> bufs = t.reads;
    if (t.writes.valid()) bufs.push_back(t.writes);
    std::sort(bufs.begin(), bufs.end());
    bufs.erase(std::unique(bufs.begin(), bufs.end()), bufs.end());
    std::vector<std::int64_t> need(static_cast<std::size_t>(tg.num_devices), 0);
    for (BufferId b : bufs)
      need[tg.buffer(b).device.index()] +=
          (tg.buffer(b).bytes() + kMemoryAlignment - 1) / kMemoryAlignment * kMemoryAlignment;
    for (std::int64_t n : need) best = std::max(best, n);
  }
  return best;
}

// Every device capped at `fraction` of the largest uncapped peak, but never below what
// one task needs (0: exactly that, the tightest cap there is).
inline MemoryPlan capped_plan(const TaskGraph& tg, double fraction) {
  std::int64_t peak = 0;
  for (std::int64_t p : order_peak_bytes(tg)) peak = std::max(peak, p);
  MemoryPlanOptions o;
  o.capacity_bytes.assign(static_cast<std::size_t>(tg.num_devices),
                          std::max(largest_working_set(tg), static_cast<std::int64_t>(fraction * static_cast<double>(peak))));
  return plan_memory(tg, o);
}

}  // namespace tessel::testing
