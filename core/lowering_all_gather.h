#pragma once
// All-gather detection for lower() with LowerOptions::collectives (core/task_graph.h):
// which operand regions an einsum's blocks read are all-gathers of its producer's
// blocks, so that the lowering emits one collective node (Collective::allgather,
// core/collective.h) for them instead of k(k−1) moves and k² copies.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/einsum.h"
#include "core/ids.h"
#include "core/partition.h"
#include "core/types.h"

namespace tessel {

// Region `region` of the producer's output, made of k >= 2 of its blocks (`blocks`,
// ascending), block blocks[r] on devices[r], the k devices distinct, and read whole by a
// block of the consumer on each of those k devices.
struct AllGather {
  Rect region;
  std::vector<std::int64_t> blocks;
  std::vector<DeviceId> devices;
};

// The all-gathers of operand `operand` of einsum `e` (join partition and devices in
// `plan`) over the producer's output partition `produced` (block b on produced_devices[b],
// no replicas): every distinct region some consumer block reads, in the order of the
// first block that reads it, that covers k >= 2 producer blocks exactly (each block lies
// inside it) on k distinct devices, each of which reads the region. Any other region is
// left out (it stays moves and copies): one block, a block straddling its edge, two
// blocks on one device, or a holder that does not read it.
[[nodiscard]] std::vector<AllGather> find_all_gathers(const Einsum& e, std::size_t operand, const NodePlan& plan,
                                                      const Partition& produced,
                                                      const std::vector<DeviceId>& produced_devices);

}  // namespace tessel
