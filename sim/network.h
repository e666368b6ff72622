#pragma once
// Network models: how long transfers take when they share links. One interface, two
// implementations, one registry. Both are work-conserving per link: no link is idle while
// a transfer that could use it waits because of a transfer blocked elsewhere on its route.
//
//   flow        (the default) after its route's latency, a transfer becomes a flow whose
//               rate is its max-min fair share (progressive filling over the links of
//               every active flow). Rates are recomputed when a flow starts or ends, or
//               its slowdown changes — only over the connected component of flows and
//               links it touches, never the whole network — and only flows whose rate
//               changed are rescheduled. Only binding links (those its flows could
//               together fill) join flows into components; all changes at one time are
//               settled by one refill.
//   alpha-beta  latency + bytes / bandwidth r of the route's slowest link; a link of
//               bandwidth W carries transfers whose r sum to at most W (one at a time
//               where it is the bottleneck). A transfer is granted its route when every
//               link of it has r to spare, holds r on them for bytes / r (× slowdown), and
//               finishes the route's latency later (latency overlaps the next transfer's
//               bytes). A transfer that cannot be granted holds nothing; when links free
//               up, waiting transfers are tried in start order and granted where their
//               whole route has room. busy() lets the simulator keep a move whose route is
//               full in its lane's ready queue, holding no channel, so that the move
//               behind it on the same device can go (greedy list scheduling).
//
// On one link, both give the same finish time to a lone transfer and the same time for
// the last of several: flow shares, alpha-beta serialises. Driven by the simulator
// (NetworkContext::caller_adds_latency), a model times bytes only and the simulator adds
// the route's latency after them, with the sender's channel free.
//
// A transfer's slowdown (>= 1, from compute/communication interference on its sender)
// stretches its bytes, never its latency: under alpha-beta its remaining serialisation
// runs `slowdown` times slower; under flow its rate is capped at its route's bandwidth /
// slowdown.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/machine.h"
#include "sim/event_queue.h"

namespace tessel::sim {

// The routes the transfers of one simulation use, flattened; routes never repeat a link.
// One 24-byte entry per route, so that starting or finishing a transfer reads one line
// for its latency, bandwidth and where its links are.
struct RouteTable {
  struct Entry {
    SimTime latency = 0;      // Σ link latencies
    double bytes_per_s = 0;   // bandwidth of the slowest link (inf if empty)
    std::int32_t offset = 0;  // links[offset, offset + length)
    std::int32_t length = 0;
  };
  std::vector<LinkId> links;    // every route back to back
  std::vector<Entry> entries;   // per route
  std::int32_t max_length = 0;  // links in the longest route

  [[nodiscard]] std::int32_t size() const { return static_cast<std::int32_t>(entries.size()); }
  [[nodiscard]] const Entry& at(std::int32_t r) const { return entries[static_cast<std::size_t>(r)]; }
  [[nodiscard]] SimTime latency(std::int32_t r) const { return at(r).latency; }
  [[nodiscard]] double bytes_per_s(std::int32_t r) const { return at(r).bytes_per_s; }
  [[nodiscard]] std::span<const LinkId> route(std::int32_t r) const {
    const Entry& e = at(r);
    return {links.data() + e.offset, static_cast<std::size_t>(e.length)};
  }
  // Adds the route (duplicate links dropped) and returns its index.
  std::int32_t add(const Machine& m, const std::vector<LinkId>& route);
};

// ECMP per channel (core/topology.h): on a topology graph, channel c of a sender takes
// the route the switches' hash picks for (source, destination, c), so that the channels of
// one pair spread over equal-cost paths; channel 0's route is the pair's own entry. Routes
// are added to `routes` on first use; a route longer than `max_length` (the longest the
// network model was sized for; equal-cost routes never are) falls back to channel 0's.
class ChannelRoutes {
 public:
  ChannelRoutes(const Machine& m, RouteTable& routes) : m_(&m), routes_(&routes), on_(m.has_topology()) {}
  // The route of channel `channel` for a transfer src → dst whose channel-0 route is `r`.
  std::int32_t get(std::int32_t r, DeviceId src, DeviceId dst, std::uint32_t channel, std::int32_t max_length);

 private:
  const Machine* m_;
  RouteTable* routes_;
  bool on_;
  std::unordered_map<std::int64_t, std::int32_t> map_;  // (r, channel) -> route
  std::vector<LinkId> scratch_;
};

class NetworkModel {
 public:
  virtual ~NetworkModel() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  // Transfer `id` of `bytes` over route `route` begins at `now`, running `slowdown` (>= 1)
  // times slower. Ids are slots, 0 <= id < NetworkContext::max_transfers: an id is free
  // again once advance() has reported its transfer finished, so a model's per-transfer
  // state is sized by the transfers in flight, not by every transfer of the run.
  virtual void start(std::int32_t id, std::int32_t route, std::int64_t bytes, double slowdown, SimTime now) = 0;
  // From `now` on, transfer `id` runs `slowdown` times slower.
  virtual void set_slowdown(std::int32_t id, double slowdown, SimTime now) = 0;
  // Time of the model's next state change; kNever when nothing is in flight.
  [[nodiscard]] virtual SimTime next_time() = 0;
  // Whether advance(now) has state changes at `now` (now >= the last time given). Unlike
  // next_time(), it may leave the changes made at `now` unsettled, so that every start and
  // finish at one time is settled together (flow: one refill per time, not one per call).
  [[nodiscard]] virtual bool due(SimTime now) { return next_time() == now; }
  // Processes every state change at `now` (== next_time()); appends the transfers that
  // finish at `now`, in a deterministic order. Returns the number of events processed.
  virtual std::int64_t advance(SimTime now, std::vector<std::int32_t>& finished) = 0;
  // Models that serve a link one transfer at a time (alpha-beta): whether a transfer over
  // `route` started now would wait, and if so one link it would wait for (`link`).
  // Models that always admit a transfer at once return false.
  [[nodiscard]] virtual bool busy(std::int32_t /*route*/, std::int32_t& /*link*/) const { return false; }
  // Whether `link` (on `route`) has no room for a transfer over `route` now.
  [[nodiscard]] virtual bool link_full(std::int32_t /*route*/, std::int32_t /*link*/) const { return false; }
  // The links advance() freed (alpha-beta), appended as they free; the caller clears it.
  // nullptr for models whose busy() is always false.
  [[nodiscard]] virtual std::vector<std::int32_t>* freed_links() { return nullptr; }
};

struct NetworkContext {
  const Machine& machine;
  const RouteTable& routes;
  std::int32_t max_transfers = 0;  // transfers in flight at once (ids 0..max_transfers-1)
  // True: the model times bytes only and reports a transfer finished when its last byte
  // has left the links; the caller adds the route's latency after that (the simulator
  // does, so that a sender's channel is free again during the latency, as a pipelined
  // link's is). False: a finish includes the latency.
  bool caller_adds_latency = false;
};

struct NetworkModelInfo {
  std::string name;
  std::string help;
  std::function<std::unique_ptr<NetworkModel>(const NetworkContext&)> make;
};

// The registry: a new model is one class and one line here.
[[nodiscard]] const std::vector<NetworkModelInfo>& network_models();
// Error listing the models on an unknown name.
[[nodiscard]] std::unique_ptr<NetworkModel> make_network_model(std::string_view name, const NetworkContext& ctx);

[[nodiscard]] std::unique_ptr<NetworkModel> make_alpha_beta_model(const NetworkContext& ctx);
[[nodiscard]] std::unique_ptr<NetworkModel> make_flow_model(const NetworkContext& ctx);

}  // namespace tessel::sim
