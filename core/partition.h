#pragma once
// Partition: how one node's join space is cut into blocks. Each index is split into
// intervals (even or not); blocks are the hyper-rectangles of the resulting grid,
// numbered row-major over the grid (last index fastest).
//
// Decomposition: a partition for every node plus the device of every block, and for a
// node whose aggregated indices are split, the device where each output block's
// partial results are aggregated. A block of an input or fill may also be present on
// further devices (replicas at rest: a weight kept on every device that reads it).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/ids.h"
#include "core/types.h"

namespace tessel {

// Most blocks one node may be cut into: 4,194,304 (64 per device on kMaxDevices). A
// partition beyond it is refused before any block is made.
inline constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 22;

class Partition {
 public:
  Partition() = default;
  // parts[d] even-ish intervals of dimension d: part p is [p*n/parts, (p+1)*n/parts).
  [[nodiscard]] static Partition even(const Shape& shape, const std::vector<int>& parts);
  // Explicit boundaries per dimension: {0, b1, ..., size}, strictly increasing.
  [[nodiscard]] static Partition from_bounds(std::vector<std::vector<std::int64_t>> bounds);
  [[nodiscard]] static Partition whole(const Shape& shape) { return even(shape, std::vector<int>(shape.size(), 1)); }

  [[nodiscard]] int rank() const { return static_cast<int>(bounds_.size()); }
  [[nodiscard]] int parts(int dim) const { return static_cast<int>(bounds_[dim].size()) - 1; }
  [[nodiscard]] std::vector<int> parts() const;
  [[nodiscard]] std::int64_t num_blocks() const;
  [[nodiscard]] Shape shape() const;
  [[nodiscard]] const std::vector<std::vector<std::int64_t>>& bounds() const { return bounds_; }
  [[nodiscard]] bool is_even() const;

  [[nodiscard]] Rect block(std::int64_t index) const;
  // Row-major block index of a grid coordinate.
  [[nodiscard]] std::int64_t block_index(const std::array<int, kMaxRank>& coord) const;
  // The first `rank` dimensions (the output partition of an einsum).
  [[nodiscard]] Partition prefix(int rank) const;
  // Range [first, last) of parts of `dim` that overlap [lo, hi).
  void overlapping(int dim, std::int64_t lo, std::int64_t hi, int* first, int* last) const;

  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Partition&, const Partition&) = default;

 private:
  std::vector<std::vector<std::int64_t>> bounds_;
};

struct NodePlan {
  Partition partition;
  std::vector<DeviceId> devices;  // one per block of `partition`
  // Only for an einsum whose aggregated indices are split: the partition its partials
  // are aggregated into (EinDecomp's post-aggregation partition); none = the join
  // partition's output indices.
  std::optional<Partition> output;
  std::vector<DeviceId> agg_devices;  // one per output block, only when aggregated indices are split
  // Only for an input or fill: per block, the further devices that hold a copy of it
  // before the first step (ascending, none equal to `devices`); empty = no replicas.
  // Lowering creates every copy and reads the local one: no move for a block already
  // present where it is read.
  std::vector<std::vector<DeviceId>> replicas;
  friend bool operator==(const NodePlan&, const NodePlan&) = default;
};

struct Decomposition {
  int num_devices = 1;
  std::vector<NodePlan> nodes;  // indexed by NodeId

  [[nodiscard]] const NodePlan& plan(NodeId id) const { return nodes.at(id.index()); }
  // Throws Error naming the node when a partition does not fit its node's join shape,
  // a device is out of range, or a block count does not match.
  void validate(const Graph& g) const;
  friend bool operator==(const Decomposition&, const Decomposition&) = default;
};

// Number of output blocks with their partials: for an einsum whose aggregated indices
// are split, how many partial blocks feed each output block.
[[nodiscard]] std::int64_t partials_per_output_block(const Graph& g, NodeId id, const Partition& p);

// A node's output as its consumers see it: the partition (NodePlan::output, or the join
// partition's output indices) and the device of every block (the aggregation site
// where partials are combined: agg_devices, or the device of the first partial that
// overlaps the block).
struct OutputBlocks {
  Partition partition;
  std::vector<DeviceId> devices;
};
[[nodiscard]] OutputBlocks output_blocks(const Graph& g, NodeId id, const NodePlan& plan);

// A decomposition from per-node part counts (missing nodes get one block), blocks
// placed round-robin over `num_devices`, starting each node at device 0, aggregation
// at the device of the first partial.
[[nodiscard]] Decomposition decomposition_from_parts(const Graph& g, int num_devices,
                                                     const std::vector<std::vector<int>>& parts);

// The default used until a strategy is chosen: every node is cut into (up to)
// `num_devices` blocks by splitting its largest index first (then the next largest,
// prime factor by prime factor), blocks placed round-robin.
[[nodiscard]] Decomposition split_largest(const Graph& g, int num_devices);
[[nodiscard]] std::vector<int> split_largest_parts(const Shape& join_shape, int blocks);

}  // namespace tessel
