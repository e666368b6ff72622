#pragma once
// Placement: which device runs each block of a partitioned graph.
//
//   round-robin  block b of every node on device b mod n; partials aggregated at the
//                first partial's device, or, when a node aggregates into a finer output
//                partition than its own output indices give, output block o on o mod n
//   greedy       EinDecomp's min-max rule: nodes in order, each block on the device
//                where (its load so far + the block's flops + flops_per_byte × bytes that
//                must arrive) is lowest; partials aggregated where most of them are
//   locality     the device that already holds the largest share of the block's
//                operand bytes, under a bound: no device takes more than ⌈blocks / n⌉
//                blocks of one node, and a node with at least n blocks uses every
//                device (ties: the device with the least compute so far)
//
// Under each, inputs and fills start on a device that reads them first: each block on
// one of the devices of its first consumer (then the next) that reads it, the one holding
// the fewest of that leaf's elements so far (ties: the first reader), so that a block
// read on one device starts there and the blocks a group all reads are spread over it.
// A node the strategy placed itself (Partitioning::devices) is left as it is.

#include <string>
#include <string_view>
#include <vector>

#include "core/graph.h"
#include "core/partition.h"
#include "planner/cost.h"

namespace tessel::planner {

[[nodiscard]] std::vector<std::string> placement_names();

// Error listing the known placements on an unknown name. `spread` (round-robin only): a
// node of B < n blocks, B dividing n, puts block b on device b·n/B instead of b, among
// the blocks of the n-block nodes around it rather than on the first B devices
// (eindecomp's refinement tries it: eindecomp.h).
struct Partitioning;
[[nodiscard]] Decomposition place(const Graph& g, const Partitioning& parts, int devices,
                                  std::string_view placement, double flops_per_byte = 1000, bool spread = false);

// Devices that run no block of any einsum under `d` (empty when the graph has none).
[[nodiscard]] std::vector<int> idle_devices(const Graph& g, const Decomposition& d);

}  // namespace tessel::planner
