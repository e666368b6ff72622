#pragma once
// `search`: a simulator-guided strategy (the simulator as the planner's cost oracle).
//
// It plans the graph with eindecomp and every baseline that can serve the request,
// simulates each on the machine (sim::simulate: flow network, async policy, longest-path
// priority, interference as the machine describes it) and starts from the fastest. Then
// simulated annealing over the decomposition, one move at a time, each move lowered and
// simulated:
//
//   resplit    one einsum's parts: a factor of two moved from one index to another
//              (blocks placed round-robin, an aggregation target dropped)
//   adopt      one einsum's partition and placement taken from another strategy's plan
//              (every start, under round-robin and greedy placement)
//   swap       the devices of two blocks of one einsum exchanged
//   shift      every block of one einsum moved by the same number of devices
//
// Leaves and outputs follow a node that changes, as strategies fill them. A move that
// is slower is kept with probability exp(−Δ / (T·current)), T = 0.02 / (1 + k/16) after k
// evaluations; the fastest decomposition seen is returned, so the result is never
// slower than the start. The random choices come from a generator seeded with
// PlanOptions::seed, and the schedule counts evaluations, not seconds: a search stopped
// by PlanOptions::search_evaluations (with a wall-clock budget it does not reach) gives
// the same plan for the same seed, bit for bit. One the clock stops does not: the budget
// also cuts eindecomp's refinement of its start short, at a point the clock decides, so
// even its evaluation count does not pin its plan (SearchReport::budget_reached says which
// stopped it). Every simulation is bounded
// (sim::SimOptions::stop_after_s): a start's by the best start so far, a move's by its
// Metropolis threshold current·(1 − T·ln u), u drawn before simulating — past it the
// move is refused whatever its makespan, so the bound changes no decision. The budget
// (a watchdog setting SimOptions::cancel and LowerOptions::cancel) abandons a lowering
// or simulation under way when it runs out, and stops eindecomp's refinement of its start
// (PlanOptions::cancel); the starts are planned first and simulated eindecomp first,
// then by analytic cost, at least one whatever the budget. Memory: one lowered graph and
// one simulation at a time, each freed before the next, and no task graph larger than
// SearchReport::max_tasks after the first start's (a larger candidate is not simulated),
// so the peak does not grow with the budget.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/graph.h"
#include "planner/strategy.h"

namespace tessel::planner {

struct SearchReport {
  std::string start_strategy;  // the fastest start
  double start_makespan_s = 0;
  double final_makespan_s = 0;
  std::map<std::string, double> starts;  // every start simulated to its end: strategy → makespan
  // Starts whose simulation stopped when its clock passed the best makespan before it
  // (they cannot be the start): strategy → that clock, below their makespan.
  std::map<std::string, double> starts_stopped;
  // Starts whose task graph has more than max_tasks tasks: not simulated (not lowered whole).
  std::vector<std::string> starts_too_large;
  // The most tasks a start after the first, or a move, may lower into: the larger of 1.5 M
  // and twice the first start's. What bounds the search's memory, whatever its budget.
  std::int64_t max_tasks = 0;
  int evaluations = 0;                   // simulations, starts included
  int stopped_by_bound = 0;              // of them, stopped early: they could not be kept
  int too_large = 0;                     // of them, not simulated: over max_tasks
  double elapsed_s = 0;
  bool budget_reached = false;  // false: stopped by PlanOptions::search_evaluations
  struct Moves {
    int tried = 0, accepted = 0, improved = 0;  // improved: a new best
    double gain_s = 0;                          // makespan taken off the best by this kind
  };
  std::map<std::string, Moves> moves;  // by kind: resplit, adopt, swap, shift
};

// The search's plan; `report` (optional) receives what it did. Error when
// options.machine is empty or no start can be planned.
[[nodiscard]] Plan search_plan(const Graph& g, const PlanOptions& options, SearchReport* report = nullptr);

[[nodiscard]] std::unique_ptr<Strategy> make_search();

}  // namespace tessel::planner
