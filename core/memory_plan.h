#pragma once
// Memory-bounded execution (TURNIP, arXiv 2405.16283): plan_memory() rewrites a task
// graph so that the bytes live on each device never exceed its capacity, by inserting
// evict tasks (device buffer → a copy in its host's RAM) and load tasks (host copy → a
// new device buffer), whatever order the tasks then run in.
//
// How it plans. The tasks are walked once in a reference order: the input tasks first,
// in the order their blocks are first used, then every other task in task order. Each
// device's memory is a range [0, capacity) in which every device buffer is given an
// offset (each buffer rounded up to kMemoryAlignment bytes; of the free places large
// enough, the one freed earliest, then one that does not split a run of free bytes in
// two, then the best fit):
//   - a task's buffers on a device must all be resident while it runs: a buffer that was
//     evicted is loaded into a new buffer first, and later tasks read (and accumulate
//     into) that one;
//   - when a buffer does not fit, the resident buffer of that device whose next use is
//     furthest away is evicted (Belady's rule), the task's own buffers excepted, until it
//     fits; if it still does not (fragmentation), the task's resident buffers are evicted
//     too and everything it needs is placed again from an empty memory;
//   - an evicted buffer that already has an identical host copy (it was loaded and not
//     written since), or that holds only an input block (inputs start in host memory,
//     the ZeRO-Offload view of weights), is dropped without a copy;
//   - an input block that does not fit when the inputs are placed starts in host memory
//     (its input task writes a host buffer) and is loaded at its first use;
//   - a buffer's range is released after its last use in the reference order;
//   - after each task, buffers in host memory that the next tasks read (up to 8,192 ahead,
//     in order of use) are loaded into free ranges while the device keeps free the growth
//     of its live bytes up to each reader plus the largest buffer written before it, and
//     room for the buffers written before the reader by one of three rules (PrefetchRoom)
//     (prefetch: the load waits only for what freed its range and overlaps the
//     computation before its reader).
// Dependencies, only those memory safety needs: every task that writes a buffer depends
// on every task that used the buffers that held its range before (their readers, writers
// and evicts); a load on the task that wrote its host copy; an evict on the writers of
// what it copies; a reader of a loaded buffer on its load. Two buffers whose ranges
// overlap are therefore never live at once in any execution that respects the
// dependencies, so the live bytes of a device never exceed its capacity however the
// ready tasks are ordered at run time (the simulator's async policy, the executors'
// ready queues): the order stays free. A graph already planned (with evicts or loads) is
// refused.
//
// Errors: a task whose own buffers on one device exceed that device's capacity (no
// schedule exists: the message names the task and the bytes), a host whose RAM cannot
// hold every host copy planned for its devices (the message names the host and the
// bytes).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/task_graph.h"
#include "core/timeline.h"

namespace tessel {

inline constexpr std::int64_t kMemoryAlignment = 64;  // every planned buffer's offset and size

// What room a prefetched load must leave for the buffers first written before its reader
// (with their growth G of the live bytes and the largest of them, L, looked at up to the
// reader in the reference order; the free bytes must hold the load, G and L in every rule):
//   one_range  one free range of at least G + L once the load's range is taken;
//   packed     the buffers live when G peaks, and one more of size L, packed largest first
//              into the free runs (today's free ranges, less the load's, joined with those
//              of the resident buffers dead by then): they need not share one range;
//   dry_run    the planner's own placement replayed on a copy of the device's memory up to
//              the reader (each buffer written placed as it would be, each dead one freed):
//              every one fits, and a free range of L is left after each.
// No rule is best everywhere (core/memory_plan.cc has the measurements): a caller with a
// simulator may plan with each and keep the fastest (`tessel simulate --prefetch fastest`).
enum class PrefetchRoom : std::uint8_t { one_range, packed, dry_run };
inline constexpr PrefetchRoom kPrefetchRooms[] = {PrefetchRoom::one_range, PrefetchRoom::packed, PrefetchRoom::dry_run};
[[nodiscard]] std::string_view to_string(PrefetchRoom r);  // one-range, packed, dry-run
// An Error naming `what` (the option) and the text, listing the rules, on an unknown one.
[[nodiscard]] PrefetchRoom parse_prefetch_room(std::string_view text, std::string_view what = "--prefetch");

struct MemoryPlanOptions {
  std::vector<std::int64_t> capacity_bytes;  // per device of the task graph
  std::vector<std::int32_t> host_of;         // per device: its host (empty: all on host 0)
  std::vector<std::int64_t> host_capacity_bytes;  // per host; 0 or missing: unchecked
  std::string host_capacity_source = "its memory_capacity_bytes";  // what the error calls that capacity
  PrefetchRoom prefetch = PrefetchRoom::one_range;
  // Per graph node: its name, so that an error names a task's node as the user wrote it
  // ("graph node 2 'wq'"); empty (a task graph read from a file): numbers only.
  std::vector<std::string> node_names;
};

struct MemoryPlanStats {
  std::vector<std::int64_t> capacity_bytes;       // per device, as given
  std::vector<std::int64_t> uncapped_peak_bytes;  // per device: order_peak_bytes() of the input graph
  std::vector<std::int64_t> planned_peak_bytes;   // per device: the highest offset + size used
  std::int64_t evicts = 0, loads = 0;
  std::int64_t drops = 0;        // evicted without a copy (a host copy existed or was an input)
  std::int64_t host_inputs = 0;  // input blocks that start in host memory
  std::int64_t bytes_evicted = 0, bytes_loaded = 0;
  std::vector<std::int64_t> host_bytes;  // per host: the bytes of every host buffer planned there
};

struct MemoryPlan {
  TaskGraph graph;
  MemoryPlanStats stats;
};

// See the header comment. Throws Error on the bad inputs it names.
[[nodiscard]] MemoryPlan plan_memory(const TaskGraph& tg, const MemoryPlanOptions& options);

// The ZeRO-Offload-style baseline (arXiv 2101.06840) for the same plan: fixed order and
// synchronous transfers. Every compute, evict and load also depends on the previous one
// of its device in task order, so a device runs its kernels and host transfers one after
// another in the plan's order and a load holds up the kernel behind it; a load is moved
// just before its buffer's first user where that is a kernel or an evict (loading earlier
// gains nothing when the device waits for it anyway), so task ids differ from `planned`'s (moves and
// touches stay as free as in `planned`); what running `planned` itself gains over this
// is what the freedom of order buys.
[[nodiscard]] TaskGraph fixed_order(const TaskGraph& planned);

// Whether `tg` is a memory-planned graph (plan_memory's output): some buffer has a
// planned offset or lives in host memory. The executors then run it in arenas of the
// planned sizes and copy each output block out when its output task runs (its range is
// reused after it); the simulator times those copies.
[[nodiscard]] bool memory_planned(const TaskGraph& tg);

// Per device, the peak of the bytes live (a buffer from its first writer to its last
// use, host buffers excepted) when the tasks run one at a time in plan_memory()'s
// reference order with no cap: the "uncapped peak" that --memory-cap FRACTION scales.
[[nodiscard]] std::vector<std::int64_t> order_peak_bytes(const TaskGraph& tg);

// Per device, the peak of the bytes live over a timeline by the simulator's rule: a
// device buffer is live from the start of the first task that writes it to the end of
// the last task that reads it (to the end of its last writer when nothing reads it);
// at equal times, releases come first. For a measured timeline it is the executor's
// peak as the simulator would count it.
[[nodiscard]] std::vector<std::int64_t> timeline_peak_bytes(const TaskGraph& tg, const Timeline& tl);

// --memory-cap: "BYTES" or "FRACTION" of the uncapped peak (order_peak_bytes). Without a
// unit a number is a FRACTION up to 1 (0.5; 1 is 100%) and a whole byte count above it
// (4096, 2.5e9; 1.5 is an error, neither); with a unit it is BYTES (4096B, 64MB, 1GiB) or,
// with %, a FRACTION (50%). Errors name `what`, the text and the rule it broke (a byte
// count past 9e18 or a number past a double's range: too large).
struct MemoryCap {
  bool fraction = false;
  double value = 0;  // bytes, or the fraction
  // Each device's capacity: the bytes, or the fraction × that device's own uncapped
  // peak (order_peak_bytes), rounded down; at least 1.
  [[nodiscard]] std::vector<std::int64_t> bytes_for(const std::vector<std::int64_t>& uncapped_peak_bytes) const;
};
[[nodiscard]] MemoryCap parse_memory_cap(std::string_view text, std::string_view what = "--memory-cap");

}  // namespace tessel
