// EinDecomp's DP over trees, and the joint solve of shared nodes on DAGs (eindecomp.h).
#include "planner/eindecomp.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "planner/placement.h"
#include "planner/residency.h"

namespace tessel::planner {
namespace {

using namespace detail;

// A shared node is solved jointly with its consumers when it can produce at most this
// many output partitions. The reruns of the DP this takes are bounded by a budget in
// candidates (each rerun costs its Σ of candidate counts over the planned nodes): the
// diamond suite and LLaMA blocks on 8 devices get every rerun they ask for, LLaMA-65B
// on 1,024 devices (2,119 candidates a run, tens of milliseconds) about a dozen, so
// planning stays well under a second there.
constexpr std::size_t kMaxJointCandidates = 64;
constexpr std::size_t kRerunBudget = 30'000;
constexpr int kMaxSweeps = 3;
// What a replicated element of a resident weight costs, tried in turn (after 0) while the
// plan's resident weights exceed a device's memory (eindecomp_partition).
constexpr double kAtRestPrices[] = {1.0 / 64, 1.0 / 16, 1.0 / 4, 1, 4, 16, 64};

using Choice = std::pair<int, bool>;  // operand's candidate, aggregated straight into the need

struct OutputGroup {
  Parts output;
  double best = 0;  // the cheapest subtree cost of a candidate with this output partition
  int arg = 0;      // that candidate (the first such)
};

struct DpTables {
  std::vector<std::vector<std::vector<Choice>>> choice;  // [node][candidate][operand]
  std::vector<char> fixed;
};

void fix(const Graph& g, NodeId id, int c, const std::vector<std::vector<Parts>>& cands, DpTables& t,
         Partitioning& result) {
  t.fixed[id.index()] = 1;
  const Parts& p = cands[id.index()][static_cast<std::size_t>(c)];
  result.join[id.index()] = p;
  const Node& node = g.node(id);
  for (std::size_t i = 0; i < node.inputs.size(); ++i) {
    auto [q, into_need] = t.choice[id.index()][static_cast<std::size_t>(c)][i];
    NodeId child = node.inputs[i];
    if (q < 0 || t.fixed[child.index()]) continue;
    fix(g, child, q, cands, t, result);
    if (into_need) {
      Parts need = operand_partition(g, id, static_cast<int>(i), p);
      if (need != output_partition(g, child, result.join[child.index()])) result.output[child.index()] = need;
    }
  }
}

// The DP over the candidate partitions `cands` (one list per node, empty for nodes that
// are not planned). Trees are solved bottom-up; a tree's root is fixed when reached.
Partitioning solve_trees(const Graph& g, const std::vector<std::vector<Parts>>& cands, const DpCost& cost,
                         const std::vector<std::vector<NodeId>>& consumers) {
  const std::size_t n = g.size();
  std::vector<std::vector<double>> best(n);  // subtree cost per join candidate
  std::vector<double> free_cost(n, std::numeric_limits<double>::infinity());  // best aggregating candidate
  std::vector<int> free_arg(n, -1);
  std::vector<std::vector<OutputGroup>> groups(n);
  DpTables t;
  t.choice.resize(n);
  t.fixed.assign(n, 0);
  Partitioning result;
  result.join.assign(n, {});
  result.output.assign(n, {});

  auto in_tree = [&](NodeId child) { return is_planned(g, child) && consumers[child.index()].size() == 1; };
  for (NodeId id : g.ids()) {
    if (!is_planned(g, id)) continue;
    const Node& node = g.node(id);
    const auto& cs = cands[id.index()];
    best[id.index()].assign(cs.size(), 0);
    t.choice[id.index()].assign(cs.size(), std::vector<Choice>(node.inputs.size(), {-1, false}));
    // Per operand: the best cost of delivering each needed partition, memoised.
    std::vector<std::map<Parts, std::pair<double, Choice>>> memo(node.inputs.size());
    for (std::size_t c = 0; c < cs.size(); ++c) {
      double total = cost.join(g, id, cs[c]) + cost.aggregation(g, id, cs[c]);
      for (std::size_t i = 0; i < node.inputs.size(); ++i) {
        NodeId child = node.inputs[i];
        if (!is_planned(g, child) || node.kind == NodeKind::select) {
          if (is_planned(g, child) && in_tree(child)) {  // a select reads its operand as it is
            const auto& bc = best[child.index()];
            int arg = static_cast<int>(std::min_element(bc.begin(), bc.end()) - bc.begin());
            total += bc[static_cast<std::size_t>(arg)];
            t.choice[id.index()][c][i] = {arg, false};
          }
          continue;
        }
        Parts need = operand_partition(g, id, static_cast<int>(i), cs[c]);
        const double elems = static_cast<double>(elements(g.node(child).shape));
        if (!in_tree(child)) {  // solved earlier: its partition is fixed
          total += cost.repartition(elems, result.output_of(g, child), need);
          continue;
        }
        auto it = memo[i].find(need);
        if (it == memo[i].end()) {
          double m = free_cost[child.index()];  // aggregate straight into `need`
          Choice arg{free_arg[child.index()], true};
          for (const OutputGroup& o : groups[child.index()]) {
            double v = o.best + cost.repartition(elems, o.output, need);
            if (v < m) {
              m = v;
              arg = {o.arg, false};
            }
          }
          it = memo[i].emplace(need, std::make_pair(m, arg)).first;
        }
        total += it->second.first;
        t.choice[id.index()][c][i] = it->second.second;
      }
      best[id.index()][c] = total;
      if (cost.aggregates_into_need() && may_choose_output(g, id, consumers) && splits_aggregation(g, id, cs[c]) &&
          total < free_cost[id.index()]) {
        free_cost[id.index()] = total;
        free_arg[id.index()] = static_cast<int>(c);
      }
    }
    // The cheapest candidate per output partition, in candidate order of those
    // (iterating them with a strict < picks what iterating every candidate would).
    if (in_tree(id)) {
      std::map<Parts, std::size_t> at;
      auto& gs = groups[id.index()];
      for (std::size_t c = 0; c < cs.size(); ++c) {
        Parts out = output_partition(g, id, cs[c]);
        auto [it, fresh] = at.emplace(out, gs.size());
        if (fresh) {
          gs.push_back({std::move(out), best[id.index()][c], static_cast<int>(c)});
        } else if (best[id.index()][c] < gs[it->second].best) {
          gs[it->second].best = best[id.index()][c];
          gs[it->second].arg = static_cast<int>(c);
        }
      }
      std::sort(gs.begin(), gs.end(), [](const OutputGroup& a, const OutputGroup& b) { return a.arg < b.arg; });
    }
    // A tree root (several consumers, or none planned downstream): fix the tree now.
    if (!in_tree(id) || !is_planned(g, consumers[id.index()][0])) {
      const auto& b = best[id.index()];
      int arg = static_cast<int>(std::min_element(b.begin(), b.end()) - b.begin());
      fix(g, id, arg, cands, t, result);
    }
  }
  return result;
}

// Planned nodes whose result feeds more than one node, at least one of them planned.
bool is_shared(const Graph& g, NodeId id, const std::vector<std::vector<NodeId>>& consumers) {
  if (!is_planned(g, id) || consumers[id.index()].size() < 2) return false;
  for (NodeId c : consumers[id.index()])
    if (is_planned(g, c)) return true;
  return false;
}

class EinDecomp final : public Strategy {
 public:
  std::string name() const override { return "eindecomp"; }
  std::string help() const override {
    return "EinDecomp's dynamic program over trees, shared nodes solved jointly with their consumers: minimises "
           "elements replicated, aggregated and repartitioned (replicas of resident weights free while they fit in "
           "memory; with -m on several hosts: weighted by the bandwidth of the links they cross). With -m the DP's "
           "plan (or data-parallel's, where the graph has a batch to split and that is faster) is then refined on "
           "the machine: factor-of-two resplits of one einsum at a time (head and sequence splits x2 / /2 and the "
           "like; where the budget cannot hold one pass over them, those that lower the DP's own cost first), each "
           "lowered and simulated (flow, async), the fastest kept, within an amount of simulated work "
           "that depends on the size of one simulation of the DP's plan, w tasks and events: 14 M while w <= 200 k, "
           "falling as 1/w to 5 M at 560 k, never fewer than three simulations (deterministic, no clock); under "
           "round-robin, nodes of fewer blocks than devices spread over all of them where faster (tried first where "
           "the budget holds at least five simulations, and again for the plan the climb ends on); then, on what "
           "is left of the budget plus up to three simulations more (at most 2 M of work, none where that does not "
           "hold two), data-parallel's plan at batch 1 on a small graph where faster, and the einsum whose busiest "
           "aggregation site sends the most aggregated into a finer partition";
  }
  Partitioning partition(const Graph& g, const PlanOptions& o) const override { return eindecomp_partition(g, o); }
};

}  // namespace

double dp_total(const Graph& g, const Partitioning& p, const DpCost& cost) {
  double total = 0;
  for (NodeId id : g.ids()) {
    const Node& n = g.node(id);
    if (n.kind != NodeKind::einsum || p.join[id.index()].empty()) continue;
    const Parts& parts = p.join[id.index()];
    total += cost.join(g, id, parts) + cost.aggregation(g, id, parts);
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      NodeId child = n.inputs[i];
      if (!is_planned(g, child) || p.join[child.index()].empty()) continue;
      total += cost.repartition(static_cast<double>(elements(g.node(child).shape)), p.output_of(g, child),
                                operand_partition(g, id, static_cast<int>(i), parts));
    }
  }
  return total;
}

namespace {

// EinDecomp with the DAG step under `cost` (eindecomp.h).
Partitioning solve(const Graph& g, const PlanOptions& o, const DpCost& cost) {
  const int total_log2 = require_power_of_two("eindecomp", o);
  const auto consumers = g.consumers();
  std::vector<std::vector<Parts>> cands(g.size());
  for (NodeId id : g.ids()) {
    if (!is_planned(g, id)) continue;
    cands[id.index()] = node_candidates(g.join_shape(id), total_log2);
  }
  Partitioning best = solve_trees(g, cands, cost, consumers);
  double best_cost = dp_total(g, best, cost);

  // Shared nodes with few output partitions, and those partitions (in candidate order).
  std::vector<std::pair<NodeId, std::vector<Parts>>> shared;
  for (NodeId id : g.ids()) {
    if (!is_shared(g, id, consumers)) continue;
    std::vector<Parts> outs;
    for (const Parts& c : cands[id.index()]) {
      Parts out = output_partition(g, id, c);
      if (std::find(outs.begin(), outs.end(), out) == outs.end()) outs.push_back(out);
    }
    if (outs.size() > 1 && outs.size() <= kMaxJointCandidates) shared.emplace_back(id, std::move(outs));
  }
  std::size_t per_run = 0;
  for (const auto& c : cands) per_run += c.size();
  const int max_reruns = static_cast<int>(kRerunBudget / std::max<std::size_t>(1, per_run));
  int reruns = 0;
  std::vector<std::vector<Parts>> forced = cands;
  for (int sweep = 0; sweep < kMaxSweeps && !shared.empty(); ++sweep) {
    bool improved = false;
    for (const auto& [id, outs] : shared) {
      Parts chosen = best.output_of(g, id);
      for (const Parts& out : outs) {
        if (out == chosen) continue;
        if (reruns++ >= max_reruns) break;
        auto& fc = forced[id.index()];
        fc.clear();
        for (const Parts& c : cands[id.index()])
          if (output_partition(g, id, c) == out) fc.push_back(c);
        Partitioning p = solve_trees(g, forced, cost, consumers);
        double c = dp_total(g, p, cost);
        if (c < best_cost) {  // strict: the first cheapest in candidate order wins ties
          best_cost = c;
          best = std::move(p);
          improved = true;
        }
      }
      // Keep this node at its best partition while the others are tried.
      Parts keep = best.output_of(g, id);
      auto& fc = forced[id.index()];
      fc.clear();
      for (const Parts& c : cands[id.index()])
        if (output_partition(g, id, c) == keep) fc.push_back(c);
    }
    if (!improved || reruns > max_reruns) break;
  }
  fill_unplanned(g, best.join, best.output);
  return best;
}

}  // namespace

namespace {

// eindecomp_partition's DP, then the memory step of resident weights.
Partitioning solve_fitting(const Graph& g, const PlanOptions& o) {
  Partitioning p = solve(g, o, *make_dp_cost(g, o));
  if (o.weights != Weights::resident || !o.machine) return p;
  // Resident weights replicate for free but occupy memory on every holder: while they
  // exceed a device's memory, price their replication (a Lagrange multiplier on the
  // memory they take, which under round-robin is spread evenly) and solve again.
  const double fpb = flops_per_byte(o);
  for (double price : kAtRestPrices) {
    Decomposition d = place(g, p, o.devices, o.placement, fpb);
    make_resident(g, d);
    if (device_over_memory(g, d, *o.machine) < 0) break;
    p = solve(g, o, *make_dp_cost(g, o, price));
  }
  return p;
}

}  // namespace

Partitioning eindecomp_partition(const Graph& g, const PlanOptions& o) {
  Partitioning p = solve_fitting(g, o);
  if (!o.machine || !o.refine) return p;
  return simulated_best(g, o, p);
}

std::unique_ptr<Strategy> make_eindecomp() { return std::make_unique<EinDecomp>(); }

}  // namespace tessel::planner
