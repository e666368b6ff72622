#pragma once
// Weights at rest (--weights resident): every block of a weight, and of a fill, present
// before the first step on each device that reads it, so that lowering moves none of
// them: data parallelism keeps a replica of every weight on every device, tensor
// parallelism keeps each device's shard there. Replicas cost memory, not communication.

#include <cstdint>
#include <vector>

#include "core/graph.h"
#include "core/machine.h"
#include "core/partition.h"

namespace tessel::planner {

// A region of a producer's output (in its coordinates) that a block of a consumer reads,
// and that block's device.
struct Read {
  Rect region;
  DeviceId device;
};

// Every region of `producer`'s output a block of `consumers` reads: consumer by consumer,
// block by block, in order.
[[nodiscard]] std::vector<Read> reads_of(const Graph& g, const Decomposition& d, NodeId producer,
                                         const std::vector<NodeId>& consumers);

// The blocks of `p` that overlap `region`, in row-major order.
[[nodiscard]] std::vector<std::int64_t> blocks_within(const Partition& p, const Rect& region);

// Makes the weights (weight_inputs(g)) and every fill of `d` resident: each such node's
// partition becomes the common refinement of the regions its consumers' blocks read,
// and each block is held by every device that reads it (the lowest as its device, the
// others as replicas). A block nobody reads keeps one device.
void make_resident(const Graph& g, Decomposition& d);

// Bytes of weights (every replica counted) each device holds at rest under `d`.
[[nodiscard]] std::vector<std::int64_t> resident_weight_bytes(const Graph& g, const Decomposition& d);

// The first device whose resident weights under `d` exceed its memory capacity, or -1
// when every device holds its weights (devices without a capacity are not checked).
[[nodiscard]] int device_over_memory(const Graph& g, const Decomposition& d, const Machine& m);

// Error naming the first device whose resident weights exceed its memory capacity,
// with both byte counts (devices without a capacity are not checked).
void check_resident_memory(const Graph& g, const Decomposition& d, const Machine& m);

}  // namespace tessel::planner
