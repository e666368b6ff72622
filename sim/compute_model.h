#pragma once
// Compute model: how long a task takes on its device when nothing disturbs it.
//
//   compute, accumulate touch   max(flops / (peak[dtype] × efficiency(flops)),
//                                   memory bytes / memory bandwidth) + launch latency
//                               (a compute task that is no contraction uses the device
//                               type's generic_flops_per_s instead, when it is set, and
//                               transcendental_flops_per_s for its exp/silu/... part,
//                               plus its block's rows × generic_row_s)
//   copy touch                  memory bytes / memory bandwidth + rows × copy_row_s
//                               + launch latency (an accumulating touch adds
//                               rows × copy_row_s to its memory time as well)
//   input, output               0 (inputs are resident when the run starts; outputs stay
//                               where they are)
//   move                        not here: the network model times it
//
// A task whose footprint (the distinct bytes it reads and writes: a compute task's
// `bytes`, a touch's source and destination regions, 2 × bytes) fits in the device
// type's cache (cache_capacity_bytes) moves its traffic at cache_bytes_per_s instead of
// the memory bandwidth; one that fits in the outer level (outer_cache_capacity_bytes)
// at outer_cache_bytes_per_s. (An accumulating touch reads and writes the same
// destination: 3 × bytes of traffic over 2 × bytes of lines.)
// Memory bytes: a compute task's `bytes` (operands read + result written); a touch
// reads and writes its region (2 × bytes), an accumulating touch also reads the
// destination (3 × bytes). The dtype is that of the buffer the task writes.

#include "core/machine.h"
#include "core/task_graph.h"

namespace tessel::sim {

// Seconds `t` takes alone on a device of type `dt`. Error naming the device type and
// dtype when the type has no peak for a task that needs one.
[[nodiscard]] double compute_seconds(const Task& t, const TaskGraph& tg, const DeviceType& dt);

// Rows of the innermost dimension a task walks: a touch's or move's source region, a
// compute task's block, elements over the innermost extent (the contiguous runs a copy
// loop copies; the inner loops a generic kernel runs).
[[nodiscard]] double inner_rows(const Task& t);

// Bytes of device memory traffic the model charges a compute or touch task.
[[nodiscard]] double memory_traffic_bytes(const Task& t);

// Distinct bytes a compute or touch task reads and writes (what must fit in a cache).
[[nodiscard]] double footprint_bytes(const Task& t);

}  // namespace tessel::sim
