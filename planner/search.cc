// The simulator-guided strategy (search.h).
#include "planner/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <condition_variable>
#include <mutex>
#include <random>
#include <stop_token>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "core/task_graph.h"
#include "planner/eindecomp.h"
#include "planner/placement.h"
#include "planner/residency.h"
#include "sim/simulator.h"

namespace tessel::planner {
namespace {

using namespace detail;
using Clock = std::chrono::steady_clock;

// Starts, in the order they are simulated (eindecomp first: the budget may allow one).
const char* const kStarts[] = {"eindecomp", "split-largest", "megatron", "dp-tp", "sqrt-split", "data-parallel",
                               "block-per-device"};
constexpr double kT0 = 0.02;
constexpr int kMaxIdleDraws = 10'000;  // moves in a row that change nothing: stop

class Searcher {
 public:
  Searcher(const Graph& g, const PlanOptions& o) : g_(g), o_(o), rng_(o.seed), t0_(Clock::now()) {
    consumers_ = g.consumers();
    for (NodeId id : g.ids())
      if (g.node(id).kind == NodeKind::einsum) einsums_.push_back(id);
    per_host_ = 1;
    const Machine& m = *o.machine;
    while (per_host_ < o.devices && m.device(DeviceId(per_host_)).host == m.device(DeviceId(0)).host) ++per_host_;
  }

  Plan run(SearchReport& rep) {
    // The budget as a flag the simulator reads: a simulation under way when it runs out
    // is abandoned rather than finished (a start at 1,024 devices can take minutes).
    std::jthread watchdog([this](std::stop_token stop) {
      std::mutex mu;
      std::condition_variable_any cv;
      std::unique_lock lock(mu);
      const auto deadline =
          t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(o_.budget_s, 1e6)));
      if (!cv.wait_until(lock, stop, deadline, [] { return false; }) && !stop.stop_requested()) cancel_ = true;
    });
    // Starts: each strategy that can serve the request. Planned first, then simulated
    // eindecomp first (the planner's own answer, usually the fastest: the bound for the
    // others) and the rest by their analytic cost, cheapest first; each simulation stops
    // as soon as its clock passes the best makespan so far (it cannot be the start).
    struct Start {
      const char* strategy;
      Plan plan;
    };
    std::vector<Start> starts;
    PlanOptions bounded = o_;
    bounded.cancel = &cancel_;  // eindecomp's refinement stops with the budget
    for (const char* s : kStarts) {
      if (cancel_ && !starts.empty()) break;
      try {
        starts.push_back({s, plan(g_, s, bounded)});
      } catch (const Error&) {
        continue;  // e.g. n·k not a power of two for eindecomp
      }
      for (const char* placement : {"round-robin", "greedy"}) {
        if (placement == o_.placement || cancel_) continue;  // past the budget no move is tried
        try {
          PlanOptions alt = o_;
          alt.placement = placement;
          alt.refine = false;  // pooled for `adopt` only: the DP's plan will do
          pool_.push_back(plan(g_, s, alt).decomposition);
        } catch (const Error&) {
        }
      }
      pool_.push_back(starts.back().plan.decomposition);  // pooled for `adopt` whether simulated or not
    }
    std::stable_sort(starts.begin(), starts.end(), [](const Start& a, const Start& b) {
      const bool ea = std::string_view(a.strategy) == "eindecomp", eb = std::string_view(b.strategy) == "eindecomp";
      if (ea != eb) return ea;  // eindecomp first, where it could be planned
      return a.plan.total_cost() < b.plan.total_cost();
    });
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const Start& s = starts[i];
      if (o_.progress) {
        char buf[224];
        std::snprintf(buf, sizeof buf, "search: simulating start %zu of %zu, %s, at %.1f s%s", i + 1, starts.size(),
                      s.strategy, elapsed(), budget_text().c_str());
        o_.progress(buf);
      }
      // Starts are simulated whatever the budget until one succeeds (one that the lowering
      // or the simulator refuses does not count); the others stop with it. The first one
      // lowered sets the limit on the others' task graphs and on the moves'.
      const bool first = !std::isfinite(best_s_);
      Outcome r = evaluate(s.plan.decomposition, rep, best_s_, /*cancellable=*/!first, first ? 0 : rep.max_tasks);
      if (r.kind == Outcome::cancelled) {
        rep.budget_reached = true;
        break;
      }
      // The largest task graph a later start or a move may lower into (larger ones
      // are not simulated): PlanOptions::search_max_tasks (1.5 M), or twice the first
      // start's where that is more. Lowered graphs take ~0.5 KB a task and the simulator
      // about as much again, so this bounds the memory whatever the budget; without it
      // `block-per-device` at 1,024 devices (tens of millions of tasks, minutes to lower)
      // took 14 GB.
      if (first && r.tasks > 0) rep.max_tasks = std::max(o_.search_max_tasks, 2 * r.tasks);
      if (r.kind == Outcome::too_large) rep.starts_too_large.emplace_back(s.strategy);
      if (r.kind == Outcome::above) rep.starts_stopped[s.strategy] = r.makespan_s;
      if (r.kind != Outcome::done) continue;
      rep.starts[s.strategy] = r.makespan_s;
      if (r.makespan_s < best_s_) {
        best_s_ = r.makespan_s;
        best_ = s.plan.decomposition;
        rep.start_strategy = s.strategy;
        rep.start_makespan_s = r.makespan_s;
      }
    }
    if (!std::isfinite(best_s_)) fail("strategy 'search': no start could be planned and simulated");
    progress(rep, "start");
    Decomposition cur = best_;
    double cur_s = best_s_;
    int k = 0, idle = 0;
    while (true) {
      if (o_.search_evaluations > 0 && rep.evaluations >= o_.search_evaluations) break;
      if (elapsed() >= o_.budget_s) {
        rep.budget_reached = true;
        break;
      }
      Decomposition next = cur;
      std::string kind = move(next);
      // Weights at rest follow the blocks that read them, as plan() makes them.
      if (!kind.empty() && o_.weights == Weights::resident) make_resident(g_, next);
      if (kind.empty() || next == cur) {  // nothing changed: no simulation spent
        if (++idle == kMaxIdleDraws) break;  // nothing left to try (one device, say)
        continue;
      }
      idle = 0;
      // Metropolis: a slower move is kept when u < exp(−Δ / (T·current)), that is when
      // its makespan is below current·(1 − T·ln u). u is drawn first, so the simulation
      // stops at that threshold: past it the move is refused whatever its makespan.
      const double temp = kT0 / (1.0 + k++ / 16.0);
      const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
      const double keep_below = cur_s * (1 - temp * std::log(u));
      Outcome r = evaluate(next, rep, keep_below, true, rep.max_tasks);
      if (r.kind == Outcome::cancelled) {
        rep.budget_reached = true;
        break;
      }
      auto& mv = rep.moves[kind];
      ++mv.tried;
      if (r.kind != Outcome::done || !(r.makespan_s < keep_below)) continue;
      const double t = r.makespan_s;
      ++mv.accepted;
      cur = std::move(next);
      cur_s = t;
      if (t < best_s_) {
        ++mv.improved;
        mv.gain_s += best_s_ - t;
        best_s_ = t;
        best_ = cur;
        progress(rep, kind);
      }
    }
    rep.final_makespan_s = best_s_;
    rep.elapsed_s = elapsed();
    progress(rep, "done");
    Plan result;
    result.strategy = "search";
    result.decomposition = best_;
    return result;
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  struct Outcome {
    enum Kind : std::uint8_t { done, above, cancelled, refused, too_large } kind = refused;
    double makespan_s = 0;  // done: the makespan; above: the clock when stopped, past the bound
    std::int64_t tasks = 0;  // done, above: the lowered graph's tasks
  };

  // Lowers `d` into at most `max_tasks` tasks (0: any number; too_large past it) and
  // simulates it, the simulation stopped as soon as its clock passes `bound` (above).
  // When `cancellable`, the lowering and the simulation stop when the budget runs out
  // (cancelled). refused: the lowering or the simulator refuses it. Nothing of the
  // lowered graph or the simulation outlives the call: memory stays that of one.
  Outcome evaluate(const Decomposition& d, SearchReport& rep, double bound, bool cancellable,
                   std::int64_t max_tasks) {
    if (cancellable && cancel_) return {Outcome::cancelled};
    Outcome r;
    try {
      LowerOptions lo;
      lo.max_tasks = max_tasks;
      if (cancellable) lo.cancel = &cancel_;
      TaskGraph tg = lower(g_, d, lo);
      r.tasks = static_cast<std::int64_t>(tg.size());
      sim::SimOptions so;  // flow network, async, longest-path priority
      so.stop_after_s = bound;
      if (cancellable) so.cancel = &cancel_;
      sim::SimResult res = sim::simulate(tg, *o_.machine, so);
      if (res.cancelled) return {Outcome::cancelled};
      r.kind = res.stopped ? Outcome::above : Outcome::done;
      r.makespan_s = res.makespan_s;
    } catch (const ResourceError&) {
      r.kind = Outcome::too_large;  // the only ResourceError lower() and simulate() throw here: max_tasks
    } catch (const Error&) {
      // Cancelled while lowering, or a move the lowering or the simulator refuses (not taken).
      if (cancellable && cancel_) return {Outcome::cancelled};
    }
    ++rep.evaluations;
    if (r.kind == Outcome::above) ++rep.stopped_by_bound;
    if (r.kind == Outcome::too_large) ++rep.too_large;
    return r;
  }

  void progress(const SearchReport& rep, const std::string& what) const {
    if (!o_.progress) return;
    char buf[320];
    std::snprintf(buf, sizeof buf, "search: %s: best %.4g ms (start %s %.4g ms), %d simulations in %.1f s%s",
                  what.c_str(), best_s_ * 1e3, rep.start_strategy.c_str(), rep.start_makespan_s * 1e3,
                  rep.evaluations, elapsed(), budget_text().c_str());
    o_.progress(buf);
  }
  // " of B s", " of N simulations" (no clock: --budget-simulations alone), or both.
  [[nodiscard]] std::string budget_text() const {
    const bool clock = o_.budget_s < 1e6;
    std::string t;
    if (clock) {
      char b[64];
      std::snprintf(b, sizeof b, " of %.1f s", o_.budget_s);
      t = b;
    }
    if (o_.search_evaluations > 0)
      t += std::string(clock ? " or " : " of ") + std::to_string(o_.search_evaluations) + " simulations";
    return t;
  }

  // One random move on `d`; its kind, or "" when none applies to the node drawn.
  std::string move(Decomposition& d) {
    if (einsums_.empty()) return "";
    NodeId id = einsums_[std::uniform_int_distribution<std::size_t>(0, einsums_.size() - 1)(rng_)];
    NodePlan& np = d.nodes[id.index()];
    const int r = static_cast<int>(std::uniform_int_distribution<int>(0, 99)(rng_));
    if (r < 40) {  // resplit
      Parts p = np.partition.parts();
      const Shape js = g_.join_shape(id);
      std::vector<int> from, to;
      for (std::size_t j = 0; j < p.size(); ++j) {
        if (p[j] % 2 == 0) from.push_back(static_cast<int>(j));
        if (static_cast<std::int64_t>(p[j]) * 2 <= js[j]) to.push_back(static_cast<int>(j));
      }
      if (from.empty() || to.empty()) return "";
      int a = from[std::uniform_int_distribution<std::size_t>(0, from.size() - 1)(rng_)];
      int b = to[std::uniform_int_distribution<std::size_t>(0, to.size() - 1)(rng_)];
      if (a == b) return "";
      p[static_cast<std::size_t>(a)] /= 2;
      p[static_cast<std::size_t>(b)] *= 2;
      NodePlan fresh;
      fresh.partition = Partition::even(js, p);
      for (std::int64_t blk = 0; blk < fresh.partition.num_blocks(); ++blk)
        fresh.devices.emplace_back(static_cast<std::int32_t>(blk % d.num_devices));
      np = std::move(fresh);
      follow(d, id);
      return "resplit";
    }
    if (r < 60) {  // adopt
      if (pool_.empty()) return "";
      const Decomposition& other = pool_[std::uniform_int_distribution<std::size_t>(0, pool_.size() - 1)(rng_)];
      if (other.nodes[id.index()] == np) return "";
      np = other.nodes[id.index()];
      follow(d, id);
      return "adopt";
    }
    const std::int64_t blocks = static_cast<std::int64_t>(np.devices.size());
    if (r < 80) {  // swap
      if (blocks < 2) return "";
      auto pick = std::uniform_int_distribution<std::int64_t>(0, blocks - 1);
      std::int64_t x = pick(rng_), y = pick(rng_);
      if (np.devices[static_cast<std::size_t>(x)] == np.devices[static_cast<std::size_t>(y)]) return "";
      std::swap(np.devices[static_cast<std::size_t>(x)], np.devices[static_cast<std::size_t>(y)]);
      return "swap";
    }
    // shift: by one device, or by a host's worth of devices
    if (d.num_devices < 2) return "";
    const int by = (rng_() & 1) && per_host_ < d.num_devices ? per_host_ : 1;
    for (DeviceId& dev : np.devices) dev = DeviceId((dev.value + by) % d.num_devices);
    for (DeviceId& dev : np.agg_devices) dev = DeviceId((dev.value + by) % d.num_devices);
    return "shift";
  }

  // After `id` changed: the leaves it is the first consumer of and the outputs reading
  // it take the partition it implies (as strategies fill them), blocks round-robin; an
  // aggregation target that no longer applies is dropped.
  void follow(Decomposition& d, NodeId id) {
    NodePlan& np = d.nodes[id.index()];
    if (np.output && !splits_aggregation(g_, id, np.partition.parts())) {
      np.output.reset();
      np.agg_devices.clear();
    }
    std::vector<Parts> parts(g_.size()), outputs(g_.size());
    for (NodeId n : g_.ids()) {
      parts[n.index()] = d.nodes[n.index()].partition.parts();
      if (d.nodes[n.index()].output) outputs[n.index()] = d.nodes[n.index()].output->parts();
    }
    fill_unplanned(g_, parts, outputs);
    for (NodeId n : g_.ids()) {
      const Node& node = g_.node(n);
      if (is_planned(g_, n)) continue;
      const bool depends = std::find(node.inputs.begin(), node.inputs.end(), id) != node.inputs.end() ||
                           (!consumers_[n.index()].empty() && consumers_[n.index()][0] == id);
      if (!depends || parts[n.index()] == d.nodes[n.index()].partition.parts()) continue;
      NodePlan fresh;
      fresh.partition = Partition::even(g_.join_shape(n), parts[n.index()]);
      for (std::int64_t blk = 0; blk < fresh.partition.num_blocks(); ++blk)
        fresh.devices.emplace_back(static_cast<std::int32_t>(blk % d.num_devices));
      d.nodes[n.index()] = std::move(fresh);
    }
  }

  const Graph& g_;
  const PlanOptions& o_;
  std::mt19937_64 rng_;
  Clock::time_point t0_;
  std::vector<std::vector<NodeId>> consumers_;
  std::vector<NodeId> einsums_;
  std::vector<Decomposition> pool_;
  int per_host_ = 1;
  Decomposition best_;
  double best_s_ = std::numeric_limits<double>::infinity();
  std::atomic<bool> cancel_{false};  // the budget has run out (set by run()'s watchdog)
};

class Search final : public Strategy {
 public:
  std::string name() const override { return "search"; }
  std::string help() const override {
    return "simulator-guided: the fastest of eindecomp and the baselines on the machine (-m, flow), improved by "
           "simulated annealing over partitions and block placements within --budget-s, or --budget-simulations N (then the same --seed and N give the same plan, bit for bit)";
  }
  Partitioning partition(const Graph&, const PlanOptions&) const override {
    fail("strategy 'search' is planned whole by plan()");  // it places blocks itself
  }
};

}  // namespace

Plan search_plan(const Graph& g, const PlanOptions& o, SearchReport* report) {
  if (!o.machine)
    fail("strategy 'search' needs a machine to simulate on (-m PRESET or a machine JSON file)");
  if (o.machine->num_devices() < o.devices)
    fail("strategy 'search': machine '", o.machine->name, "' has ", o.machine->num_devices(),
         " devices, fewer than the ", o.devices, " asked for");
  if (!(o.budget_s > 0) || !std::isfinite(o.budget_s))
    fail("strategy 'search': the budget must be a positive number of seconds, not ", o.budget_s);
  SearchReport local;
  SearchReport& rep = report ? *report : local;
  rep = {};
  Searcher s(g, o);
  Plan p = s.run(rep);
  p.search = std::make_shared<const SearchReport>(rep);
  // The analytic cost of what was found, node by node, as for every strategy.
  Partitioning parts;
  for (NodeId id : g.ids()) {
    const NodePlan& np = p.decomposition.plan(id);
    parts.join.push_back(np.partition.parts());
    parts.output.push_back(np.output ? np.output->parts() : Parts{});
  }
  p.costs = evaluate(g, parts, input_prices(g, o.weights));
  if (o.weights == Weights::resident) check_resident_memory(g, p.decomposition, *o.machine);
  p.idle_devices = idle_devices(g, p.decomposition);
  return p;
}

std::unique_ptr<Strategy> make_search() { return std::make_unique<Search>(); }

}  // namespace tessel::planner
