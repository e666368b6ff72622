// eindecomp -m's refinement by simulated makespan (eindecomp.h).
#include <algorithm>
#include <limits>
#include <utility>

#include "core/error.h"
#include "core/task_graph.h"
#include "planner/eindecomp.h"
#include "planner/placement.h"
#include "planner/residency.h"
#include "sim/simulator.h"

namespace tessel::planner {
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
      if (simulations_++ == 0) budget_ = std::max(kRefineWork, kRefineRuns * last_);
      if (r.stopped || !(r.makespan_s < best_s_)) return false;
      best_s_ = r.makespan_s;
      best_ = p;
      return true;
    } catch (const Error&) {
      return false;  // a candidate the lowering or the simulator refuses is not chosen
    }
  }
  // No further simulation fits: the work so far plus one more like the last passes it,
  // or PlanOptions::cancel is set.
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

}  // namespace

Partitioning simulated_best(const Graph& g, const PlanOptions& o, const Partitioning& dp) {
  Refiner r(g, o);
  (void)r.offer(dp);
  if (r.best().join.empty()) return dp;  // not simulated
  // Hill climbing: a factor of two moved from one index of an einsum to another (head and
  // sequence splits ×2 / ÷2 and the like), the faster plan kept. Each pass tries every
  // pair of index positions (a, b) in order, and for each every einsum, most flops first:
  // the same kind of move across the graph before the next kind. Passes repeat while one
  // gains, until the work budget is spent.
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
  for (bool improved = true; improved && !r.spent();) {
    improved = false;
    for (std::size_t a = 0; a < rank; ++a)
      for (std::size_t b = 0; b < rank; ++b)
        for (std::size_t i = 0; i < order.size() && a != b && !r.spent(); ++i) {
          const NodeId id = order[i].second;
          const Shape js = g.join_shape(id);
          Partitioning p = r.best();
          Parts& parts = p.join[id.index()];
          if (std::max(a, b) >= js.size() || parts[a] % 2 != 0 || static_cast<std::int64_t>(parts[b]) * 2 > js[b])
            continue;
          parts[a] /= 2;
          parts[b] *= 2;
          if (!p.output.empty()) p.output[id.index()].clear();
          fill_unplanned(g, p.join, p.output);
          if (r.offer(p)) improved = true;
        }
  }
  return r.best();
}

}  // namespace tessel::planner
