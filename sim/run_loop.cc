// The event loop of a simulate() run (sim/run.h): tasks released, dispatched to their
// lanes, started and completed, in (time, sequence) order; bsp phases and barriers.

#include <algorithm>
#include <atomic>
#include <cassert>
#include <functional>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "sim/run.h"

namespace tessel::sim::detail {

void Run::fail_clock_limit() const {
  std::string running;
  for (std::size_t dev = 0; dev < compute_running_.size() && running.empty(); ++dev)
    if (compute_running_[dev] >= 0) running = "; task " + std::to_string(compute_running_[dev]) + " is running on device " + std::to_string(dev);
  fail("simulate: the simulated run passes ", kMaxSimSeconds,
       " s, the simulator's clock limit (4e18 ps, about 46 days)", running,
       " — a machine too slow for the workload (check its flop/s and link bandwidths) or a workload too large");
}

void Run::loop() {
  for (std::int32_t i = 0; i < n_; ++i)
    if (deps_left_[static_cast<std::size_t>(i)] == 0) make_ready(Released{i, -1, 0});
  settle(0);
  for (;;) {
    SimTime t = std::min(queue_.next_time(), network_->next_time());
    if (t == kNever) break;
    if (t >= kMaxSimTime) fail_clock_limit();
    if (completed_ < n_ && (t > stop_at_ || path_bound_ >= 0 || (o_.cancel && o_.cancel->load(std::memory_order_relaxed)))) {
      stopped_ = std::max(t, path_bound_);  // tasks end at t or later: the makespan is at least t
      cancelled_ = !(t > stop_at_) && path_bound_ < 0;
      return;
    }
    do {
      while (queue_.next_time() == t) {
        Event e = queue_.pop();
        if (e.task == kBarrierEvent) {  // a bsp barrier's latency has passed
          ++events_;
          next_phase(barrier_last_, t);
          continue;
        }
        if (e.task <= kGateEvent) {  // a chip's front end reached the first task held at it
          ++events_;
          start_held(kGateEvent - e.task, t);
          continue;
        }
        const Info& in = info_[static_cast<std::size_t>(e.task)];
        if (in.lane == kComm && e.version == kMoveArrived) {
          complete(e.task, t);
          continue;
        }
        if (in.lane == kComm) {  // a move's rows are copied (kMoveRowsDone): its bytes go
          ++events_;
          const std::size_t base = static_cast<std::size_t>(in.dev) * chan_stride_;
          std::size_t c = 0;
          while (moves_active_[base + c] != e.task) ++c;  // the channel it holds
          start_transfer(e.task, base + c, t);
          continue;
        }
        // A compute task's finish is stale once interference re-timed it.
        if (in.lane == kCompute && e.version != run_version_[static_cast<std::size_t>(in.dev)]) continue;
        finish_lane_task(e.task, t);
      }
      if (network_->due(t)) {
        finished_.clear();
        // Finishes are counted as task completions; the rest are network-internal events.
        events_ += network_->advance(t, finished_) - static_cast<std::int64_t>(finished_.size());
        for (std::int32_t slot : finished_) finish_move(slot, t);
        if (freed_links_ && !freed_links_->empty()) wake_link_waiters();
      }
      settle(t);
    } while (queue_.next_time() == t || network_->next_time() == t);
  }
  if (completed_ != n_) {
    // Every task's dependencies precede it, so a correct engine always finishes.
    throw std::logic_error("simulator: " + std::to_string(n_ - completed_) + " of " + std::to_string(n_) +
                           " tasks never ran (internal error)");
  }
}

// Runs zero-time tasks, starts ready tasks on free lanes, applies interference.
void Run::settle(SimTime t) {
  while (!instant_.empty() || !dirty_lanes_.empty() || !unpark_links_.empty()) {
    // Zero-time tasks in the order they became ready (completing one may append more).
    for (std::size_t k = 0; k < instant_.size(); ++k) {
      const Released r = instant_[k];
      if (gated_ && !pass_gate(r, t)) continue;  // it starts (and ends) when its gate opens
      begin_task(r, t);
      complete(r.task, t);
    }
    instant_.clear();
    if (!unpark_links_.empty()) unpark();
    dispatch(t);
  }
  if (retime_) apply_interference(t);
}

void Run::make_ready(const Released& r) {
  const auto ui = static_cast<std::size_t>(r.task);
  if (o_.policy == Policy::bsp && phase_[ui] != current_phase_) {
    assert(phase_[ui] > current_phase_);
    held_[static_cast<std::size_t>(phase_[ui])].push_back(r);
    return;
  }
  const Info& in = info_[ui];
  // A rank times a move on channel 0's route; on a topology graph with several channels a
  // move may take another (ECMP) route, faster than that one, so the bound is not used there.
  if (stop_at_ != kNever && o_.priority == Priority::longest_path && !(topology_ && chan_stride_ > 1) &&
      r.at + in.rank > stop_at_ + kBoundSlack)
    path_bound_ = std::max(path_bound_, r.at + in.rank);  // it cannot end by stop_at_
  if (in.lane == kNoLane) {
    instant_.push_back(r);
    return;
  }
  const std::size_t slot = lane_slot(in);
  // Lines its start will write, requested now.
  __builtin_prefetch(&rec_[ui], 1);
  __builtin_prefetch(&adj_offset_[ui]);
  if (in.writes >= 0) __builtin_prefetch(&bufs_[static_cast<std::size_t>(in.writes)], 1);
  const std::int64_t key = o_.priority == Priority::longest_path ? -in.rank : ready_seq_++;
  const std::uint64_t tie = ready_tie(in.lane == kComm ? route_step_[static_cast<std::size_t>(in.route)] : 0, r.task);
  if (bucketed_ && in.slot_lane == kComm) {
    push_bucket(slot, Ready{key, tie, r});
  } else {
    ReadyHeap& h = ready_[slot];
    h.push_back(Ready{key, tie, r});
    std::push_heap(h.begin(), h.end(), std::greater<>());
  }
  if (!lane_dirty_[slot]) {
    lane_dirty_[slot] = 1;
    dirty_lanes_.push_back(static_cast<std::int32_t>(slot));
  }
}

void Run::dispatch(SimTime t) {
  // Lanes in the order they became dirty; a lane re-dirtied while dispatching is
  // picked up on the next pass of settle().
  std::vector<std::int32_t>& lanes = dispatch_scratch_;
  lanes.swap(dirty_lanes_);
  for (std::int32_t s : lanes) {
    const auto slot = static_cast<std::size_t>(s);
    lane_dirty_[slot] = 0;
    if (bucketed_ && slot % kLanes == kComm) {
      dispatch_buckets(slot, t);
      continue;
    }
    ReadyHeap& h = ready_[slot];
    while (free_slots_[slot] > 0 && !h.empty()) {
      std::pop_heap(h.begin(), h.end(), std::greater<>());
      const Released r = h.back().r;
      if (freed_links_) {  // a move whose route is busy waits without taking a channel
        const Info& in = info_[static_cast<std::size_t>(r.task)];
        std::int32_t link = -1;
        if (in.lane == kComm && network_->busy(route_now(r.task), link)) {
          waiting_scratch_.push_back(h.back());
          h.pop_back();
          auto& w = link_waiters_[static_cast<std::size_t>(link)];
          if (w.empty() || w.back() != s) w.push_back(s);
          continue;
        }
      }
      h.pop_back();
      --free_slots_[slot];
      if (!gated_ || pass_gate(r, t)) start_lane_task(r, t);
    }
    for (const Ready& w : waiting_scratch_) {
      h.push_back(w);
      std::push_heap(h.begin(), h.end(), std::greater<>());
    }
    waiting_scratch_.clear();
  }
  lanes.clear();
}

// Bookkeeping common to every task start.
void Run::begin_task(const Released& r, SimTime t) {
  const std::int32_t i = r.task;
  const auto ui = static_cast<std::size_t>(i);
  const Info& in = info_[ui];
  __builtin_prefetch(adj_.data() + adj_offset_[ui]);  // read when it completes
  rec_[ui].start = t;
  // Critical path: whichever of (last dependency, barrier, lane predecessor) released it last.
  std::int32_t cause = r.by;
  SimTime when = r.at;
  if (o_.policy == Policy::bsp && barrier_task_ >= 0 && barrier_ps_ > when && phase_[ui] == current_phase_) {
    cause = barrier_task_;
    when = barrier_ps_;
  }
  if (in.lane != kNoLane) {
    const std::size_t slot = lane_slot(in);
    if (lane_release_task_[slot] >= 0 && lane_release_ps_[slot] > when) cause = lane_release_task_[slot];
  }
  rec_[ui].cause = cause;
  ++tasks_on_[static_cast<std::size_t>(in.dev)];
  if (in.writes >= 0) {
    Buf& b = bufs_[static_cast<std::size_t>(in.writes)];
    if (!b.allocated) {
      b.allocated = true;
      if (!b.host) add_live(static_cast<std::size_t>(b.dev), b.bytes, t);  // host copies: not device memory
    }
  }
}

void Run::start_lane_task(const Released& r, SimTime t) {
  const std::int32_t i = r.task;
  const auto ui = static_cast<std::size_t>(i);
  const Info& in = info_[ui];
  const auto dev = static_cast<std::size_t>(in.dev);
  begin_task(r, t);
  const SimTime cold = cache_model_ ? cache_start(i) : 0;
  lane_busy_add(dev, in.lane, +1, t);
  if (in.lane == kComm) {
    const std::size_t base = dev * chan_stride_;
    std::size_t c = 0;
    while (moves_active_[base + c] >= 0) ++c;  // a free channel exists: the lane had a free slot
    moves_active_[base + c] = i;
    if (!move_rows_.empty() && move_rows_[ui] > 0) {  // the copy loop's rows first
      queue_.push(t + move_rows_[ui], Event{i, kMoveRowsDone});
      mark_interference(dev);  // the comm lane is busy from now on, as for any move
    } else {
      start_transfer(i, base + c, t);
    }
    return;
  }
  if (in.lane == kCompute) {
    compute_running_[dev] = i;
    if (share_) chip_compute(dev, i, +1);
    run_factor_[dev] = compute_factor(dev, i);
    run_remaining_[dev] = static_cast<double>(in.amount + cold);
    run_last_[dev] = t;
    mark_interference(dev);
    schedule_compute(i, dev, t);
    return;
  }
  queue_.push(t + in.amount, Event{i, 0});
}

void Run::schedule_compute(std::int32_t i, std::size_t dev, SimTime t) {
  ++run_version_[dev];
  // Exact while the factor is 1: run_remaining_ then holds an integer.
  const SimTime d = to_sim_ps(run_remaining_[dev] * run_factor_[dev]);  // saturates at the clock's limit
  queue_.push(t + d, Event{i, run_version_[dev]});
}

void Run::release_lane(const Info& in, std::int32_t i, SimTime t) {
  const std::size_t slot = lane_slot(in);
  ++free_slots_[slot];
  lane_release_task_[slot] = i;
  lane_release_ps_[slot] = t;
  lane_busy_add(static_cast<std::size_t>(in.dev), in.lane, -1, t);
  mark_lane(slot);
}

void Run::finish_lane_task(std::int32_t i, SimTime t) {
  const Info& in = info_[static_cast<std::size_t>(i)];
  if (in.lane == kCompute) {
    const auto dev = static_cast<std::size_t>(in.dev);
    compute_running_[dev] = -1;
    if (share_) chip_compute(dev, i, -1);
    mark_interference(dev);
  }
  release_lane(in, i, t);
  complete(i, t);
}

void Run::complete(std::int32_t i, SimTime t) {
  const auto ui = static_cast<std::size_t>(i);
  const Info& in = info_[ui];
  rec_[ui].end = t;
  ++completed_;
  ++events_;
  const std::int32_t* adj = adj_.data();
  auto k = adj_offset_[ui];
  const auto reads_end = k + in.reads;
  const auto adj_end = adj_offset_[ui + 1];
  // Every line this completion will touch, requested at once rather than one miss
  // after another.
  for (auto p = k; p < reads_end; ++p) __builtin_prefetch(&bufs_[static_cast<std::size_t>(adj[p])]);
  for (auto p = reads_end; p < adj_end; ++p) {
    __builtin_prefetch(&deps_left_[static_cast<std::size_t>(adj[p])]);
    __builtin_prefetch(&info_[static_cast<std::size_t>(adj[p])]);
  }
  for (; k < reads_end; ++k) {
    const auto b = static_cast<std::size_t>(adj[k]);
    if (--bufs_[b].readers_left == 0) free_buffer(b, t);
  }
  if (in.writes >= 0) {
    const auto b = static_cast<std::size_t>(in.writes);
    if (--bufs_[b].writers_left == 0 && bufs_[b].readers_left == 0) free_buffer(b, t);
  }
  for (; k < adj_end; ++k) {
    const std::int32_t j = adj[k];
    if (--deps_left_[static_cast<std::size_t>(j)] == 0) make_ready(Released{j, i, t});
  }
  if (o_.policy == Policy::bsp) {
    const auto p = static_cast<std::size_t>(phase_[ui]);
    if (--phase_left_[p] == 0 && static_cast<std::int32_t>(p) == current_phase_) {
      if (barrier_latency_ > 0 && current_phase_ + 1 < static_cast<std::int32_t>(phase_left_.size())) {
        barrier_last_ = i;  // the next phase starts once the barrier's latency has passed
        queue_.push(t + barrier_latency_, Event{kBarrierEvent, 0});
      } else {
        next_phase(i, t);
      }
    }
  }
}

// The dispatch gates: every device whose type has a dispatch_interval_s gets its chip's
// gate (Device::chip; without one, a gate of its own); a gate's interval is the largest
// of its devices'.
void Run::setup_gates() {
  const auto d = static_cast<std::size_t>(devices_);
  gate_of_.assign(d, -1);
  gate_next_.clear();
  gate_step_.clear();
  gate_last_.clear();
  gate_held_queue_.clear();
  std::vector<std::int32_t> gate_of_chip(chip_members_.size(), -1);
  for (std::size_t dev = 0; dev < d; ++dev) {
    const double s = m_.type_of(DeviceId(static_cast<std::int32_t>(dev))).dispatch_interval_s;
    if (!(s > 0)) continue;
    const std::int32_t chip = chip_of_[dev];
    std::int32_t g = chip >= 0 ? gate_of_chip[static_cast<std::size_t>(chip)] : -1;
    if (g < 0) {
      g = static_cast<std::int32_t>(gate_next_.size());
      gate_next_.push_back(0);
      gate_step_.push_back(0);
      gate_last_.push_back(-1);
      gate_held_queue_.emplace_back();
      if (chip >= 0) gate_of_chip[static_cast<std::size_t>(chip)] = g;
    }
    gate_of_[dev] = g;
    auto& step = gate_step_[static_cast<std::size_t>(g)];
    step = std::max(step, to_sim_time(s));
  }
  gated_ = !gate_next_.empty();
}

// Task r.task, ready (and holding its lane, if it has one) at t, passes its chip's gate:
// true when it may start now; otherwise it is held, its start queued for when the gate
// opens for it (starts on one gate are spaced by its interval, first come first served),
// and what held it back last (the critical path's cause) is the task that took the
// gate's previous start.
bool Run::pass_gate(const Released& r, SimTime t) {
  const std::int32_t g = gate_of_[static_cast<std::size_t>(info_[static_cast<std::size_t>(r.task)].dev)];
  if (g < 0) return true;
  const auto ug = static_cast<std::size_t>(g);
  SimTime& next = gate_next_[ug];
  const SimTime step = gate_step_[ug];
  const std::int32_t before = gate_last_[ug];
  gate_last_[ug] = r.task;
  if (next <= t) {
    next = add_sim_time(t, step);
    return true;
  }
  gate_held_queue_[ug].push_back(Released{r.task, before, next});
  queue_.push(next, Event{kGateEvent - g, 0});
  ++gate_held_;
  gate_wait_ = add_sim_time(gate_wait_, next - t);
  next = add_sim_time(next, step);
  return false;
}

// Gate `gate` opens for the first task held at it (its events are queued in the order
// its tasks were held, at increasing times, so they pop in that order).
void Run::start_held(std::int32_t gate, SimTime t) {
  auto& held = gate_held_queue_[static_cast<std::size_t>(gate)];
  const Released r = held.front();
  held.pop_front();
  if (info_[static_cast<std::size_t>(r.task)].lane == kNoLane) {
    begin_task(r, t);
    complete(r.task, t);
  } else {
    start_lane_task(r, t);
  }
}

void Run::next_phase(std::int32_t last, SimTime t) {
  const auto phases = static_cast<std::int32_t>(phase_left_.size());
  while (current_phase_ < phases && phase_left_[static_cast<std::size_t>(current_phase_)] == 0) {
    ++current_phase_;
    barrier_task_ = last;
    barrier_ps_ = t;
    if (current_phase_ == phases) break;
    std::vector<Released> held;
    held.swap(held_[static_cast<std::size_t>(current_phase_)]);
    for (const Released& r : held) make_ready(r);
  }
}

}  // namespace tessel::sim::detail
