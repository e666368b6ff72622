// eindecomp -m's refinement by simulated makespan (eindecomp.h).
#include <algorithm>
#include <limits>
#include <optional>
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

constexpr double kSpreadRuns = 5;

class Refiner {
 public:
  Refiner(const Graph& g, const PlanOptions& o) : g_(g), o_(o), fpb_(flops_per_byte(o)) {}

  // Simulates `p`, placed under the options' placement (small nodes spread: place()),
  // unless it places like one simulated before, would not fit in memory, or the budget
  // is spent; true when it is the fastest so far (then kept).
  // `max_tasks` > 0: refused when it lowers into more tasks (LowerOptions::max_tasks).
  bool offer(const Partitioning& p, bool spread, std::int64_t max_tasks = 0) {
    if (spent()) return false;
    Decomposition d = place(g_, p, o_.devices, o_.placement, fpb_, spread);
    if (o_.weights == Weights::resident) {
      make_resident(g_, d);
      if (device_over_memory(g_, d, *o_.machine) >= 0) return false;
    }
    if (std::find(seen_.begin(), seen_.end(), d) != seen_.end()) return false;
    seen_.push_back(d);
    try {
      LowerOptions lo;
      lo.max_tasks = max_tasks;
      TaskGraph tg = lower(g_, d, lo);
      work_ += static_cast<double>(tg.size());
      sim::SimOptions so;  // flow network, async, longest-path priority, as `search`
      so.stop_after_s = best_s_;
      so.cancel = o_.cancel;
      sim::SimResult r = sim::simulate(tg, *o_.machine, so);
      work_ += static_cast<double>(r.events);
      last_ = std::max(last_, static_cast<double>(tg.size() + r.events));  // the largest so far
      if (simulations_++ == 0) {  // the DP's plan, simulated whole
        first_ = last_;
        first_tasks_ = static_cast<std::int64_t>(tg.size());
        budget_ = refine_budget(last_);
      }
      if (r.stopped || !(r.makespan_s < best_s_)) return false;
      best_s_ = r.makespan_s;
      best_ = p;
      best_spread_ = spread;
      best_d_ = std::move(d);
      return true;
    } catch (const Error&) {
      return false;  // a candidate the lowering (max_tasks: ResourceError) or the simulator refuses is not chosen
    }
  }
  // No further simulation fits: the work so far plus one more like the largest passes
  // it, or PlanOptions::cancel is set.
  [[nodiscard]] bool spent() const {
    return (simulations_ > 0 && work_ + last_ > budget_) || (o_.cancel && o_.cancel->load(std::memory_order_relaxed));
  }
  // The budget raised by `runs` simulations the size of the largest so far, at most by
  // `most` work; not at all where `most` does not hold two of them (one simulation alone
  // rarely gains there, and each takes the better part of a second: the LLaMA-65B block
  // with fetched weights on 1,024 devices, w = 1.9 M, went from 3.1 to 5.7 s wall with it,
  // idle, 2026-11-25).
  void extend(double runs, double most) {
    if (2 * last_ > most) return;
    budget_ = std::max(budget_, work_) + std::min(runs * last_, most);
  }
  [[nodiscard]] const Partitioning& best() const { return best_; }
  // The work and the tasks of the first simulation (the DP's plan).
  [[nodiscard]] double first_work() const { return first_; }
  // How many simulations the size of the DP plan's the budget holds.
  [[nodiscard]] double budget_runs() const { return first_ > 0 ? budget_ / first_ : 0; }
  [[nodiscard]] std::int64_t first_tasks() const { return first_tasks_; }
  [[nodiscard]] bool best_spread() const { return best_spread_; }
  [[nodiscard]] const Decomposition& best_decomposition() const { return best_d_; }
  // The fastest plan as a strategy returns it: where its small nodes are spread, the
  // devices of every computed node spelled out (place() leaves such nodes alone).
  [[nodiscard]] Partitioning result() const {
    Partitioning p = best_;
    if (!best_spread_) return p;
    p.devices.assign(g_.size(), {});
    p.agg_devices.assign(g_.size(), {});
    for (NodeId id : g_.ids()) {
      const NodeKind kind = g_.node(id).kind;
      if (kind == NodeKind::input || kind == NodeKind::fill) continue;  // placed at their first reader
      for (DeviceId dev : best_d_.plan(id).devices) p.devices[id.index()].push_back(dev.value);
      for (DeviceId dev : best_d_.plan(id).agg_devices) p.agg_devices[id.index()].push_back(dev.value);
    }
    return p;
  }

 private:
  const Graph& g_;
  const PlanOptions& o_;
  double fpb_;
  std::vector<Decomposition> seen_;
  Partitioning best_;
  bool best_spread_ = false;
  Decomposition best_d_;
  double best_s_ = std::numeric_limits<double>::infinity();
  double work_ = 0, last_ = 0, budget_ = 0, first_ = 0;
  std::int64_t first_tasks_ = 0;
  int simulations_ = 0;
};

// A factor of two moved from index position a of an einsum's join to position b; or,
// b == kFiner, the einsum's partials aggregated into a partition twice as fine along
// output index a as the one they are aggregated into now.
inline constexpr std::size_t kFiner = static_cast<std::size_t>(-1);
struct Move {
  NodeId id;
  std::size_t a = 0, b = 0;
  friend bool operator==(const Move&, const Move&) = default;
};

// The elements the busiest aggregation site of einsum `id` sends to other devices (its
// summed output blocks read by its consumers' blocks elsewhere) under `d`.
double busiest_site(const Graph& g, const Decomposition& d, NodeId id, const std::vector<NodeId>& consumers) {
  const OutputBlocks out = output_blocks(g, id, d.plan(id));
  std::vector<double> sent(static_cast<std::size_t>(d.num_devices), 0.0);
  for (const Read& read : reads_of(g, d, id, consumers))
    for (std::int64_t b : blocks_within(out.partition, read.region)) {
      const DeviceId site = out.devices[static_cast<std::size_t>(b)];
      Rect inter;
      if (site != read.device && intersect(read.region, out.partition.block(b), &inter))
        sent[site.index()] += static_cast<double>(inter.elements());
    }
  return *std::max_element(sent.begin(), sent.end());
}

}  // namespace

Partitioning simulated_best(const Graph& g, const PlanOptions& o, const Partitioning& dp) {
  Refiner r(g, o);
  (void)r.offer(dp, false);
  if (r.best().join.empty()) return dp;  // not simulated
  // Round-robin with the nodes of fewer blocks than devices spread over them (place()):
  // simulated where it moves a block (else it places like the plan above), and the
  // faster placement is the one the rest of the refinement uses.
  // Only where the budget holds at least kSpreadRuns simulations of the DP's plan: where
  // it holds three (the LLaMA-65B block with fetched weights on 1,024 devices), this one
  // would take the climb's only move (2.165 -> 2.288 ms there).
  if (o.placement == "round-robin" && r.budget_runs() >= kSpreadRuns) (void)r.offer(dp, true);
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
  Partitioning data_parallel;
  try {
    data_parallel = make_data_parallel()->partition(g, o);
  } catch (const Error&) {
    // a graph data-parallel cannot split: the DP's plan alone
  }
  if (batched && !data_parallel.join.empty()) (void)r.offer(data_parallel, r.best_spread());
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
  // `m`, a resplit, applied to the fastest plan so far; none where it does not apply.
  auto resplit = [&](const Move& m) -> std::optional<Partitioning> {
    const Shape js = g.join_shape(m.id);
    Partitioning p = r.best();
    Parts& parts = p.join[m.id.index()];
    if (std::max(m.a, m.b) >= js.size() || parts[m.a] % 2 != 0 || static_cast<std::int64_t>(parts[m.b]) * 2 > js[m.b])
      return std::nullopt;
    parts[m.a] /= 2;
    parts[m.b] *= 2;
    if (!p.output.empty()) p.output[m.id.index()].clear();
    fill_unplanned(g, p.join, p.output);
    return p;
  };
  // `m` applied to the fastest plan so far and simulated; true when it is faster.
  auto attempt = [&](const Move& m) {
    if (m.b != kFiner) {
      const auto p = resplit(m);
      return p && r.offer(*p, r.best_spread());
    }
    const Shape js = g.join_shape(m.id);
    Partitioning p = r.best();
    const Parts& join = p.join[m.id.index()];
    const auto out_rank = static_cast<std::size_t>(g.out_rank(m.id));
    if (m.a >= out_rank || !splits_aggregation(g, m.id, join)) return false;
    if (p.output.empty()) p.output.assign(g.size(), {});
    Parts& out = p.output[m.id.index()];
    if (out.empty()) out.assign(join.begin(), join.begin() + static_cast<std::ptrdiff_t>(out_rank));
    std::int64_t blocks = 1;
    for (int x : out) blocks *= x;
    if (static_cast<std::int64_t>(out[m.a]) * 2 > js[m.a] ||
        blocks * 2 > static_cast<std::int64_t>(o.devices) * o.blocks_per_device)
      return false;
    out[m.a] *= 2;
    return r.offer(p, r.best_spread());
  };
  // Where the budget holds fewer simulations of the DP's plan than the fixed order has
  // moves for it, the climb cannot finish one pass and what it tries first decides the
  // result: there the first pass begins with the resplits that lower the DP's own cost
  // of the plan (make_dp_cost, dp_total), the most first. The DP's plan is not always a
  // local minimum of that cost: its DAG step runs out of reruns on large graphs before it
  // reaches the later shared nodes (the LLaMA-65B block on 64–1,024 devices: the FFN's
  // norm, split 16 ways along the model dimension where its consumers read it in 2,
  // costs 3–8% more than split along the sequence instead). Such a move is a likely
  // gain, yet it sits deep in the fixed order (elementwise, few flops): on 1,024 devices
  // with resident weights it took the climb from 0.546 to 0.522 ms as its first move, and
  // the refinement ended at 0.311 ms instead of 0.330. Where the budget holds a whole
  // pass, the order is left as it was (one pass reaches every move anyway, and the
  // climb's long path is sensitive to its first steps: on 64 devices the same start
  // ended 1% behind).
  std::vector<Move> first;
  std::vector<std::pair<Move, Partitioning>> valid;
  for (const Move& m : fixed)
    if (auto p = resplit(m)) valid.emplace_back(m, std::move(*p));
  if (r.budget_runs() < static_cast<double>(valid.size())) {
    const auto cost = make_dp_cost(g, o);
    const double base = dp_total(g, r.best(), *cost);
    std::vector<std::pair<double, Move>> lower;
    for (const auto& [m, p] : valid)
      if (const double c = dp_total(g, p, *cost); c < base) lower.emplace_back(c, m);
    std::stable_sort(lower.begin(), lower.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [c, m] : lower) first.push_back(m);
  }
  std::vector<Move> gained;  // moves that gained, the latest first
  for (bool improved = true; improved && !r.spent();) {
    improved = false;
    std::vector<Move> pass = gained;
    for (const Move& m : first)
      if (std::find(pass.begin(), pass.end(), m) == pass.end()) pass.push_back(m);
    first.clear();
    for (const Move& m : fixed)
      if (std::find(pass.begin(), pass.end(), m) == pass.end()) pass.push_back(m);
    for (std::size_t i = 0; i < pass.size() && !r.spent(); ++i) {
      if (!attempt(pass[i])) continue;
      improved = true;
      std::erase(gained, pass[i]);
      gained.insert(gained.begin(), pass[i]);
    }
  }
  // What follows runs on an extension of the budget: kRefineFinish simulations the size
  // of the largest so far, at most kRefineFinishWork of work. First the placement decided
  // again for the plan the climb ended on: the other of round-robin with and without the
  // spread (the climb kept the one faster for the DP's plan).
  r.extend(kRefineFinish, kRefineFinishWork);
  if (o.placement == "round-robin") (void)r.offer(r.best(), !r.best_spread());
  // At batch 1 data-parallel splits the sequence instead, which on a small graph can be
  // far faster than anything the climb reaches from the DP's plan (the tiny LLaMA block
  // on 8 H100s: 3.5 against 20.5 µs, all latency). It is offered here, after the climb
  // (so that the climb's path is the same whether or not it wins), while one simulation
  // of the DP's plan is small (at most kRefineSmall of work, never where a simulation
  // takes seconds) and as long as it lowers into at most twice the DP's plan's tasks.
  if (!batched && !data_parallel.join.empty() && r.first_work() <= kRefineSmall)
    (void)r.offer(data_parallel, false, 2 * r.first_tasks());
  // Then the einsum whose busiest aggregation site sends the most (busiest_site) has its
  // partials aggregated into a finer partition (EinDecomp's post-aggregation partition),
  // one output index after another, the first that gains kept, for up to
  // kRefineFinishRounds einsums in turn (one where no index gains is set aside and the
  // next busiest tried). Round-robin sums each output block on its first
  // partial's device, so an einsum of P partials has only blocks/P sites, each sending
  // the whole block to every reader; aggregated twice as fine, twice the sites share
  // the sends. The climb's resplits cannot reach it (each clears the aggregation
  // target). On the LLaMA-65B block (resident weights) it was the largest single gain
  // left on 1,024 devices: q's 256 sites became 1,024 in two rounds (0.372 → 0.330 ms
  // before the climb tried the DP-cost-lowering moves first, 0.348 → 0.311 ms since);
  // on 64 and 256 devices the scores' sites (0.662 → 0.651, 0.400 → 0.394 ms).
  const auto consumers = g.consumers();
  std::vector<NodeId> tried;  // einsums whose finer aggregation gained nothing
  for (int round = 0; round < kRefineFinishRounds && !r.spent(); ++round) {
    NodeId busiest;
    double most = 0;
    for (const auto& [f, id] : order) {
      if (!splits_aggregation(g, id, r.best().join[id.index()]) ||
          std::find(tried.begin(), tried.end(), id) != tried.end())
        continue;
      const double sent = busiest_site(g, r.best_decomposition(), id, consumers[id.index()]);
      if (sent > most) most = sent, busiest = id;
    }
    if (most == 0) break;
    bool gain = false;
    for (std::size_t a = 0; a < static_cast<std::size_t>(g.out_rank(busiest)) && !gain && !r.spent(); ++a)
      gain = attempt({busiest, a, kFiner});
    if (!gain) tried.push_back(busiest);
  }
  return r.result();
}

}  // namespace tessel::planner
