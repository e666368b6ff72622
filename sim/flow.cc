// flow network model: max-min fair sharing by progressive filling, recomputed per
// connected component of the flows and the *binding* links a change touches.
//
// A link is binding while the flows on it could together exceed its bandwidth: the sum
// of their upper bounds (each flow's route bandwidth / slowdown, rounded up to whole
// bytes/s) is above it (rounded down). A link that is not binding can never be full, so
// it neither joins flows into one component nor takes part in the filling; instead every
// flow with a non-binding link on its route is capped at its upper bound. The feasible
// rates are the same set either way (a flow never outruns its route's slowest link, and a
// non-binding link's flows cannot together exceed it), so the max-min fair rates are the
// same. In a full-bisection fat-tree the switch links are never binding and the
// components shrink to the flows that share a NIC or an NVLink; with oversubscription
// only the links that are actually over-subscribed at the moment join components.
//
// All changes at one time (starts, finishes, slowdowns) are settled by one refill when
// the clock moves on or next_time() is asked: due() tells the caller whether advance()
// has finishes at a time without refilling first (a finish at `now` was scheduled with
// the rates that held until `now`, so changes made at `now` cannot move it).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "sim/network.h"

namespace tessel::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

class Flow final : public NetworkModel {
 public:
  explicit Flow(const NetworkContext& ctx)
      : routes_(ctx.routes),
        stride_(std::max<std::int32_t>(ctx.routes.max_length, 1)),
        transfers_(static_cast<std::size_t>(ctx.max_transfers)),
        links_(ctx.machine.links.size()),
        pos_(transfers_.size() * static_cast<std::size_t>(stride_), -1),
        with_latency_(!ctx.caller_adds_latency) {
    for (std::size_t l = 0; l < links_.size(); ++l) {
      const double bw = ctx.machine.links[l].bytes_per_s;
      links_[l].bytes_per_s = bw;
      links_[l].cap_floor = bw < static_cast<double>(kNoBound) ? static_cast<std::int64_t>(std::floor(bw))
                                                                : std::numeric_limits<std::int64_t>::max();
    }
  }

  std::string_view name() const override { return "flow"; }

  void start(std::int32_t id, std::int32_t route, std::int64_t bytes, double slowdown, SimTime now) override {
    catch_up(now);
    Transfer& t = at(id);
    assert(t.state == State::idle || t.state == State::done);  // a free slot
    t.route = route;
    t.bytes = bytes;
    t.slowdown = slowdown;
    SimTime lat = with_latency_ ? routes_.latency(route) : 0;
    if (lat > 0) {
      t.state = State::latency;
      events_.push(now + lat, Event{id, t.version, Kind::join});
    } else {
      join(id, now);
    }
  }

  void set_slowdown(std::int32_t id, double slowdown, SimTime now) override {
    catch_up(now);
    Transfer& t = at(id);
    if (t.slowdown == slowdown) return;
    t.slowdown = slowdown;
    if (t.state == State::active && t.in_links) {
      const std::int64_t old_ub = t.ub;
      t.ub = upper_bound(t);
      for (LinkId l : routes_.route(t.route)) {
        LinkState& ls = links_[l.index()];
        const bool was = binding(ls);
        ls.ub_sum += t.ub - old_ub;
        if (was || binding(ls)) mark_dirty(l.value);
      }
      seed(id);
    }
  }

  SimTime next_time() override {
    if (dirty()) recompute(now_);
    drop_stale();
    return events_.next_time();
  }

  bool due(SimTime now) override {
    catch_up(now);
    drop_stale();
    return events_.next_time() == now;
  }

  std::int64_t advance(SimTime now, std::vector<std::int32_t>& finished) override {
    catch_up(now);
    std::int64_t n = 0;
    while (events_.next_time() == now) {
      Event e = events_.pop();
      Transfer& t = at(e.id);
      if (e.version != t.version) continue;
      ++n;
      if (e.kind == Kind::join) {
        join(e.id, now);
      } else {
        leave(e.id);
        finished.push_back(e.id);
      }
    }
    return n;
  }

 private:
  enum class State : std::uint8_t { idle, latency, active, done };
  enum class Kind : std::uint8_t { join, finish };
  struct Transfer {
    std::int32_t route = -1;
    State state = State::idle;
    bool in_links = false;
    std::int64_t bytes = 0;
    std::int64_t ub = 0;   // its rate's upper bound, whole bytes/s rounded up (binding())
    double slowdown = 1;
    double remaining = 0;  // bytes left as of `last`
    double rate = 0;       // bytes/s
    double new_rate = 0;
    SimTime last = 0;
    std::uint32_t version = 0;
    std::uint32_t mark = 0;    // component search epoch
    std::uint32_t frozen = 0;  // progressive filling epoch
    std::uint32_t seeded = 0;  // in seeds_ (epoch_ + 1 while waiting)
    bool capped = false;       // in this refill: capped at its upper bound
    std::int32_t pos = -1;     // positions in its links' lists: pos_[pos + k] for route link k (pos = id * stride_)
  };
  struct Event {
    std::int32_t id;
    std::uint32_t version;
    Kind kind;
  };
  struct Entry {
    std::int32_t flow;
    std::int32_t slot;  // which link of the flow's route
  };
  struct LinkState {
    double bytes_per_s = 0;
    std::int64_t cap_floor = 0;  // bytes_per_s rounded down (kNoBound: never binding)
    std::int64_t ub_sum = 0;     // Σ ub of its flows
    std::vector<Entry> flows;
    std::uint32_t mark = 0;
    bool dirty = false;
    double cap_left = 0;
    std::int32_t unfrozen = 0;
    std::uint32_t version = 0;
  };
  struct Share {
    double share;
    std::int32_t link;
    std::uint32_t version;
  };

  Transfer& at(std::int32_t id) { return transfers_[static_cast<std::size_t>(id)]; }

  // Upper bounds saturate here, far above any link (1e15 bytes/s), so that 2^13 of them
  // still sum within int64; a link at or above it is never binding.
  static constexpr std::int64_t kNoBound = std::int64_t{1} << 50;
  static bool binding(const LinkState& ls) { return ls.ub_sum > ls.cap_floor; }
  std::int64_t upper_bound(const Transfer& t) const {
    const double ub = std::ceil(routes_.bytes_per_s(t.route) / std::max(t.slowdown, 1.0));
    return ub < static_cast<double>(kNoBound) ? static_cast<std::int64_t>(ub) : kNoBound;
  }
  bool dirty() const { return !dirty_.empty() || !seeds_.empty(); }
  void seed(std::int32_t id) {
    Transfer& t = at(id);
    if (t.seeded == epoch_ + 1) return;
    t.seeded = epoch_ + 1;
    seeds_.push_back(id);
  }
  void drop_stale() {
    while (!events_.empty() && events_.top().version != at(events_.top().id).version) events_.discard_top();
  }

  // Changes made at an earlier time are settled before the clock moves on.
  void catch_up(SimTime now) {
    assert(now >= now_);
    if (now > now_ && dirty()) recompute(now_);
    now_ = now;
  }

  void mark_dirty(std::int32_t l) {
    LinkState& ls = links_[static_cast<std::size_t>(l)];
    if (ls.dirty) return;
    ls.dirty = true;
    dirty_.push_back(l);
  }

  // A flow's own cap: its route's bandwidth / slowdown where it is slowed or crosses a
  // non-binding link (which no longer caps it by itself), else none.
  double cap(const Transfer& t) const {
    return t.slowdown > 1 || t.capped ? routes_.bytes_per_s(t.route) / std::max(t.slowdown, 1.0) : kInf;
  }

  void join(std::int32_t id, SimTime now) {
    Transfer& t = at(id);
    t.state = State::active;
    t.remaining = static_cast<double>(t.bytes);
    t.rate = 0;
    t.last = now;
    auto route = routes_.route(t.route);
    if (t.bytes == 0 || route.empty()) {
      ++t.version;
      events_.push(now, Event{id, t.version, Kind::finish});
      return;
    }
    t.in_links = true;
    t.pos = id * stride_;
    t.ub = upper_bound(t);
    bool free = true;  // no binding link on its route
    for (std::size_t k = 0; k < route.size(); ++k) {
      LinkState& ls = links_[route[k].index()];
      pos_[static_cast<std::size_t>(t.pos) + k] = static_cast<std::int32_t>(ls.flows.size());
      ls.flows.push_back(Entry{id, static_cast<std::int32_t>(k)});
      ls.ub_sum += t.ub;
      if (binding(ls)) {
        mark_dirty(route[k].value);  // a non-binding link's other flows keep their rates
        free = false;
      }
    }
    ++t.version;  // no finish until its rate is known
    if (!free || t.slowdown > 1) {
      seed(id);
      return;
    }
    // A component of its own: its rate is its route's bandwidth, as a refill would set it.
    t.rate = routes_.bytes_per_s(t.route);
    events_.push(now + to_sim_ps(t.remaining / t.rate * kPicosecondsPerSecond), Event{id, t.version, Kind::finish});
  }

  void leave(std::int32_t id) {
    Transfer& t = at(id);
    t.state = State::done;
    if (!t.in_links) return;
    t.in_links = false;
    auto route = routes_.route(t.route);
    for (std::size_t k = 0; k < route.size(); ++k) {
      LinkState& ls = links_[route[k].index()];
      const auto i = static_cast<std::size_t>(pos_[static_cast<std::size_t>(t.pos) + k]);
      assert(ls.flows[i].flow == id);
      ls.flows[i] = ls.flows.back();
      ls.flows.pop_back();
      if (i < ls.flows.size()) {
        const Entry& moved = ls.flows[i];
        pos_[static_cast<std::size_t>(at(moved.flow).pos + moved.slot)] = static_cast<std::int32_t>(i);
      }
      const bool was = binding(ls);
      ls.ub_sum -= t.ub;
      if (was) mark_dirty(route[k].value);  // its flows may speed up (or it stopped binding)
    }
  }

  // One entry per link with unfrozen flows. A freeze only makes a link's entry stale
  // (its share can only rise: the freeze took no more than the smallest share); a stale
  // entry is refreshed when it comes to the top, so the heap holds at most one entry per
  // link instead of one per freeze and link.
  void push_share(std::int32_t l) {
    LinkState& ls = links_[static_cast<std::size_t>(l)];
    if (ls.unfrozen <= 0) return;
    shares_.push_back(Share{std::max(ls.cap_left, 0.0) / ls.unfrozen, l, ls.version});
    std::push_heap(shares_.begin(), shares_.end(), later);
  }
  // Brings the smallest current share to the top.
  void refresh_top() {
    while (!shares_.empty()) {
      const Share& top = shares_.front();
      const LinkState& ls = links_[static_cast<std::size_t>(top.link)];
      if (top.version == ls.version) return;
      const std::int32_t l = top.link;
      std::pop_heap(shares_.begin(), shares_.end(), later);
      shares_.pop_back();
      push_share(l);
    }
  }
  bool cap_later(std::int32_t a, std::int32_t b) const {
    const double ca = cap(transfers_[static_cast<std::size_t>(a)]), cb = cap(transfers_[static_cast<std::size_t>(b)]);
    return ca > cb || (ca == cb && a > b);
  }
  static bool later(const Share& a, const Share& b) {
    return a.share > b.share || (a.share == b.share && a.link > b.link);
  }

  void freeze(std::int32_t f, double rate) {
    Transfer& t = at(f);
    t.new_rate = rate;
    t.frozen = epoch_;
    --unfrozen_flows_;
    for (LinkId l : routes_.route(t.route)) {
      LinkState& ls = links_[l.index()];
      if (ls.mark != epoch_) continue;  // not binding: outside the filling
      ls.cap_left -= rate;
      --ls.unfrozen;
      ++ls.version;  // its entry in shares_ is stale
    }
  }

  // Visits flow f (once per refill): it joins the component, and so do its binding links.
  void visit(std::int32_t f) {
    Transfer& t = at(f);
    if (t.mark == epoch_ || t.state != State::active || !t.in_links) return;
    t.mark = epoch_;
    t.capped = false;
    comp_flows_.push_back(f);
    for (LinkId l2 : routes_.route(t.route)) {
      LinkState& ls2 = links_[l2.index()];
      if (!binding(ls2)) {
        t.capped = true;
        continue;
      }
      if (ls2.mark == epoch_) continue;
      ls2.mark = epoch_;
      stack_.push_back(l2.value);
    }
  }

  // Max-min fair rates over the component(s) reachable from the dirty links and flows
  // through binding links.
  void recompute(SimTime now) {
    ++epoch_;
    comp_links_.clear();
    comp_flows_.clear();
    stack_.clear();
    for (std::int32_t l : dirty_) {
      LinkState& ls = links_[static_cast<std::size_t>(l)];
      ls.dirty = false;
      if (binding(ls)) {
        if (ls.mark != epoch_) {
          ls.mark = epoch_;
          stack_.push_back(l);
        }
      } else {  // it stopped binding: its flows are no longer held by it
        for (const Entry& e : ls.flows) visit(e.flow);
      }
    }
    dirty_.clear();
    for (std::int32_t f : seeds_) visit(f);
    seeds_.clear();
    while (!stack_.empty()) {
      std::int32_t l = stack_.back();
      stack_.pop_back();
      comp_links_.push_back(l);
      for (const Entry& e : links_[static_cast<std::size_t>(l)].flows) visit(e.flow);
    }
    if (comp_flows_.empty()) return;

    // Progressive filling: raise every unfrozen flow's rate together until a link is
    // full (its flows freeze at its fair share) or a flow reaches its own cap.
    shares_.clear();
    for (std::int32_t l : comp_links_) {
      LinkState& ls = links_[static_cast<std::size_t>(l)];
      ls.cap_left = ls.bytes_per_s;
      ls.unfrozen = static_cast<std::int32_t>(ls.flows.size());
      push_share(l);
    }
    // The capped flows as a heap (smallest cap, then id, on top): most freeze on a link
    // before their cap comes up, so most are never popped.
    capped_.clear();
    for (std::int32_t f : comp_flows_)
      if (at(f).slowdown > 1 || at(f).capped) capped_.push_back(f);
    const auto cap_order = [this](std::int32_t a, std::int32_t b) { return cap_later(a, b); };
    std::make_heap(capped_.begin(), capped_.end(), cap_order);
    unfrozen_flows_ = static_cast<std::int64_t>(comp_flows_.size());
    while (unfrozen_flows_ > 0) {
      refresh_top();
      while (!capped_.empty() && at(capped_.front()).frozen == epoch_) {
        std::pop_heap(capped_.begin(), capped_.end(), cap_order);
        capped_.pop_back();
      }
      double link_share = shares_.empty() ? kInf : shares_.front().share;
      if (!capped_.empty() && cap(at(capped_.front())) <= link_share) {
        const std::int32_t f = capped_.front();
        std::pop_heap(capped_.begin(), capped_.end(), cap_order);
        capped_.pop_back();
        freeze(f, cap(at(f)));
        continue;
      }
      assert(!shares_.empty());
      Share s = shares_.front();
      std::pop_heap(shares_.begin(), shares_.end(), later);
      shares_.pop_back();
      // freeze() never changes a link's flow list.
      for (const Entry& e : links_[static_cast<std::size_t>(s.link)].flows)
        if (at(e.flow).frozen != epoch_) freeze(e.flow, s.share);
    }

    for (std::int32_t f : comp_flows_) {
      Transfer& t = at(f);
      // Guard against a rate rounded to zero, which would never finish.
      double rate = std::max(t.new_rate, routes_.bytes_per_s(t.route) * 1e-12);
      if (rate == t.rate) continue;  // same rate: its finish event stays valid
      t.remaining -= t.rate * to_seconds(now - t.last);
      if (t.remaining < 0) t.remaining = 0;
      t.last = now;
      t.rate = rate;
      ++t.version;
      events_.push(now + to_sim_ps(t.remaining / rate * kPicosecondsPerSecond),
                   Event{f, t.version, Kind::finish});
    }
  }

  const RouteTable& routes_;
  std::int32_t stride_;  // the longest route: pos_ holds stride_ entries per slot
  std::vector<Transfer> transfers_;
  std::vector<LinkState> links_;
  std::vector<std::int32_t> pos_;
  std::vector<std::int32_t> dirty_;
  std::vector<std::int32_t> seeds_;  // flows that started or changed slowdown since the last refill
  std::vector<std::int32_t> comp_links_, comp_flows_, stack_, capped_;
  std::vector<Share> shares_;
  std::int64_t unfrozen_flows_ = 0;
  std::uint32_t epoch_ = 0;
  SimTime now_ = 0;
  bool with_latency_;
  EventQueue<Event> events_;
};

}  // namespace

std::unique_ptr<NetworkModel> make_flow_model(const NetworkContext& ctx) { return std::make_unique<Flow>(ctx); }

}  // namespace tessel::sim
