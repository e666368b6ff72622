#pragma once
// EinDecomp's analytic cost, in tensor elements moved or replicated
// (EinDecomp, PVLDB 18(7), arXiv 2410.02682: join replication, aggregation and
// repartition costs), on parts per index. Candidates
// are powers of two; the formulas take any part counts (ratios replace 2^(exponent
// differences)), so baselines with other counts are scored the same way.
//
//   join(node, p)          Σ over inputs of elements(input) × Π parts of the join
//                          indices the input does not use (replication), each input's
//                          term times its price (1; 0 for an operand at rest on every
//                          device that reads it: a resident weight or fill, residency.h)
//   aggregation(node, p)   out_elements × (n_agg − 1), n_agg = Π parts of the
//                          aggregated indices (partials to combine)
//   repartition(a → b)     0 if a == b, else N·Π max(a,b)/a + N·(Π max(a,b)/b − 1)
//
// Tessel aggregates partials into the blocks of the join partition's output indices, so
// a node's output partition is its join partition restricted to its output indices.

#include <cstdint>
#include <vector>

#include "core/graph.h"

namespace tessel::planner {

using Parts = std::vector<int>;  // parts per index

// Per NodeId, what one element of that node costs when a join replicates it (join_cost);
// empty: 1 for every node. Resident weights and fills are at rest on every device that
// reads them before the run, so that replicating them moves nothing: price 0
// (input_prices(), strategy.h).
using Prices = std::vector<double>;

// Every vector of power-of-two parts per index whose product is 2^total_log2, with each
// part at most the index size, in lexicographic order.
[[nodiscard]] std::vector<Parts> candidate_partitions(const Shape& shape, int total_log2);
// A node's candidates: candidate_partitions() for the largest product 2^t <= 2^total_log2
// that its shape allows (a [1, 1000] node on 1,024 blocks: 512 blocks, not one block on
// one device that every consumer's block must then fetch from).
[[nodiscard]] std::vector<Parts> node_candidates(const Shape& shape, int total_log2);

[[nodiscard]] double join_cost(const Graph& g, NodeId id, const Parts& p, const Prices& prices = {});
[[nodiscard]] double aggregation_cost(const Graph& g, NodeId id, const Parts& p);
[[nodiscard]] double repartition_cost(double elements, const Parts& from, const Parts& to);

// The partition consumer `id`'s join partition `p` needs of its operand `i`.
[[nodiscard]] Parts operand_partition(const Graph& g, NodeId id, int operand, const Parts& p);
// The partition of `id`'s output under join partition `p`.
[[nodiscard]] Parts output_partition(const Graph& g, NodeId id, const Parts& p);

[[nodiscard]] int log2_exact(std::int64_t n);  // -1 when n is no power of two

}  // namespace tessel::planner
