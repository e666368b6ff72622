#pragma once
// Strategies turn a Graph into a Decomposition (a partition per node and a device per
// block). A new strategy is one class implementing Strategy plus one line in
// strategy.cc's registry.
//
//   eindecomp         EinDecomp's dynamic program over trees of the graph (cost.h)
//   exhaustive        every combination of candidate partitions: the global optimum of
//                     the same cost, for small graphs (the check on eindecomp)
//   data-parallel     the batch split everywhere it flows (then the sequence); weights
//                     whole, resident and replicated on every device (baselines.h)
//   megatron          Megatron-LM tensor parallelism: attention split by heads, the
//                     projections column- then row-parallel, the sequence split between
//                     them; weights resident in their shards (baselines.h)
//   dp-tp             megatron inside each node, data parallel across nodes (baselines.h)
//   sqrt-split        every contraction's output indices split √n ways each (n ways in all)
//   block-per-device  one block per device along each node's largest output index
//   split-largest     every node cut into n blocks along its largest indices
//   manual            a decomposition JSON file (PlanOptions::manual_file)
//   search            simulator-guided: the fastest start, improved by simulated
//                     annealing on the machine within a time budget (search.h)
//
// Placement (placement.h) then puts blocks on devices; strategies that only partition
// use it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/graph.h"
#include "core/machine.h"
#include "core/partition.h"
#include "planner/cost.h"

namespace tessel::planner {

// Where the weights (graph inputs annotated as weights, core/graph.h) are at time zero:
//   resident  every block of a weight, and of a fill, is present on each device that
//             reads it (replicated or sharded at rest, as a strategy keeps them between
//             steps): no move, memory on every holder. The default.
//   fetched   each block on one device, moved to its readers in every step (the first
//             step of a run).
enum class Weights : std::uint8_t { resident, fetched };
[[nodiscard]] std::string_view to_string(Weights w);
[[nodiscard]] Weights parse_weights(std::string_view text);  // Error naming the text

struct PlanOptions {
  int devices = 1;
  int blocks_per_device = 1;  // k: n·k blocks per node
  std::string placement = "round-robin";
  // The greedy placement weighs bytes that must arrive against flops. Without a
  // machine the weight is EinDecomp's default (1000 flops per byte); with one, it is
  // the machine's own: device 0's peak flop/s for `dtype` over the bandwidth of the
  // route from device 0 to device 1.
  double flops_per_byte = 1000;
  DType dtype = DType::f32;
  std::optional<Machine> machine;
  std::string manual_file;                        // for `manual`
  std::int64_t exhaustive_limit = 5'000'000;      // combinations `exhaustive` may try
  // `search` (search.h): wall-clock budget, random seed, an optional cap on simulations
  // (0 = none; with a cap the budget does not cut it short, the plan depends on the seed
  // alone), and a sink for progress lines (none = silent).
  double budget_s = 30;
  std::uint64_t seed = 1;
  std::int64_t search_evaluations = 0;
  // `search`: the least limit on a candidate's lowered tasks; the limit is the larger of
  // this and twice the first start's (SearchReport::max_tasks). It bounds the memory.
  std::int64_t search_max_tasks = 1'500'000;
  std::function<void(const std::string&)> progress;
  Weights weights = Weights::resident;
  // eindecomp with a machine: refine the DP's plan by simulation (eindecomp.h); false:
  // the DP's plan as its cost chooses it.
  bool refine = true;
  // Optional: when it becomes true the refinement stops, the fastest plan so far kept (a
  // wall-clock budget, as `search`'s: the plan is then no longer a function of the inputs).
  const std::atomic<bool>* cancel = nullptr;
};

// Parts per index of every node's join space, and for einsums whose aggregated indices
// are split, optionally the partition their partials are aggregated into (empty = the
// join partition's output indices).
struct Partitioning {
  std::vector<Parts> join;
  std::vector<Parts> output;  // empty, or one per node (each possibly empty)
  // Empty, or one per node (each possibly empty): the device of every join block and of
  // every aggregated output block, for a strategy that places a node itself (dp-tp keeps
  // each tensor-parallel group inside a node); the placement leaves such nodes alone.
  std::vector<std::vector<int>> devices = {}, agg_devices = {};
  [[nodiscard]] Parts output_of(const Graph& g, NodeId id) const;
};

// Cost of one node under a decomposition, in elements (cost.h).
struct NodeCost {
  double join = 0;         // replication of operands
  double aggregation = 0;  // partials combined
  double repartition = 0;  // operands moved into the partition this node needs
  [[nodiscard]] double total() const { return join + aggregation + repartition; }
};

struct SearchReport;  // search.h

struct Plan {
  std::string strategy;
  Decomposition decomposition;
  std::vector<NodeCost> costs;  // per node
  std::shared_ptr<const SearchReport> search;  // what `search` did; null for the others
  // Devices that run no compute block of any einsum, select or fill: the CLI warns and
  // reports them (placement.h).
  std::vector<int> idle_devices;
  [[nodiscard]] double total_cost() const;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual std::string help() const = 0;
  // Parts per index for every node (empty = one block); placement follows.
  [[nodiscard]] virtual Partitioning partition(const Graph& g, const PlanOptions& o) const = 0;
};

[[nodiscard]] const std::vector<std::unique_ptr<Strategy>>& strategies();
[[nodiscard]] std::vector<std::string> strategy_names();

// Plans `g` with the named strategy and placement, then (options.weights resident) makes
// the weights resident (residency.h). Error naming the strategy, the device counts it
// can serve, or the graph's size against exhaustive's limit; with resident weights and
// a machine, error naming the device whose memory its weights exceed.
[[nodiscard]] Plan plan(const Graph& g, std::string_view strategy, const PlanOptions& options);

// The greedy placement's weight of a byte in flops under `options` (see PlanOptions).
[[nodiscard]] double flops_per_byte(const PlanOptions& options);

// What one replicated element of each node costs in eindecomp's cost (cost.h's Prices):
// with Weights::resident the weights (weight_inputs) and fills cost `at_rest` — 0: they
// are at rest on every device that reads them, so replicating them moves nothing (their
// memory is checked instead: residency.h) — and every other node 1; with
// Weights::fetched every node 1 (each weight is sent to its readers).
[[nodiscard]] Prices input_prices(const Graph& g, Weights w, double at_rest = 0);

// The cost of any decomposition under cost.h, node by node, inputs priced by `prices`
// (input_prices). Selects are not modelled (0).
[[nodiscard]] std::vector<NodeCost> evaluate(const Graph& g, const Partitioning& p, const Prices& prices);

}  // namespace tessel::planner
