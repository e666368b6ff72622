#pragma once
// The memory-safety claim of a memory-planned task graph (core/memory_plan.h), checked on
// the graph itself rather than on the interleavings one run happens to take: any two
// tasks whose accesses to the same memory conflict are ordered by the dependencies. It
// is what lets the CPU executor run evicts and loads on a copy lane beside the worker
// without a lock (cpu_executor.h), and what a race detector can only sample:
// ThreadSanitizer sees the happens-before edges of the run it watches, where every push
// into another lane's queue orders more than the dependency that caused it.
//
// Memory as the executor lays it out (runtime/cpu_arena.h): a device buffer at its
// planned offset in its device's arena (compared in planned bytes; the executor scales
// every offset alike), each host buffer a place of its own. A task accesses the buffers
// it reads and writes (a collective every output of its spec).

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/task_graph.h"

namespace tessel::testing {

// The first conflicting pair of accesses that no dependency path orders, described; none:
// every conflict is ordered. Conflicts: two buffers whose ranges overlap (whatever the
// accesses), one task using both, or one buffer written by one lane and used by another.
inline std::optional<std::string> unordered_conflict(const TaskGraph& tg) {
  const std::size_t n = tg.tasks.size();
  // The executor places every input block before the clock, so an input may wait for
  // other inputs only.
  for (std::size_t i = 0; i < n; ++i)
    if (tg.tasks[i].kind == TaskKind::input)
      for (TaskId d : tg.tasks[i].deps)
        if (tg.tasks[d.index()].kind != TaskKind::input)
          return "input task " + std::to_string(i) + " depends on task " + std::to_string(d.value) + " (" +
                 std::string(to_string(tg.tasks[d.index()].kind)) + "), which runs after the inputs are placed";
  // before[i]: the tasks every execution finishes before task i starts (deps precede).
  std::vector<std::vector<std::uint64_t>> before(n, std::vector<std::uint64_t>((n + 63) / 64, 0));
  for (std::size_t i = 0; i < n; ++i)
    for (TaskId d : tg.tasks[i].deps) {
      for (std::size_t w = 0; w < before[i].size(); ++w) before[i][w] |= before[d.index()][w];
      before[i][d.index() / 64] |= std::uint64_t{1} << (d.index() % 64);
    }
  auto ordered = [&](std::size_t a, std::size_t b) {
    return (before[b][a / 64] >> (a % 64) & 1) || (before[a][b / 64] >> (b % 64) & 1);
  };
  // The thread that runs a task with a copy lane per device (CopyLane::thread): an evict
  // or a load its device's copy lane, a move its destination's worker, any other task its
  // device's worker.
  auto lane = [&](std::size_t i) -> std::int64_t {
    const Task& t = tg.tasks[i];
    if (t.kind == TaskKind::evict || t.kind == TaskKind::load) return tg.num_devices + t.device.value;
    return t.kind == TaskKind::move ? t.dst_device.value : t.device.value;
  };
  struct Access {
    std::int64_t arena;  // device d: d; host buffer b: -1 - b (a place of its own)
    std::int64_t begin, end;
    std::size_t task;
    BufferId buffer;
    bool write;
  };
  std::vector<Access> accesses;
  auto add = [&](std::size_t task, BufferId b, bool write) {
    const Buffer& buf = tg.buffer(b);
    if (buf.host) {
      accesses.push_back({-1 - b.value, 0, buf.bytes(), task, b, write});
    } else if (buf.offset_bytes >= 0) {
      accesses.push_back({buf.device.value, buf.offset_bytes, buf.offset_bytes + buf.bytes(), task, b, write});
    }
  };
  for (std::size_t i = 0; i < n; ++i) {
    const Task& t = tg.tasks[i];
    for (BufferId b : t.reads) add(i, b, false);
    if (t.writes.valid()) add(i, t.writes, true);
    if (t.kind == TaskKind::collective)
      for (BufferId b : tg.collectives[static_cast<std::size_t>(t.block)].outputs) add(i, b, true);
  }
  std::sort(accesses.begin(), accesses.end(),
            [](const Access& a, const Access& b) { return std::tie(a.arena, a.begin) < std::tie(b.arena, b.begin); });
  for (std::size_t x = 0; x < accesses.size(); ++x)
    for (std::size_t y = x + 1; y < accesses.size(); ++y) {
      const Access& a = accesses[x];
      const Access& b = accesses[y];
      if (b.arena != a.arena || b.begin >= a.end) break;  // sorted by start: nothing further overlaps a
      if (a.buffer == b.buffer) {
        // One buffer: readers share it; its writers on one lane run one after another
        // (accumulations into one block need no order among themselves).
        if (a.task == b.task || !(a.write || b.write) || lane(a.task) == lane(b.task)) continue;
      } else if (a.task != b.task) {
        // Two buffers in one range conflict even when both are read: a writer of the
        // later one must lie between them, or both are live at once.
      } else {
        return "task " + std::to_string(a.task) + " uses buffers " + std::to_string(a.buffer.value) + " and " +
               std::to_string(b.buffer.value) + ", whose ranges overlap";
      }
      if (ordered(a.task, b.task)) continue;
      auto describe = [&](const Access& c) {
        const Task& t = tg.tasks[c.task];
        return "task " + std::to_string(c.task) + " (" + std::string(to_string(t.kind)) + ", " +
               (c.write ? "writes" : "reads") + " buffer " + std::to_string(c.buffer.value) + " at [" +
               std::to_string(c.begin) + ", " + std::to_string(c.end) + "))";
      };
      return describe(a) + " and " + describe(b) + " overlap on " +
             (a.arena >= 0 ? "device " + std::to_string(a.arena) : std::string("the host")) +
             " but no dependency orders them";
    }
  return std::nullopt;
}

}  // namespace tessel::testing
