#pragma once
// EinDecomp's dynamic program (EinDecomp, PVLDB 18(7), arXiv 2410.02682) and what the
// planner builds around it:
//
//   DP over trees   each planned node's best subtree cost per candidate partition; a
//                   node with several consumers (the root of a tree) is fixed when its
//                   own tree is solved, so on a DAG the DP alone may miss the optimum.
//   DAGs            eindecomp_partition() then solves every shared node jointly with its
//                   consumers where its candidate set is small: for each output partition
//                   the shared node can produce, the DP is rerun with that partition
//                   forced, and the cheapest is kept (coordinate descent over the shared
//                   nodes, a few sweeps, until no forced choice lowers the total). With
//                   one shared node this is exact: the rest of the graph is a forest
//                   whose leaves are fixed.
//   topology        with a machine whose first n devices span several hosts, each moved
//                   element is weighted by the bandwidth of the link it crosses
//                   (topology_cost.cc): a block's peers under round-robin placement on
//                   the same host cost 1, those on other hosts B_intra / B_inter.
//   resident        with --weights resident (the default) the weights and fills are at
//                   rest on every device that reads them: replicating them costs nothing
//                   (input_prices). Their memory still counts: with a machine, a plan
//                   whose resident weights exceed a device's memory is solved again with
//                   their replication priced (1/64, 1/16, ... 64 per element, a Lagrange
//                   multiplier on the memory they take), the first price that fits kept.
//   refinement      with a machine (PlanOptions::refine), the DP's plan is refined by
//                   simulation: hill climbing over factor-of-two resplits of one einsum
//                   at a time, each lowered and simulated, within a fixed amount of
//                   simulated work; under round-robin, the nodes of fewer blocks than
//                   devices spread over all of them where that is faster; then the
//                   partials of the einsum whose busiest aggregation site sends the most
//                   aggregated into a finer partition (simulated_best, simulated_choice.cc).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/graph.h"
#include "planner/baselines.h"
#include "planner/cost.h"
#include "planner/strategy.h"

namespace tessel::planner {

// Shared by the strategies (strategy.cc; the others: baselines.h).
namespace detail {
[[nodiscard]] bool splits_aggregation(const Graph& g, NodeId id, const Parts& p);
[[nodiscard]] bool may_choose_output(const Graph& g, NodeId id, const std::vector<std::vector<NodeId>>& consumers);
}  // namespace detail

// The cost EinDecomp's DP minimises: elements (cost.h), each input's replicated elements
// at its price (input_prices: 0 for resident weights and fills), unless a subclass weighs
// them.
class DpCost {
 public:
  explicit DpCost(Prices prices = {}) : prices_(std::move(prices)) {}
  virtual ~DpCost() = default;
  [[nodiscard]] virtual double join(const Graph& g, NodeId id, const Parts& p) const {
    return join_cost(g, id, p, prices_);
  }
  [[nodiscard]] virtual double aggregation(const Graph& g, NodeId id, const Parts& p) const {
    return aggregation_cost(g, id, p);
  }
  [[nodiscard]] virtual double repartition(double elements, const Parts& from, const Parts& to) const {
    return repartition_cost(elements, from, to);
  }
  // Whether an einsum may aggregate its partials straight into its one consumer's need
  // (EinDecomp's post-aggregation partition). Under round-robin placement each output
  // block of that partition is summed on the device of its first partial, so a need
  // finer than the join's output piles many sites onto few devices: the topology cost,
  // which counts where traffic converges, says no.
  [[nodiscard]] virtual bool aggregates_into_need() const { return true; }

 protected:
  [[nodiscard]] double price(NodeId input) const { return prices_.empty() ? 1.0 : prices_[input.index()]; }

 private:
  Prices prices_;
};

// The DP's cost for `options`: topology-weighted (topology_cost.cc) when a machine is
// given and the first `devices` devices span more than one host, elements otherwise;
// inputs priced by input_prices(g, options.weights, at_rest_price).
[[nodiscard]] std::unique_ptr<DpCost> make_dp_cost(const Graph& g, const PlanOptions& options,
                                                   double at_rest_price = 0);
// Whether make_dp_cost(g, options) is topology-weighted.
[[nodiscard]] bool topology_weighted(const Graph& g, const PlanOptions& options);

// The total of `p` under `cost`, the same terms as evaluate().
[[nodiscard]] double dp_total(const Graph& g, const Partitioning& p, const DpCost& cost);

// EinDecomp with the DAG step above, under make_dp_cost(g, options), then the memory
// step of resident weights above; with options.machine and options.refine, that plan
// refined by simulation (simulated_best).
[[nodiscard]] Partitioning eindecomp_partition(const Graph& g, const PlanOptions& options);

// The work (tasks lowered plus events simulated) eindecomp -m spends refining its plan,
// given w, the work of simulating the DP's own plan (its tasks plus events): where one
// simulation is small the hill climb can afford to converge, where it is large the
// refinement must stay within a few seconds (the 5 s goal of `simulate` at 1,024
// devices). So
//
//   refine_budget(w) = max(kRefineRuns·w, clamp(kRefineWorkSmall·kRefineSmall / w,
//                                               kRefineWork, kRefineWorkSmall))
//
// 14 M while w <= 200 k (LLaMA-65B block: 8 to 256 devices with resident weights, 8 and
// 64 fetched; 60 to thousands of simulations of the DP plan's size), falling as 1/w
// to 5 M at w = 560 k and beyond (1,024 devices: about 8), and never fewer than three
// simulations of the DP's plan (its own and two neighbours) however large the run. The
// climb is short of its optimum at 64 and 256 devices: 10 M left it 14.5% and 15.5%
// behind `search` there (resident), 14 M with the finishing step below within 10%.
inline constexpr double kRefineWork = 5e6;
inline constexpr double kRefineWorkSmall = 1.4e7;
inline constexpr double kRefineSmall = 2e5;
inline constexpr double kRefineRuns = 3;
// After the climb, the finishing step's budget on top of the above: kRefineFinish
// simulations the size of the largest so far, at most kRefineFinishWork of work, over at
// most kRefineFinishRounds einsums (simulated_best); none where kRefineFinishWork does not
// hold two simulations the size of the largest (1,024 devices with fetched weights, 8,192).
inline constexpr double kRefineFinish = 3;
inline constexpr double kRefineFinishWork = 2e6;
inline constexpr int kRefineFinishRounds = 4;
[[nodiscard]] double refine_budget(double dp_work);

// `dp` refined by hill climbing on options.machine (flow, async): factor-of-two resplits
// of one einsum at a time, each placed under options.placement (weights made resident as
// plan() does) and simulated, the fastest kept, until a pass gains nothing, the work
// above is spent or options.cancel is set. Each pass tries first the moves that gained
// in earlier passes (the latest first), then every other in a fixed order; where the
// budget holds fewer simulations of the DP's plan than that order has moves for it (so
// that one pass cannot finish: 1,024 devices and more, 256 fetched), the first pass
// begins with the resplits that lower the DP's own cost of the plan (dp_total), the most
// first. Under
// round-robin, where the budget holds at least five simulations of its size, the DP's plan
// is also simulated with its nodes of fewer blocks than devices
// spread over them (place()'s `spread`), the faster placement kept for the climb and
// decided again for the plan it ends on. Then, on what is left of the budget plus
// kRefineFinish more simulations (at most kRefineFinishWork; none where that does not
// hold two): data-parallel's plan at batch 1 while one simulation is small
// (with a batch it is a start of the climb), and the einsum whose busiest aggregation
// site sends the most aggregated into a partition twice as fine along one output index,
// the first that gains, for up to kRefineFinishRounds einsums in turn (an einsum none of
// whose indices gains is set aside, and the next busiest tried). Plans equal once placed
// are simulated once; each simulation stops once it cannot beat the fastest so far
// (sim::SimOptions::stop_after_s). `dp` itself when it cannot be simulated or nothing is
// faster; where the result is spread, its devices are given (Partitioning::devices).
// (simulated_choice.cc)
[[nodiscard]] Partitioning simulated_best(const Graph& g, const PlanOptions& options, const Partitioning& dp);

[[nodiscard]] std::unique_ptr<Strategy> make_eindecomp();

}  // namespace tessel::planner
