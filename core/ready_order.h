#pragma once
// The order among ready tasks of equal priority, defined once for the simulator's ready
// queues (sim/run_loop.cc) and every executor's (the CPU executor's per-device queues, which
// the MPI executor runs too, and the CUDA executor's issue order), so that the simulator
// keeps predicting the order the executors run.
//
// Priority is the longest path to the end (integer picoseconds in the simulator, estimated
// seconds in the executors). The moves of a repartition or an all-to-all often tie on it
// exactly: equal sizes, equal routes, symmetric consumers. Lowering emits them consumer
// block by consumer block, so in task-id order every sender's first move went to the same
// receiver, its second to the next, and the receivers' links carried one at a time while the
// others sat idle. Among tied tasks the smaller key goes first: a move's stagger step, then
// the task id; every other task has step 0.
//
// A move's step is its step in NCCL's pairwise all-to-all (sim/collectives.h): with one
// level, (dst − src) mod devices, so that in step k every device sends to the one k after it
// and receives from the one k before it — whatever subset of devices exchanges, each step is
// a permutation of it (a sender's steps keep the cyclic order of its peers). With devices in
// nodes of `per_node` consecutive ids (q, l): within the node (l' − l) mod g (steps 1..g−1),
// across nodes g + ((q' − q) mod nodes − 1)·g + (l' − l) mod g, so that a sender's inter-node
// moves, which tie among themselves but not with the faster intra-node ones, are a
// permutation of the nodes' devices in each step too (one level would send every device of a
// node first to the same device of the next node).

#include <cstdint>
#include <vector>

#include "core/ids.h"

namespace tessel {

class Machine;
struct Task;
struct TaskGraph;

struct StaggerLayout {
  std::int32_t devices = 1;
  // Consecutive device ids per node; two levels only when 0 < per_node < devices and it
  // divides them, one level otherwise.
  std::int32_t per_node = 0;
  [[nodiscard]] bool two_level() const { return per_node > 0 && per_node < devices && devices % per_node == 0; }
};

// The step at which `src` sends to `dst`: in [1, devices) for distinct devices, 0 for src == dst.
[[nodiscard]] std::int32_t stagger_step(std::int32_t src, std::int32_t dst, StaggerLayout layout);
// Its inverse: the device `src` sends to at `step` (1 <= step < devices).
[[nodiscard]] std::int32_t stagger_peer(std::int32_t src, std::int32_t step, StaggerLayout layout);

// The tie-break key among ready tasks of equal priority, smaller first.
[[nodiscard]] constexpr std::uint64_t ready_tie(std::int32_t step, std::int32_t task) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(step)) << 32) | static_cast<std::uint32_t>(task);
}
// A task's key: a move's step from its source to its destination, 0 for any other task.
[[nodiscard]] std::uint64_t ready_tie(const Task& t, TaskId id, StaggerLayout layout);
// Every task's key, for executors (which run within one node: StaggerLayout{tg.num_devices}).
[[nodiscard]] std::vector<std::uint64_t> ready_ties(const TaskGraph& tg, StaggerLayout layout);

// Consecutive devices per host when devices 0..devices−1 of `m` fill whole hosts of equal
// size, two or more of them; 0 otherwise (one host, or hosts of unequal size).
[[nodiscard]] std::int32_t devices_per_host(const Machine& m, std::int32_t devices);

}  // namespace tessel
