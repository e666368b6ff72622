#pragma once
// Collective micro-workloads as task graphs of moves and reductions (touches), built the
// way NCCL runs them, so that the network models can be checked against closed forms and
// bandwidths reported as nccl-tests does.
//
// `bytes` is S as nccl-tests uses it (its doc/PERFORMANCE.md):
//   allreduce      S bytes per rank in and out
//   reducescatter  S bytes in per rank, S/n out
//   allgather      S/n bytes in per rank, S out
//   alltoall       S bytes sent per rank, S/n to each rank
//
// Algorithms (Algorithm):
//   ring          ranks 0..n-1 in a ring, rank i sends to i + 1. Reduce-scatter: n−1 steps,
//                 in step k rank i sends its partial of chunk i − k, which the receiver adds
//                 (two accumulate touches into a fresh buffer) to its own copy; all-gather:
//                 n−1 steps forwarding the chunk received last. All-reduce is the two.
//   tree          all-reduce over NCCL's double binary tree: two binary trees, each
//                 carrying half the data, one the mirror image of the other (a rank that is
//                 a leaf in one is inner in the other); each reduces up to its root, then
//                 broadcasts down.
//   hierarchical  all-reduce on several nodes (nodes of equal size, ranks numbered node by
//                 node): ring reduce-scatter inside every node (NVSwitch), then for every
//                 local rank l a ring all-reduce of the chunk it holds across the ranks with
//                 local rank l of every node (one ring per rail/NIC, all rails at once),
//                 then ring all-gather inside every node.
//   pairwise      all-to-all: in step k = 1..n−1 rank i sends its block for rank i + k
//                 (staggered, so that in each step every rank receives from one sender);
//                 a rank has at most `window` sends in flight, in step order (step k waits
//                 for its step k − window), so the order holds whatever the simulator's
//                 priorities; window 0 posts every send at once (NCCL's grouped send/recv).
//                 On several nodes (ranks_per_node > 0) staggered on each level instead:
//                 intra-node step j sends (q, l) → (q, l + j), inter-node step (d, t)
//                 (q, l) → (q + d, l + t), every send posted at once: with a channel per
//                 link (SimOptions::channels_per_link) each link sends in step order.
// Pipelining: ring, tree and hierarchical split the data into `slices` independent pieces
// and run the algorithm on each; a piece's reduction then overlaps the next piece's
// transfer (NCCL's chunked steps). With slices the simulation needs several moves in
// flight per device (SimOptions::comm_channels, NCCL's 8 steps per connection) so that a
// piece's latency overlaps another's bytes.
// Every step is its own graph node, so the bsp policy puts a barrier between steps.
// No output tasks: results stay where the last step leaves them.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/collective.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "core/types.h"

namespace tessel::sim {

using tessel::Algorithm;
using tessel::Collective;
using tessel::CollectiveSpec;
[[nodiscard]] std::string_view to_string(Collective c);
[[nodiscard]] Collective parse_collective(std::string_view s, std::string_view what = "collective");
[[nodiscard]] std::string_view to_string(Algorithm a);
[[nodiscard]] Algorithm parse_algorithm(std::string_view s, std::string_view what = "algorithm");

// Errors name the field: fewer than 1 rank, bytes not a positive whole number of `dtype`
// elements, fewer elements than ranks × slices, an algorithm that does not fit the
// collective, a hierarchical layout that does not divide the ranks.
[[nodiscard]] TaskGraph collective_task_graph(const CollectiveSpec& spec);
// Ring (pairwise for alltoall), one slice, window 1.
[[nodiscard]] TaskGraph collective_task_graph(Collective c, int n, std::int64_t bytes, DType dtype = DType::f32);

// Where chunk c of `length` elements cut into m chunks begins: floor(c · length / m),
// without overflow (every split of a collective's elements into ranks and pieces).
[[nodiscard]] std::int64_t split_point(int c, std::int64_t length, int m);
// Pieces a rank has in flight (tessel::kPiecesInFlight = 8, NCCL_STEPS, NCCL
// src/include/device.h): a rank starts sending piece j once piece j − 8 has reached it
// (ring, tree); hierarchical counts it per phase (intra-node reduce-scatter, rails,
// intra-node all-gather), as NCCL bounds the steps in flight per connection and the phases
// use different connections. Along a rail the window is CollectiveSpec::rail_window:
// NCCL's 8 slots per connection hold 8 steps of 512 KiB, but a piece's rail chunk is
// c = S/(n·P) bytes and falls with the nodes (32 KiB for 1 GiB over 1,024 ranks in 32
// pieces). Each rail step waits for the one before it (latency α, then c/B on the link),
// so W pieces in flight keep a hop of bandwidth B busy only if W·c/B ≥ α + c/B; with 8
// such chunks the NICs idle, and 32 pieces run as 4 rounds of 2(N − 1) latencies in series
// (1.75× the formula at 128 nodes). plan_collective() sets W = max(8, ⌈1 + α·B/c⌉), the
// largest over the rail hops r → r + g (α the route's latency, B its slowest link): the
// fewest pieces that hold every hop's bandwidth-delay product (more would only finish
// every piece's rails at once under the longest-path order, leaving the intra-node
// all-gather to the end). The ring keeps its own window by the same rule
// (CollectiveSpec::ring_window, over its hops i → i + 1): its pieces carry at least
// 512 KiB per step, so 8 hold more than any preset's product, but on hops of 1 ms at
// 10 GB/s it takes 21, where 8 ran 1.6 times the α-β time. The tree keeps 8.

// The window of pieces in flight that `s`'s algorithm keeps per spec: the ring
// reduce-scatter's and all-reduce's (ring_window), the hierarchical all-reduce's rails
// (rail_window); nullptr elsewhere (an all-gather's pieces are not windowed, the tree keeps
// kPiecesInFlight, all-to-all has CollectiveSpec::window).
[[nodiscard]] int* pieces_in_flight(CollectiveSpec& s);
[[nodiscard]] const int* pieces_in_flight(const CollectiveSpec& s);

// The same collective as one task graph node (TaskKind::collective) over devices
// 0..ranks−1: simulate() generates its steps and transfers as it runs (collective_engine.h),
// so memory grows with the ranks, not with the n² tasks of the expanded form. Checked as
// collective_task_graph() checks.
[[nodiscard]] TaskGraph collective_node_graph(const CollectiveSpec& spec);
// A graph whose only task is a collective node → its expanded form (collective_task_graph);
// a lowered graph's collective nodes (LowerOptions::collectives) → NCCL's rings on their
// own buffers (pieces as above, cut along the region's largest dimension): reduce-scatter
// pipelined, rank r's region travelling the ring from rank r + 1 around to r, each rank
// adding its part, the last step adding into rank r's output; all-gather, each rank
// copying its block into its output, then in step k rank i sending block i − k (its own,
// then the one it received last) to rank i + 1, which copies it into its output, pieces
// not windowed (as the generated ring all-gather); any other graph unchanged. Error when
// a collective node that is not lowered is mixed with other tasks.
[[nodiscard]] TaskGraph expand_collectives(const TaskGraph& tg);

// The algorithms NCCL could run for `c` on ranks 0..n-1 of `m`, with the tuner's estimate
// for each: time = latency + bytes / bandwidth (NCCL src/graph/tuning.cc's form), the
// latency NCCL's Simple-protocol base latency plus its per-hop latencies along the
// algorithm's critical chain, the bandwidth the algorithm's busiest link allows (every
// transfer of the ring, rails or all-to-all on its route, so that a link several share
// counts them all; the tree takes the ring's slowest hop).
struct AlgorithmEstimate {
  Algorithm algorithm = Algorithm::ring;
  double latency_s = 0;
  double algbw_bytes_per_s = 0;  // S / (time − latency)
  double time_s = 0;
};
struct CollectivePlan {
  CollectiveSpec spec;                       // the chosen (or forced) algorithm, slices and windows set
  std::vector<AlgorithmEstimate> estimates;  // every algorithm that fits, fastest first
};
// `forced`: the algorithm to use (error naming --algorithm when it does not fit `c` or `m`);
// none: the fastest estimate, as NCCL's tuner chooses.
[[nodiscard]] CollectivePlan plan_collective(Collective c, int n, std::int64_t bytes, DType dtype, const Machine& m,
                                             std::optional<Algorithm> forced = std::nullopt);

// nccl-tests: busbw = algbw × factor; all-reduce 2(n−1)/n; reduce-scatter, all-gather,
// all-to-all (n−1)/n.
[[nodiscard]] double bus_bandwidth_factor(Collective c, int n);

// The α-β time on a ring (on a full-bisection switch for all-to-all), α the latency of
// one step's transfer and B the bandwidth per rank and direction (the textbook α-β costs
// of ring and pairwise exchange, as in Thakur, Rabenseifner and Gropp, IJHPCA 2005):
//   allreduce 2(n−1)α + 2(n−1)/n·S/B; reducescatter, allgather, alltoall (n−1)α + (n−1)/n·S/B.
[[nodiscard]] double collective_closed_form_s(Collective c, int n, double bytes, double alpha_s, double bytes_per_s);

// Published nccl-tests bus bandwidths for large messages (third-party nccl-tests reference
// pages for DGX H100 and DGX A100), where one matches this collective, rank count and machine.
struct PublishedBusbw {
  double low_GBps = 0, high_GBps = 0;
  std::string_view system;
  std::string_view source;
};
[[nodiscard]] std::optional<PublishedBusbw> published_busbw(Collective c, int n, const Machine& m);

}  // namespace tessel::sim
