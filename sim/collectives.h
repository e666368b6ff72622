#pragma once
// Collective micro-workloads as task graphs of moves and reductions (touches), so that
// a network model can be checked against the α-β closed forms, and bandwidths reported
// as nccl-tests does.
//
// Ranks are devices 0..n-1; ring algorithms send rank i → i+1 (mod n). `bytes` is S as
// nccl-tests and REFERENCES.md use it:
//   allreduce      S bytes per rank in and out; ring: n−1 reduce-scatter steps, then n−1
//                  all-gather steps, each moving S/n bytes per rank; a received chunk is
//                  accumulated (touch) into a fresh buffer together with the local chunk
//   reducescatter  S bytes in per rank, S/n out; the n−1 reduce-scatter steps
//   allgather      S/n bytes in per rank, S out; the n−1 all-gather steps
//   alltoall       S bytes sent per rank, S/n to each rank; pairwise: in step k = 1..n−1
//                  rank i sends to rank i+k (mod n)
// Every step is its own graph node, so the bsp policy puts a barrier between steps.
// No output tasks: results stay where the last step leaves them.

#include <cstdint>
#include <string_view>

#include "core/task_graph.h"
#include "core/types.h"

namespace tessel::sim {

enum class Collective : std::uint8_t { allreduce, reducescatter, allgather, alltoall };
[[nodiscard]] std::string_view to_string(Collective c);
[[nodiscard]] Collective parse_collective(std::string_view s, std::string_view what = "collective");

// Error when n < 1, bytes is not a whole number of `dtype` elements, or there are fewer
// elements than ranks. Chunks split the elements as evenly as they go.
[[nodiscard]] TaskGraph collective_task_graph(Collective c, int n, std::int64_t bytes, DType dtype = DType::f32);

// nccl-tests: busbw = algbw × factor; all-reduce 2(n−1)/n; reduce-scatter, all-gather,
// all-to-all (n−1)/n.
[[nodiscard]] double bus_bandwidth_factor(Collective c, int n);

// The α-β time on a ring (on a full-bisection switch for all-to-all), α the latency of
// one step's transfer and B the bandwidth per rank and direction (REFERENCES.md):
//   allreduce 2(n−1)α + 2(n−1)/n·S/B; reducescatter, allgather, alltoall (n−1)α + (n−1)/n·S/B.
[[nodiscard]] double collective_closed_form_s(Collective c, int n, double bytes, double alpha_s, double bytes_per_s);

}  // namespace tessel::sim
