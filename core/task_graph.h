#pragma once
// TaskGraph: the fine-grained contract between planning and execution. lower() turns
// a Graph and a Decomposition into tasks over buffers that live on devices:
//
//   input    create the block `src` of graph input `node` in buffer `writes` (one task
//            per copy of a block replicated at rest; readers use their local copy)
//   compute  run the block kernel of `node` (einsum or fill) over join block `src`,
//            reading `reads` (one buffer per operand), writing `writes`
//   touch    copy or accumulate region `src` of reads[0] into region `dst` of
//            `writes` (same device); touches into one buffer are order-independent
//            (accumulating buffers start at the aggregation's identity), but
//            executors must not run two touches into the same buffer at once
//   move     copy region `src` of reads[0] on `device` to a new buffer `writes`
//            on `dst_device`
//   output   write buffer reads[0] as region `src` of graph output `node`
//   evict    copy the whole device buffer reads[0] to the host buffer `writes` (on the
//            host of `device`, over its host link); inserted by plan_memory()
//   load     copy the whole host buffer reads[0] to the device buffer `writes`
//            (core/memory_plan.h)
//   collective  a whole collective (TaskGraph::collectives[block]: kind, bytes,
//            algorithm, pieces) over devices 0..ranks−1, reading and writing no
//            buffer: the simulator generates its steps as it runs (alone in its
//            graph). A lowered one (LowerOptions::collectives) reads one buffer per
//            rank and writes CollectiveSpec::outputs (core/collective.h), `writes`
//            invalid; it runs on `device` (rank 0's), simulators expand it, executors
//            run it as a primitive or as moves (core/collective_rewrite.h).
//
// Tasks are in topological order: every dependency has a smaller id. A task's
// dependencies are exactly the tasks that write the buffers it reads — plus, in a graph
// from plan_memory(), the tasks that must finish before the memory its output takes is
// free (core/memory_plan.h).

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/collective.h"
#include "core/graph.h"
#include "core/ids.h"
#include "core/partition.h"
#include "core/small_vector.h"
#include "core/types.h"

namespace tessel {

enum class TaskKind : std::uint8_t { input, compute, touch, move, output, evict, load, collective };
enum class TouchOp : std::uint8_t { copy, accumulate };
inline constexpr int kNumTaskKinds = 8;
[[nodiscard]] std::string_view to_string(TaskKind k);

struct Buffer {
  DeviceId device;
  Shape shape;
  DType dtype = DType::f32;
  // Agg::none: written exactly once, element by element; otherwise every element starts
  // at agg_identity(init) and touches accumulate into it.
  Agg init = Agg::none;
  NodeId node;  // the graph node whose data it holds
  // In the host RAM of `device`'s host (an evicted copy, or an input block that starts
  // there) rather than in the device's memory; only plan_memory() makes such buffers.
  bool host = false;
  // Where plan_memory() placed the buffer in its device's memory (bytes from the start
  // of a region of the capped size); -1: not planned.
  std::int64_t offset_bytes = -1;
  [[nodiscard]] std::int64_t bytes() const { return elements(shape) * dtype_bytes(dtype); }
};

struct Task {
  TaskKind kind = TaskKind::compute;
  DeviceId device;      // where it runs; a move's source
  DeviceId dst_device;  // a move's destination; == device otherwise
  NodeId node;
  std::int64_t block = -1;  // block of `node`'s partition (input, compute, output), collectives[block] (collective), else -1
  SmallVector<BufferId, 4> reads;  // in place up to 4 (core/small_vector.h)
  BufferId writes;  // invalid for output tasks
  Rect src;         // see the header comment
  Rect dst;         // touch only
  TouchOp op = TouchOp::copy;
  Agg agg = Agg::none;  // touch accumulate: how to combine
  bool contraction = false;  // compute: the block is a GEMM-like contraction (Einsum::is_contraction)
  double flops = 0;
  double transcendental_flops = 0;  // compute: the part of `flops` that is exp, log, silu, ...
  std::int64_t bytes = 0;  // compute: bytes read + written; touch/move: bytes of the region; input/output: block bytes
  SmallVector<TaskId, 4> deps;  // in place up to 4
};

struct TaskGraph {
  int num_devices = 1;
  std::vector<Task> tasks;
  std::vector<Buffer> buffers;
  std::vector<CollectiveSpec> collectives;  // what collective tasks run (TaskKind::collective)

  [[nodiscard]] const Task& task(TaskId id) const { return tasks[id.index()]; }
  [[nodiscard]] const Buffer& buffer(BufferId id) const { return buffers[id.index()]; }
  [[nodiscard]] std::size_t size() const { return tasks.size(); }

  struct Summary {
    std::int64_t tasks = 0;
    std::int64_t count[kNumTaskKinds] = {};
    std::int64_t bytes_moved = 0;    // sum of move bytes
    std::int64_t bytes_touched = 0;  // sum of touch bytes
    std::int64_t bytes_evicted = 0;  // sum of evict bytes (device → host)
    std::int64_t bytes_loaded = 0;   // sum of load bytes (host → device)
    double flops = 0;                // compute + accumulate
    std::int64_t edges = 0;
  };
  [[nodiscard]] Summary summary() const;
  // Throws Error when the tasks are not in topological order or deps are out of range.
  void validate() const;
  // Whether any task is a collective node (which only the simulator runs).
  [[nodiscard]] bool has_collectives() const { return !collectives.empty(); }
};

struct LowerOptions {
  // Emit an aggregation that is a reduce-scatter — the partials of one block of the join
  // partition's output, one on each of k >= 2 distinct devices, aggregated into k output
  // blocks sited on exactly those devices — as one TaskKind::collective node (a lowered
  // CollectiveSpec, core/collective.h) instead of its k(k−1) moves and k² touches.
  // Likewise a repartition that is an all-gather — an operand region made of k >= 2 of
  // its producer's blocks on k distinct devices, each of which reads the whole region —
  // instead of its k(k−1) moves and k² copies (core/lowering_all_gather.h).
  // Simulators expand them into the ring algorithms NCCL runs (sim/collectives.h);
  // executors run them as a primitive or as moves (core/collective_rewrite.h).
  bool collectives = false;
  // Stop with a ResourceError once the graph would have more than max_tasks tasks (0: no
  // limit), or with an Error once *cancel is true (read every 4,096 tasks): a caller that
  // lowers many candidate decompositions (planner/search.h) bounds its memory and its
  // time this way.
  std::int64_t max_tasks = 0;
  const std::atomic<bool>* cancel = nullptr;
};

// Lowers `g` under `d` (validated first). See the header comment for the contract.
[[nodiscard]] TaskGraph lower(const Graph& g, const Decomposition& d);
[[nodiscard]] TaskGraph lower(const Graph& g, const Decomposition& d, const LowerOptions& options);

// Successors of every task (the reverse of deps).
[[nodiscard]] std::vector<std::vector<TaskId>> successors(const TaskGraph& tg);

}  // namespace tessel

namespace tessel {

// The bulk-synchronous schedule shared by the simulator and the executors: for each
// graph node in order, phase 2·node holds its input and compute tasks, phase
// 2·node + 1 the communication its outputs need (moves, touches and output tasks that
// belong to the node). A task may start only when every task of an earlier phase has
// finished. In a lowered graph dependencies never point to a later phase; in a
// memory-capped one (core/memory_plan.h) they may: its evicts, loads and reused ranges
// follow memory, not phases (first_backward_bsp_dependency finds one).
[[nodiscard]] inline std::int32_t bsp_phase(const Task& t) {
  const bool compute = t.kind == TaskKind::input || t.kind == TaskKind::compute;
  return 2 * t.node.value + (compute ? 0 : 1);
}

// A dependency of `task` on `dependency`, a task of a later bsp phase: under bsp the
// dependency is held until `task`'s phase has finished, which waits on `task`.
struct BackwardBspDependency {
  TaskId task;
  TaskId dependency;
};

// The first such dependency (by task, then by its position in the task's deps), or none:
// the simulator and every executor refuse to run a graph under bsp that has one, rather
// than wait forever (or, issuing in phase order, race).
[[nodiscard]] std::optional<BackwardBspDependency> first_backward_bsp_dependency(const TaskGraph& tg);

}  // namespace tessel
