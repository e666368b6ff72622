// Moves on comm lanes (sim/run.h): a channel per transfer and its route, bytes handed
// to the network model and taken back, and ready moves waiting for a busy link under a
// model with busy() (alpha-beta): buckets per first link, parked moves.

#include <algorithm>
#include <functional>

#include "sim/run.h"

namespace tessel::sim::detail {

// Lanes whose ready moves waited for a link that is free now are dispatched again;
// moves parked on it go back to their lanes.
void Run::wake_link_waiters() {
  for (std::int32_t l : *freed_links_) {
    const auto ul = static_cast<std::size_t>(l);
    for (std::int32_t s : link_waiters_[ul]) mark_lane(static_cast<std::size_t>(s));
    link_waiters_[ul].clear();
    if (!parked_[ul].empty() && !unpark_pending_[ul]) {
      unpark_pending_[ul] = 1;
      unpark_links_.push_back(l);
    }
  }
  freed_links_->clear();
}

// Moves parked on a free link go back to their lanes one at a time, best first, until
// one of them takes the link (checked after each dispatch) or none is left: a move
// blocked elsewhere is parked there instead; one whose lane has no free channel stays
// in its lane and the next is tried. So a link with many waiting moves costs one
// return per transfer it carries, not one per waiting move.
void Run::unpark() {
  std::vector<std::int32_t>& links = unpark_scratch_;
  links.swap(unpark_links_);
  for (std::int32_t l : links) {
    const auto ul = static_cast<std::size_t>(l);
    auto& heap = parked_[ul];
    bool keep = false;
    while (!heap.empty()) {
      const Parked p = heap.front();
      const std::int32_t route = route_now(p.ready.r.task);
      if (network_->link_full(route, l)) break;  // taken
      std::int32_t link = -1;
      const bool busy = network_->busy(route, link);
      std::pop_heap(heap.begin(), heap.end(), parked_after);
      heap.pop_back();
      if (busy) {
        park(link, p);
        continue;
      }
      push_bucket(static_cast<std::size_t>(p.slot), p.ready);
      mark_lane(static_cast<std::size_t>(p.slot));
      keep = !heap.empty();
      break;
    }
    if (keep) {
      unpark_links_.push_back(l);
    } else {
      unpark_pending_[ul] = 0;
    }
  }
  links.clear();
}

bool Run::parked_after(const Parked& a, const Parked& b) { return a.ready > b.ready; }

void Run::park(std::int32_t link, const Parked& p) {
  auto& heap = parked_[static_cast<std::size_t>(link)];
  heap.push_back(p);
  std::push_heap(heap.begin(), heap.end(), parked_after);
}

// Under a model with busy() (alpha-beta), a comm lane's ready moves sit in one heap per
// first link of their route (the device's NVLink, NIC, PCIe): a bucket whose top move
// finds that link full is skipped as a whole, so a device with thousands of moves queued
// behind its own busy link costs one check, not thousands. A top move that is blocked
// further along its route (a receiver's link) is parked on that link until it frees.
void Run::push_bucket(std::size_t slot, const Ready& r) {
  const auto route = routes_.route(info_[static_cast<std::size_t>(r.r.task)].route);
  const std::int32_t first = route.empty() ? -1 : route[0].value;
  auto& bs = buckets_[slot];
  std::size_t b = 0;
  while (b < bs.size() && bs[b].link != first) ++b;
  if (b == bs.size()) bs.push_back(Bucket{first, {}});
  bs[b].heap.push_back(r);
  std::push_heap(bs[b].heap.begin(), bs[b].heap.end(), std::greater<>());
  ++bucket_count_[slot];
}

void Run::dispatch_buckets(std::size_t slot, SimTime t) {
  auto& bs = buckets_[slot];
  bucket_blocked_.assign(bs.size(), 0);
  while (free_slots_[slot] > 0 && bucket_count_[slot] > 0) {
    std::size_t best = bs.size();
    for (std::size_t b = 0; b < bs.size(); ++b) {
      ReadyHeap& h = bs[b].heap;
      if (o_.channels_per_link && bs[b].in_flight >= o_.comm_channels) continue;  // its link's channels are taken
      while (freed_links_ && !h.empty() && !bucket_blocked_[b]) {
        std::int32_t link = -1;
        if (!network_->busy(route_now(h.front().r.task), link)) break;
        if (link == bs[b].link) {  // its first link is full: so is every move's of the bucket
          bucket_blocked_[b] = 1;
          auto& w = link_waiters_[static_cast<std::size_t>(link)];
          if (w.empty() || w.back() != static_cast<std::int32_t>(slot)) w.push_back(static_cast<std::int32_t>(slot));
          break;
        }
        std::pop_heap(h.begin(), h.end(), std::greater<>());
        park(link, Parked{h.back(), static_cast<std::int32_t>(slot)});
        h.pop_back();
        --bucket_count_[slot];
      }
      if (h.empty() || bucket_blocked_[b]) continue;
      if (best == bs.size() || bs[best].heap.front() > h.front()) best = b;
    }
    if (best == bs.size()) break;
    ReadyHeap& h = bs[best].heap;
    std::pop_heap(h.begin(), h.end(), std::greater<>());
    const Released r = h.back().r;
    h.pop_back();
    --bucket_count_[slot];
    ++bs[best].in_flight;
    --free_slots_[slot];
    if (!gated_ || pass_gate(r, t)) start_lane_task(r, t);
  }
}

// Channel c of a device takes the ECMP route of (source, destination, c) (ChannelRoutes).
std::int32_t Run::channel_route(std::int32_t i, std::size_t c) {
  const std::int32_t r = info_[static_cast<std::size_t>(i)].route;
  if (c == 0 || !topology_) return r;
  const Task& task = tg_.tasks[static_cast<std::size_t>(i)];
  return channel_routes_->get(r, task.device, task.dst_device, static_cast<std::uint32_t>(c), network_max_route_);
}

// The route move i would take on the channel it would get now.
std::int32_t Run::route_now(std::int32_t i) {
  if (!topology_) return info_[static_cast<std::size_t>(i)].route;
  const std::size_t base = static_cast<std::size_t>(info_[static_cast<std::size_t>(i)].dev) * chan_stride_;
  std::size_t c = 0;
  while (c + 1 < chan_stride_ && moves_active_[base + c] >= 0) ++c;
  return channel_route(i, c);
}

// Move i, holding channel `slot` of its device since it started, hands its bytes to the network.
void Run::start_transfer(std::int32_t i, std::size_t slot, SimTime t) {
  const Info& in = info_[static_cast<std::size_t>(i)];
  const auto dev = static_cast<std::size_t>(in.dev);
  double slowdown = interfere_ && applied_compute_[dev] && !is_fused(i) ? comm_slowdown_ : 1.0;
  const std::int32_t route = channel_route(i, slot - dev * chan_stride_);
  if (route != in.route) {  // its bytes cross the channel's links, not channel 0's
    for (LinkId l : routes_.route(in.route)) link_bytes_[l.index()] -= in.amount;
    for (LinkId l : routes_.route(route)) link_bytes_[l.index()] += in.amount;
  }
  slot_route_[slot] = route;
  network_->start(static_cast<std::int32_t>(slot), route, in.amount, slowdown, t);
  mark_interference(dev);
}

void Run::finish_move(std::int32_t slot, SimTime t) {
  const std::int32_t i = moves_active_[static_cast<std::size_t>(slot)];
  moves_active_[static_cast<std::size_t>(slot)] = -1;
  const Info& in = info_[static_cast<std::size_t>(i)];
  mark_interference(static_cast<std::size_t>(in.dev));
  // Its bytes are through: the channel is free; the move completes a latency later (so
  // it is not the lane predecessor the critical path names: it ends after the next starts).
  const SimTime latency = routes_.latency(slot_route_[static_cast<std::size_t>(slot)]);
  const std::size_t lane = lane_slot(in);
  if (bucketed_ && in.slot_lane == kComm) {
    const auto route = routes_.route(in.route);
    const std::int32_t first = route.empty() ? -1 : route[0].value;
    for (Bucket& b : buckets_[lane])
      if (b.link == first) --b.in_flight;
  }
  const std::int32_t cause_task = lane_release_task_[lane];
  const SimTime cause_ps = lane_release_ps_[lane];
  release_lane(in, i, t);
  if (latency > 0) {
    lane_release_task_[lane] = cause_task;
    lane_release_ps_[lane] = cause_ps;
    ++events_;
    queue_.push(t + latency, Event{i, kMoveArrived});
  } else {
    complete(i, t);
  }
}

}  // namespace tessel::sim::detail
