// flow network model: max-min fair sharing by progressive filling, recomputed per
// connected component of the flows and links a change touches.
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
        pos_(transfers_.size() * static_cast<std::size_t>(stride_), -1) {
    for (std::size_t l = 0; l < links_.size(); ++l) links_[l].bytes_per_s = ctx.machine.links[l].bytes_per_s;
  }

  std::string_view name() const override { return "flow"; }

  void start(std::int32_t id, std::int32_t route, std::int64_t bytes, double slowdown, SimTime now) override {
    catch_up(now);
    Transfer& t = at(id);
    assert(t.state == State::idle || t.state == State::done);  // a free slot
    t.route = route;
    t.bytes = bytes;
    t.slowdown = slowdown;
    SimTime lat = routes_.latency(route);
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
    if (t.state == State::active && t.in_links)
      for (LinkId l : routes_.route(t.route)) mark_dirty(l.value);
  }

  SimTime next_time() override {
    if (!dirty_.empty()) recompute(now_);
    while (!events_.empty() && events_.top().version != at(events_.top().id).version) events_.discard_top();
    return events_.next_time();
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
    double slowdown = 1;
    double remaining = 0;  // bytes left as of `last`
    double rate = 0;       // bytes/s
    double new_rate = 0;
    SimTime last = 0;
    std::uint32_t version = 0;
    std::uint32_t mark = 0;    // component search epoch
    std::uint32_t frozen = 0;  // progressive filling epoch
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

  // Changes made at an earlier time are settled before the clock moves on.
  void catch_up(SimTime now) {
    assert(now >= now_);
    if (now > now_ && !dirty_.empty()) recompute(now_);
    now_ = now;
  }

  void mark_dirty(std::int32_t l) {
    LinkState& ls = links_[static_cast<std::size_t>(l)];
    if (ls.dirty) return;
    ls.dirty = true;
    dirty_.push_back(l);
  }

  double cap(const Transfer& t) const {
    return t.slowdown > 1 ? routes_.bytes_per_s(t.route) / t.slowdown : kInf;
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
    for (std::size_t k = 0; k < route.size(); ++k) {
      LinkState& ls = links_[route[k].index()];
      pos_[static_cast<std::size_t>(t.pos) + k] = static_cast<std::int32_t>(ls.flows.size());
      ls.flows.push_back(Entry{id, static_cast<std::int32_t>(k)});
      mark_dirty(route[k].value);
    }
    ++t.version;  // no finish until its rate is known
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
      mark_dirty(route[k].value);
    }
  }

  void push_share(std::int32_t l) {
    LinkState& ls = links_[static_cast<std::size_t>(l)];
    ++ls.version;
    if (ls.unfrozen <= 0) return;
    shares_.push_back(Share{std::max(ls.cap_left, 0.0) / ls.unfrozen, l, ls.version});
    std::push_heap(shares_.begin(), shares_.end(), later);
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
      ls.cap_left -= rate;
      --ls.unfrozen;
      push_share(l.value);
    }
  }

  // Max-min fair rates over the component(s) reachable from the dirty links.
  void recompute(SimTime now) {
    ++epoch_;
    comp_links_.clear();
    comp_flows_.clear();
    stack_.clear();
    for (std::int32_t l : dirty_) {
      LinkState& ls = links_[static_cast<std::size_t>(l)];
      ls.dirty = false;
      if (ls.mark != epoch_) {
        ls.mark = epoch_;
        stack_.push_back(l);
      }
    }
    dirty_.clear();
    while (!stack_.empty()) {
      std::int32_t l = stack_.back();
      stack_.pop_back();
      comp_links_.push_back(l);
      for (const Entry& e : links_[static_cast<std::size_t>(l)].flows) {
        Transfer& t = at(e.flow);
        if (t.mark == epoch_) continue;
        t.mark = epoch_;
        comp_flows_.push_back(e.flow);
        for (LinkId l2 : routes_.route(t.route)) {
          LinkState& ls2 = links_[l2.index()];
          if (ls2.mark == epoch_) continue;
          ls2.mark = epoch_;
          stack_.push_back(l2.value);
        }
      }
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
    capped_.clear();
    for (std::int32_t f : comp_flows_)
      if (at(f).slowdown > 1) capped_.push_back(f);
    std::sort(capped_.begin(), capped_.end(), [&](std::int32_t a, std::int32_t b) {
      double ca = cap(at(a)), cb = cap(at(b));
      return ca < cb || (ca == cb && a < b);
    });
    std::size_t next_capped = 0;
    unfrozen_flows_ = static_cast<std::int64_t>(comp_flows_.size());
    while (unfrozen_flows_ > 0) {
      while (!shares_.empty() && shares_.front().version != links_[static_cast<std::size_t>(shares_.front().link)].version) {
        std::pop_heap(shares_.begin(), shares_.end(), later);
        shares_.pop_back();
      }
      while (next_capped < capped_.size() && at(capped_[next_capped]).frozen == epoch_) ++next_capped;
      double link_share = shares_.empty() ? kInf : shares_.front().share;
      if (next_capped < capped_.size() && cap(at(capped_[next_capped])) <= link_share) {
        freeze(capped_[next_capped], cap(at(capped_[next_capped])));
        continue;
      }
      assert(!shares_.empty());
      Share s = shares_.front();
      std::pop_heap(shares_.begin(), shares_.end(), later);
      shares_.pop_back();
      // Copy: freeze() pushes shares but never changes a link's flow list.
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
  std::vector<std::int32_t> comp_links_, comp_flows_, stack_, capped_;
  std::vector<Share> shares_;
  std::int64_t unfrozen_flows_ = 0;
  std::uint32_t epoch_ = 0;
  SimTime now_ = 0;
  EventQueue<Event> events_;
};

}  // namespace

std::unique_ptr<NetworkModel> make_flow_model(const NetworkContext& ctx) { return std::make_unique<Flow>(ctx); }

}  // namespace tessel::sim
