#pragma once
// The baselines by their published definitions, and the helpers every strategy shares.
//
//   data-parallel  Data parallelism as in PyTorch DDP (Li et al., PVLDB 13(12), 2020):
//                  the batch split over every device, every weight resident and
//                  replicated on each. When the batch is smaller than the device count,
//                  the sequence (tokens) is split as well.
//   megatron       Megatron-LM tensor parallelism (Shoeybi et al. 2019, arXiv
//                  1909.08053): Q/K/V and W1/W3 column-parallel, attention split by its
//                  heads (the softmax local to a head), WO and W2 row-parallel with the
//                  sum of partials after them; weights resident in their shards. Tessel
//                  runs every block once, so the norms and residuals between the
//                  tensor-parallel regions are split along the sequence, as Megatron-LM
//                  runs them with sequence parallelism (Korthikanti et al. 2022, arXiv
//                  2205.05198): the sums of partials become reduce-scatters and the
//                  inputs of the column-parallel projections all-gathers.
//   dp-tp          megatron inside each node (the machine's devices per host) and data
//                  parallel across nodes (Narayanan et al., SC 2021, arXiv 2104.04473):
//                  needs a machine, whole nodes and batch >= the node count.
//
// The baselines read the graph's annotations (core/graph.h): which inputs are weights,
// and which input dimensions are the batch, the sequence and the attention heads. A
// graph without them: the first input is the data (its dimension 0 the batch, then 1),
// the others are weights.

#include <memory>
#include <string>
#include <vector>

#include "core/graph.h"
#include "planner/strategy.h"

namespace tessel::planner {

[[nodiscard]] std::unique_ptr<Strategy> make_data_parallel();
[[nodiscard]] std::unique_ptr<Strategy> make_megatron();
[[nodiscard]] std::unique_ptr<Strategy> make_dp_tp();

namespace detail {  // shared by the strategies (strategy.cc)

[[nodiscard]] bool is_leaf(const Graph& g, NodeId id);     // input or fill
[[nodiscard]] bool is_planned(const Graph& g, NodeId id);  // einsum or select
// log2(n·k); Error naming the strategy unless n·k is a power of two.
[[nodiscard]] int require_power_of_two(const std::string& strategy, const PlanOptions& o);
// Leaves take the partition their first consumer needs, outputs their producer's.
void fill_unplanned(const Graph& g, std::vector<Parts>& parts, const std::vector<Parts>& outputs = {});

}  // namespace detail
}  // namespace tessel::planner
