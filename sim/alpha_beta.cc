// alpha-beta network model: latency + bytes / bottleneck bandwidth, each link carrying
// one transfer's bytes at a time, granted greedily (no head-of-line blocking).
//
// The rule (network.h states it for users):
//  - a transfer runs at its route's bandwidth r (its slowest link). It is *granted* its
//    route when every link of it has r to spare (a link of bandwidth W carries transfers
//    whose rates sum to at most W: one at a time where the link is the bottleneck, two
//    50 GB/s transfers at once on a 100 GB/s spine link); it then holds r on each of them
//    for its serialisation time, bytes / r × slowdown, and
//    finishes its route's latency after that (the latency is propagation and software
//    overhead: it overlaps the next transfer's bytes, as on a pipelined link);
//  - a transfer that cannot be granted holds nothing: it waits, and transfers behind it
//    whose links are free go first. When links become free, the waiting transfers are
//    tried in the order they were started, each granted if its whole route is free.
// So no link is idle while a transfer that needs only free links waits, and a transfer
// never waits for a link that is not carrying some other transfer's bytes. A transfer
// with an infinite rate (an empty route) or one alone on a link is always admitted.
//
// The simulator asks busy() before it hands a move a channel, so a move waiting for a
// link holds neither a channel nor its device's comm lane; transfers reach the waiting
// list here only when the sender spent time between taking its channel and starting the
// transfer (copy rows on CPU workers, or a wait at a dispatch gate: sim/simulator.h).
#include <algorithm>
#include <cassert>
#include <cmath>

#include "sim/network.h"

namespace tessel::sim {
namespace {

class AlphaBeta final : public NetworkModel {
 public:
  explicit AlphaBeta(const NetworkContext& ctx)
      : routes_(ctx.routes),
        load_(ctx.machine.links.size(), 0.0),
        capacity_(ctx.machine.links.size()),
        transfers_(static_cast<std::size_t>(ctx.max_transfers)),
        with_latency_(!ctx.caller_adds_latency) {
    // A relative slack, so that rounding in the sums never refuses a transfer that fits.
    for (std::size_t l = 0; l < capacity_.size(); ++l) capacity_[l] = ctx.machine.links[l].bytes_per_s * (1 + 1e-9);
  }

  std::string_view name() const override { return "alpha-beta"; }

  bool busy(std::int32_t route, std::int32_t& link) const override {
    const double rate = routes_.bytes_per_s(route);
    for (LinkId l : routes_.route(route))
      if (load_[l.index()] > 0 && load_[l.index()] + rate > capacity_[l.index()]) {
        link = l.value;
        return true;
      }
    return false;
  }
  bool link_full(std::int32_t route, std::int32_t link) const override {
    const auto l = static_cast<std::size_t>(link);
    return load_[l] > 0 && load_[l] + routes_.bytes_per_s(route) > capacity_[l];
  }
  std::vector<std::int32_t>* freed_links() override { return &freed_; }

  void start(std::int32_t id, std::int32_t route, std::int64_t bytes, double slowdown, SimTime now) override {
    Transfer& t = at(id);
    assert(t.phase == Phase::idle);
    t.route = route;
    t.bytes = bytes;
    t.slowdown = slowdown;
    std::int32_t link = -1;
    if (busy(route, link)) {
      t.phase = Phase::waiting;
      waiting_.push_back(id);
      return;
    }
    grant(id, now);
  }

  void set_slowdown(std::int32_t id, double slowdown, SimTime now) override {
    Transfer& t = at(id);
    if (t.slowdown == slowdown) return;
    if (t.phase == Phase::bytes) {
      t.remaining_ps -= static_cast<double>(now - t.last_ps) / t.slowdown;
      if (t.remaining_ps < 0) t.remaining_ps = 0;
      t.last_ps = now;
      t.slowdown = slowdown;
      schedule(id, now, t.remaining_ps * t.slowdown);
    } else {
      t.slowdown = slowdown;  // latency and waiting are not stretched
    }
  }

  SimTime next_time() override {
    while (!events_.empty() && events_.top().version != at(events_.top().id).version) events_.discard_top();
    return events_.next_time();
  }

  std::int64_t advance(SimTime now, std::vector<std::int32_t>& finished) override {
    std::int64_t n = 0;
    while (next_time() == now) {
      Event e = events_.pop();
      Transfer& t = at(e.id);
      ++n;
      if (t.phase == Phase::bytes) {  // its bytes are through: its links are free
        const double rate = routes_.bytes_per_s(t.route);
        for (LinkId l : routes_.route(t.route)) {
          double& load = load_[l.index()];
          load -= rate;
          if (load < capacity_[l.index()] * 1e-9) load = 0;  // no residue from rounding
          freed_.push_back(l.value);
        }
        const SimTime lat = with_latency_ ? routes_.latency(t.route) : 0;
        if (lat > 0) {
          t.phase = Phase::latency;
          schedule(e.id, now, static_cast<double>(lat));
        } else {
          finish(e.id, finished);
        }
        if (!waiting_.empty()) grant_waiting(now);
      } else {
        assert(t.phase == Phase::latency);
        finish(e.id, finished);
      }
    }
    return n;
  }

 private:
  enum class Phase : std::uint8_t { idle, waiting, bytes, latency };
  struct Transfer {
    std::int32_t route = -1;
    Phase phase = Phase::idle;
    std::int64_t bytes = 0;
    double slowdown = 1;
    double remaining_ps = 0;  // undisturbed serialisation time left
    SimTime last_ps = 0;
    std::uint32_t version = 0;
  };
  struct Event {
    std::int32_t id;
    std::uint32_t version;
  };

  Transfer& at(std::int32_t id) { return transfers_[static_cast<std::size_t>(id)]; }
  const Transfer& at(std::int32_t id) const { return transfers_[static_cast<std::size_t>(id)]; }

  void grant(std::int32_t id, SimTime now) {
    Transfer& t = at(id);
    t.phase = Phase::bytes;
    const double bw = routes_.bytes_per_s(t.route);
    for (LinkId l : routes_.route(t.route)) load_[l.index()] += bw;
    t.remaining_ps = t.bytes > 0 ? static_cast<double>(to_sim_time(static_cast<double>(t.bytes) / bw)) : 0.0;
    t.last_ps = now;
    schedule(id, now, t.remaining_ps * t.slowdown);
  }

  // Waiting transfers in start order, each granted if its whole route is free now.
  void grant_waiting(SimTime now) {
    std::size_t keep = 0;
    for (std::size_t k = 0; k < waiting_.size(); ++k) {
      const std::int32_t id = waiting_[k];
      std::int32_t link = -1;
      if (busy(at(id).route, link)) {
        waiting_[keep++] = id;
      } else {
        grant(id, now);
      }
    }
    waiting_.resize(keep);
  }

  void finish(std::int32_t id, std::vector<std::int32_t>& finished) {
    Transfer& t = at(id);
    t.phase = Phase::idle;
    t.route = -1;  // the slot is free again
    ++t.version;
    finished.push_back(id);
  }

  void schedule(std::int32_t id, SimTime now, double duration_ps) {
    Transfer& t = at(id);
    ++t.version;
    // Exact while the slowdown is 1: the durations are then whole picoseconds.
    events_.push(now + to_sim_ps(duration_ps), Event{id, t.version});  // saturates at the clock's limit
  }

  const RouteTable& routes_;
  std::vector<double> load_;      // per link: Σ rates of the transfers granted on it
  std::vector<double> capacity_;  // per link: its bandwidth (+ slack)
  std::vector<Transfer> transfers_;
  std::vector<std::int32_t> waiting_;  // transfers started but not granted, in start order
  std::vector<std::int32_t> freed_;    // links freed since the simulator last looked
  bool with_latency_;
  EventQueue<Event> events_;
};

}  // namespace

std::unique_ptr<NetworkModel> make_alpha_beta_model(const NetworkContext& ctx) { return std::make_unique<AlphaBeta>(ctx); }

}  // namespace tessel::sim
