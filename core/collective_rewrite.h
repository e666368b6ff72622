#pragma once
// Lowered collective nodes (LowerOptions::collectives, core/collective.h) replaced by
// moves and touches: collectives_as_moves() for the executors that have no collective
// primitive (MPI across processes, CUDA), and the building block the simulator uses to
// expand them into the ring algorithm NCCL runs (sim/collectives.h).

#include <cstddef>
#include <functional>
#include <vector>

#include "core/task_graph.h"

namespace tessel {

// Appends the tasks that replace one collective node, with dependencies derived from
// the buffers they read (as lower() does); created buffers and tasks take the node's
// graph node and the collective's dtype.
class CollectiveRewriter {
 public:
  [[nodiscard]] const TaskGraph& graph() const { return out_; }
  BufferId buffer(DeviceId device, const Shape& shape, Agg init);
  // Region `region` of `src` to a new buffer on `to` (its shape the region's).
  BufferId move(BufferId src, const Rect& region, DeviceId to);
  void touch(BufferId src, const Rect& src_region, BufferId dst, const Rect& dst_region, TouchOp op);
  // `later` also waits for `earlier`.
  void order(TaskId earlier, TaskId later);
  [[nodiscard]] TaskId last() const { return TaskId(static_cast<std::int32_t>(out_.tasks.size()) - 1); }

 private:
  friend TaskGraph replace_collectives(const TaskGraph&,
                                       const std::function<void(const Task&, const CollectiveSpec&, CollectiveRewriter&)>&);
  TaskId add(Task t);
  TaskGraph out_;
  std::vector<std::vector<TaskId>> writers_;  // per buffer, in the new graph
  NodeId node_;
  DType dtype_ = DType::f32;
  Agg agg_ = Agg::sum;
};

// Copies `tg`, replacing each lowered collective task by what `expand` appends. A task
// that depended on the collective depends instead on the new tasks that write the
// buffers it reads (on all of them when it reads none). Buffers keep their ids; the
// collectives' output buffers start at the aggregation's identity. `tg` unchanged when
// it holds no lowered collective; error on a collective node that is not lowered.
[[nodiscard]] TaskGraph replace_collectives(
    const TaskGraph& tg, const std::function<void(const Task&, const CollectiveSpec&, CollectiveRewriter&)>& expand);

// Every lowered collective as the moves and touches lower() emits without
// LowerOptions::collectives: each rank's region of every other rank's input moved to it
// and accumulated into its output (its own region accumulated in place); for an
// all-gather, every other rank's block moved to it and copied into its region of its
// output (its own block copied in place).
[[nodiscard]] TaskGraph collectives_as_moves(const TaskGraph& tg);

// Whether `tg` holds a lowered collective node.
[[nodiscard]] bool has_lowered_collectives(const TaskGraph& tg);

}  // namespace tessel
