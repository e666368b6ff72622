#pragma once
// Fused computation-collective tasks (Punniyamurthy, Hamidouche, Beckmann, SC24,
// arXiv 2305.06942): a GEMM whose workgroups send their finished output tiles to the
// remote GPUs while other workgroups still compute, instead of a GEMM followed by the
// collective its consumers need.
//
// fuse_collectives() rewrites a task graph for the simulator: every contraction whose
// output buffer is read by moves to other devices becomes `tiles` compute tasks (one per
// tile, chained, each 1/tiles of the GEMM) and each of those moves `tiles` moves of
// 1/tiles of its bytes, the k-th depending on the k-th tile. Successors of a move depend
// on all its pieces; every other successor of the GEMM on its last tile.
//
// Timing (SimOptions::task_seconds and ::fused): a tile takes the GEMM's undisturbed
// time (compute_model.h, its launch latency once, on the first tile) / tiles /
// (1 − comm_occupancy): the communication code holds comm_occupancy of the occupancy
// (12.5% in the paper). Tiles and their sends are exempt from the interference factors:
// the fused kernel's cost of communicating is that occupancy, not a second stream's
// contention.
//
// Closed form (one GEMM of undisturbed time C whose output of S bytes goes to one peer
// over a link of bandwidth B and latency L, nothing else running):
//   C' = C / (1 − occupancy),  m = S / (B · tiles)
//   finish = max(C' + m, C'/tiles + S/B) + L
//
// Only the simulator runs fused graphs: the executors (CPU, CUDA) run the unfused graph
// (a fused kernel would need the per-tile sends inside the kernel).

#include <string>
#include <vector>

#include "core/machine.h"
#include "core/task_graph.h"
#include "sim/simulator.h"

namespace tessel::sim {

struct FusedGraph {
  TaskGraph graph;
  std::vector<double> task_seconds;  // per task of `graph`: a tile's seconds, -1 = the model's
  std::vector<char> fused;           // per task of `graph`: part of a fused kernel
  int fused_kernels = 0;             // GEMMs fused
  std::int64_t fused_moves = 0;      // moves of the original graph sent tile by tile
};

// The rewrite above, with the machine's Interference::fused (tiles, comm_occupancy).
// fused_kernels == 0 when nothing is fusible (no contraction's output is moved); the
// graph is then the input unchanged.
[[nodiscard]] FusedGraph fuse_collectives(const TaskGraph& tg, const Machine& m);

// fuse_collectives() applied in place: where something is fusible, `tg` becomes the fused
// graph and `so` gets its task_seconds and fused flags; returns the GEMMs fused (0: `tg`
// and `so` are left as they were).
int fuse_collectives_into(TaskGraph& tg, const Machine& m, SimOptions& so);

}  // namespace tessel::sim
