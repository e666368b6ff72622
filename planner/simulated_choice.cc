// eindecomp -m's refinement by simulated makespan (eindecomp.h).
#include <algorithm>
#include <limits>
#include <utility>

#include "core/error.h"
#include "core/task_graph.h"
#include "planner/baselines.h"
#include "planner/eindecomp.h"
#include "planner/placement.h"
#include "planner/residency.h"
#include "sim/simulator.h"

namespace tessel::planner {

double refine_budget(double dp_work) {
  const double w = std::max(dp_work, 1.0);
  const double scaled = std::clamp(kRefineWorkSmall * kRefineSmall / w, kRefineWork, kRefineWorkSmall);
  return std::max(kRefineRuns * dp_work, scaled);
}

namespace {

using namespace detail;

class Refiner {
 public:
  Refiner(const Graph& g, const PlanOptions& o) : g_(g), o_(o), fpb_(flops_per_byte(o)) {}

  // Simulates `p` unless it places like one simulated before, would not fit in memory,
  // or the budget is spent; true when it is the fastest so far (then kept).
  bool offer(const Partitioning& p) {
    if (spent()) return false;
    Decomposition d = place(g_, p, o_.devices, o_.placement, fpb_);
    if (o_.weights == Weights::resident) {
      make_resident(g_, d);
      if (device_over_memory(g_, d, *o_.machine) >= 0) return false;
    }
    if (std::find(seen_.begin(), seen_.end(), d) != seen_.end()) return false;
    seen_.push_back(d);
    try {
      TaskGraph tg = lower(g_, d);
      work_ += static_cast<double>(tg.size());
      sim::SimOptions so;  // flow network, async, longest-path priority, as `search`
      so.stop_after_s = best_s_;
      so.cancel = o_.cancel;
      sim::SimResult r = sim::simulate(tg, *o_.machine, so);
      work_ += static_cast<double>(r.events);
      last_ = std::max(last_, static_cast<double>(tg.size() + r.events));  // the largest so far
      if (simulations_++ == 0) budget_ = refine_budget(last_);  // the DP's plan, simulated whole
      if (r.stopped || !(r.makespan_s < best_s_)) return false;
      best_s_ = r.makespan_s;
      best_ = p;
      return true;
    } catch (const Error&) {
      return false;  // a candidate the lowering or the simulator refuses is not chosen
    }
  }
  // No further simulation fits: the work so far plus one more like the largest passes
  // it, or PlanOptions::cancel is set.
  [[nodiscard]] bool spent() const {
    return (simulations_ > 0 && work_ + last_ > budget_) || (o_.cancel && o_.cancel->load(std::memory_order_relaxed));
  }
  [[nodiscard]] const Partitioning& best() const { return best_; }

 private:
  const Graph& g_;
  const PlanOptions& o_;
  double fpb_;
  std::vector<Decomposition> seen_;
  Partitioning best_;
  double best_s_ = std::numeric_limits<double>::infinity();
  double work_ = 0, last_ = 0, budget_ = 0;
  int simulations_ = 0;
};

// A factor of two moved from index position a of an einsum's join to position b.
struct Move {
  NodeId id;
  std::size_t a = 0, b = 0;
  friend bool operator==(const Move&, const Move&) = default;
};

}  // namespace

Partitioning simulated_best(const Graph& g, const PlanOptions& o, const Partitioning& dp) {
  Refiner r(g, o);
  (void)r.offer(dp);
  if (r.best().join.empty()) return dp;  // not simulated
  // The batch split whole (data-parallel's plan), where the graph has a batch to split:
  // single-einsum moves cannot reach it from the DP's plan when that splits attention and
  // the FFN differently (each step alone adds a repartition), yet on one host at batch 2
  // and 4 it is a few per cent faster. The climb goes on from the faster of the two.
  bool batched = false;
  for (NodeId id : g.ids()) {
    const Node& n = g.node(id);
    if (n.kind == NodeKind::input && n.index_roles.batch >= 0 &&
        n.shape[static_cast<std::size_t>(n.index_roles.batch)] >= 2)
      batched = true;
  }
  if (batched) {
    try {
      (void)r.offer(make_data_parallel()->partition(g, o));
    } catch (const Error&) {
      // a graph data-parallel cannot split: the DP's plan alone
    }
  }
  // Hill climbing: a factor of two moved from one index of an einsum to another (head and
  // sequence splits ×2 / ÷2 and the like), the faster plan kept (first improvement).
  // The fixed order: every pair of index positions (a, b) in turn, and for each every
  // einsum, most flops first — the same kind of move across the graph before the next
  // kind. Each pass tries first the moves that gained in earlier passes, the latest
  // first (a move that helped once, on a plan that has changed since, often helps
  // again: the elementwise nodes between two resplit einsums follow them one factor of
  // two at a time), then the rest in the fixed order. Passes repeat while one gains,
  // until the work budget is spent.
  std::vector<std::pair<double, NodeId>> order;
  std::size_t rank = 0;
  for (NodeId id : g.ids()) {
    if (g.node(id).kind != NodeKind::einsum) continue;
    double f = 1;
    for (std::int64_t e : g.join_shape(id)) f *= static_cast<double>(e);
    order.emplace_back(f, id);
    rank = std::max(rank, g.join_shape(id).size());
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<Move> fixed;
  for (std::size_t a = 0; a < rank; ++a)
    for (std::size_t b = 0; b < rank; ++b)
      for (std::size_t i = 0; i < order.size() && a != b; ++i) fixed.push_back({order[i].second, a, b});
  // `m` applied to the fastest plan so far and simulated; true when it is faster.
  auto attempt = [&](const Move& m) {
    const Shape js = g.join_shape(m.id);
    Partitioning p = r.best();
    Parts& parts = p.join[m.id.index()];
    if (std::max(m.a, m.b) >= js.size() || parts[m.a] % 2 != 0 || static_cast<std::int64_t>(parts[m.b]) * 2 > js[m.b])
      return false;
    parts[m.a] /= 2;
    parts[m.b] *= 2;
    if (!p.output.empty()) p.output[m.id.index()].clear();
    fill_unplanned(g, p.join, p.output);
    return r.offer(p);
  };
  std::vector<Move> gained;  // moves that gained, the latest first
  for (bool improved = true; improved && !r.spent();) {
    improved = false;
    std::vector<Move> pass = gained;
    for (const Move& m : fixed)
      if (std::find(gained.begin(), gained.end(), m) == gained.end()) pass.push_back(m);
    for (std::size_t i = 0; i < pass.size() && !r.spent(); ++i) {
      if (!attempt(pass[i])) continue;
      improved = true;
      std::erase(gained, pass[i]);
      gained.insert(gained.begin(), pass[i]);
    }
  }
  return r.best();
}

}  // namespace tessel::planner
