// alpha-beta network model: per-link FIFO, latency + bytes / bandwidth.
#include <algorithm>
#include <cassert>

#include "sim/network.h"

namespace tessel::sim {
namespace {

class AlphaBeta final : public NetworkModel {
 public:
  explicit AlphaBeta(const NetworkContext& ctx)
      : routes_(ctx.routes),
        stride_(std::max<std::int32_t>(ctx.routes.max_length, 1)),
        queues_(ctx.machine.links.size()),
        entries_(static_cast<std::size_t>(ctx.max_transfers) * static_cast<std::size_t>(stride_)),
        transfers_(static_cast<std::size_t>(ctx.max_transfers)) {}

  // Per link, a FIFO of the transfers that use it, threaded through `entries_` (slot `id`
  // owns entries [id * stride_, id * stride_ + route length)), so that queueing never
  // allocates and the state stays as small as the transfers in flight.

  std::string_view name() const override { return "alpha-beta"; }

  void start(std::int32_t id, std::int32_t route, std::int64_t bytes, double slowdown, SimTime now) override {
    Transfer& t = transfers_[static_cast<std::size_t>(id)];
    assert(t.route < 0);
    t.route = route;
    t.bytes = bytes;
    t.slowdown = slowdown;
    auto links = routes_.route(route);
    t.base = id * stride_;
    t.heads = 0;
    t.links = static_cast<std::int32_t>(links.size());
    for (std::size_t k = 0; k < links.size(); ++k) {
      const LinkId l = links[k];
      const std::int32_t e = t.base + static_cast<std::int32_t>(k);
      entries_[static_cast<std::size_t>(e)] = Entry{id, -1, l.value};
      Queue& q = queues_[l.index()];
      if (q.tail < 0) {
        q.head = q.tail = e;
        ++t.heads;
      } else {
        entries_[static_cast<std::size_t>(q.tail)].next = e;
        q.tail = e;
      }
    }
    if (t.heads == t.links) begin(id, now);
  }

  void set_slowdown(std::int32_t id, double slowdown, SimTime now) override {
    Transfer& t = transfers_[static_cast<std::size_t>(id)];
    if (t.slowdown == slowdown) return;
    if (t.running) {
      t.remaining_ps -= static_cast<double>(now - t.last_ps) / t.slowdown;
      if (t.remaining_ps < 0) t.remaining_ps = 0;
      t.last_ps = now;
      t.slowdown = slowdown;
      schedule(id, now);
    } else {
      t.slowdown = slowdown;
    }
  }

  SimTime next_time() override {
    while (!events_.empty() && events_.top().version != transfers_[static_cast<std::size_t>(events_.top().id)].version)
      events_.discard_top();
    return events_.next_time();
  }

  std::int64_t advance(SimTime now, std::vector<std::int32_t>& finished) override {
    std::int64_t n = 0;
    while (events_.next_time() == now) {
      Event e = events_.pop();
      Transfer& t = transfers_[static_cast<std::size_t>(e.id)];
      if (e.version != t.version) continue;  // rescheduled since
      ++n;
      t.running = false;
      finished.push_back(e.id);
      t.route = -1;  // the slot is free again
      for (std::int32_t k = 0; k < t.links; ++k) {
        Queue& q = queues_[static_cast<std::size_t>(entries_[static_cast<std::size_t>(t.base + k)].link)];
        assert(q.head == t.base + k);
        q.head = entries_[static_cast<std::size_t>(q.head)].next;
        if (q.head < 0) {
          q.tail = -1;
          continue;
        }
        const std::int32_t next = entries_[static_cast<std::size_t>(q.head)].transfer;
        Transfer& h = transfers_[static_cast<std::size_t>(next)];
        if (++h.heads == h.links) begin(next, now);
      }
    }
    return n;
  }

 private:
  struct Entry {
    std::int32_t transfer;
    std::int32_t next;  // the next entry in the same link's queue, -1 at the tail
    std::int32_t link;  // its link, so that a finish need not read the route again
  };
  struct Queue {
    std::int32_t head = -1, tail = -1;
  };
  struct Transfer {
    std::int32_t route = -1;  // -1 while the slot is free
    std::int32_t base = 0;    // its entries: entries_[base + k] for route link k
    std::int32_t heads = 0;  // links of the route whose queue it heads
    std::int32_t links = 0;  // links of the route
    std::int64_t bytes = 0;
    double slowdown = 1;
    bool running = false;
    double remaining_ps = 0;  // undisturbed time left
    SimTime last_ps = 0;
    std::uint32_t version = 0;
  };
  struct Event {
    std::int32_t id;
    std::uint32_t version;
  };

  void begin(std::int32_t id, SimTime now) {
    Transfer& t = transfers_[static_cast<std::size_t>(id)];
    t.running = true;
    SimTime serial = 0;
    const double bw = routes_.bytes_per_s(t.route);
    if (t.bytes > 0) serial = to_sim_time(static_cast<double>(t.bytes) / bw);
    t.remaining_ps = static_cast<double>(routes_.latency(t.route) + serial);
    t.last_ps = now;
    schedule(id, now);
  }

  void schedule(std::int32_t id, SimTime now) {
    Transfer& t = transfers_[static_cast<std::size_t>(id)];
    ++t.version;
    // Exact while the slowdown is 1: remaining_ps then holds an integer.
    const SimTime d = to_sim_ps(t.remaining_ps * t.slowdown);  // saturates at the clock's limit
    events_.push(now + d, Event{id, t.version});
  }

  const RouteTable& routes_;
  std::int32_t stride_;
  std::vector<Queue> queues_;  // per link: transfers in start order
  std::vector<Entry> entries_;
  std::vector<Transfer> transfers_;
  EventQueue<Event> events_;
};

}  // namespace

std::unique_ptr<NetworkModel> make_alpha_beta_model(const NetworkContext& ctx) { return std::make_unique<AlphaBeta>(ctx); }

}  // namespace tessel::sim
