#pragma once
// A collective over ranks 0..ranks−1 (devices 0..ranks−1), as the task graph holds it
// when it is one node (TaskKind::collective): what it is, how large, which algorithm and
// how it is pipelined. The simulator generates its steps as it runs (sim/collectives.h
// describes the algorithms and how the expanded form builds them as moves and touches).
//
// A lowered collective (lower() with LowerOptions::collectives, core/task_graph.h) also
// names its data: the task reads one buffer per rank (Task::reads, rank order), rank r
// runs on devices[r] and ends with outputs[r].
// reducescatter, allreduce: the inputs all of one shape; outputs[r] holds the `agg` of
//   region regions[r] of every rank's input (reducescatter: the regions are disjoint;
//   allreduce: every region is the whole input).
// allgather: rank r's input is block r of the gathered tensor, regions[r] where it lies
//   in it (disjoint, together the whole tensor); every outputs[r] holds the whole tensor
//   (every rank's input copied into its region), `agg` none.

#include <cstdint>
#include <vector>

#include "core/ids.h"
#include "core/types.h"

namespace tessel {

// Pieces a rank has in flight (NCCL_STEPS, NCCL src/include/device.h): a rank starts
// sending piece j once piece j − kPiecesInFlight has reached it (sim/collectives.h).
inline constexpr int kPiecesInFlight = 8;

enum class Collective : std::uint8_t { allreduce, reducescatter, allgather, alltoall };
enum class Algorithm : std::uint8_t { ring, tree, hierarchical, pairwise };

struct CollectiveSpec {
  Collective collective = Collective::allreduce;
  Algorithm algorithm = Algorithm::ring;  // pairwise for alltoall
  int ranks = 1;
  std::int64_t bytes = 0;
  DType dtype = DType::f32;
  int slices = 1;          // pipelined pieces (ring, tree, hierarchical)
  int window = 1;          // pairwise: sends in flight per rank, 0 = all
  int ranks_per_node = 0;  // hierarchical, two-level pairwise: ranks per node (consecutive ranks share a node)
  // Hierarchical: pieces a rank has in flight along its rail (the intra-node phases keep
  // kPiecesInFlight); plan_collective() widens it where 8 pieces' rail chunks hold less
  // than the rail hop's bandwidth-delay product (sim/collectives.h).
  int rail_window = kPiecesInFlight;
  // Ring reduce-scatter and all-reduce: pieces a rank has in flight; plan_collective()
  // widens it as it does rail_window (the tree keeps kPiecesInFlight).
  int ring_window = kPiecesInFlight;
  // Lowered collectives only (empty otherwise; see the header comment).
  std::vector<DeviceId> devices{};  // rank r's device
  std::vector<BufferId> outputs{};  // rank r's result buffer, on devices[r]
  std::vector<Rect> regions{};      // rank r's region of the inputs
  Agg agg = Agg::sum;

  [[nodiscard]] bool lowered() const { return !outputs.empty(); }
};

}  // namespace tessel
