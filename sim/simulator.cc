#include "sim/simulator.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <stdexcept>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sim/compute_model.h"
#include "sim/event_queue.h"
#include "sim/network.h"

namespace tessel::sim {

std::string_view to_string(Policy p) { return p == Policy::bsp ? "bsp" : "async"; }
std::string_view to_string(Priority p) { return p == Priority::fifo ? "fifo" : "longest-path"; }

Policy parse_policy(std::string_view s, std::string_view what) {
  if (s == "async") return Policy::async;
  if (s == "bsp") return Policy::bsp;
  fail(what, ": unknown policy '", s, "' (expected async or bsp)");
}

Priority parse_priority(std::string_view s, std::string_view what) {
  if (s == "longest-path") return Priority::longest_path;
  if (s == "fifo") return Priority::fifo;
  fail(what, ": unknown priority '", s, "' (expected longest-path or fifo)");
}

namespace {

constexpr int kLanes = 3;  // indexed by core's Lane: compute, comm, copy
constexpr int kCompute = static_cast<int>(Lane::compute);
constexpr int kComm = static_cast<int>(Lane::comm);
constexpr int kCopy = static_cast<int>(Lane::copy);
constexpr std::int8_t kNoLane = -1;  // inputs and outputs: no time, no lane

class Run {
 public:
  Run(const TaskGraph& tg, const Machine& m, const SimOptions& o) : tg_(tg), m_(m), o_(o) {}

  SimResult run() {
    auto wall0 = std::chrono::steady_clock::now();
    setup();
    loop();
    SimResult r = finish();
    r.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return r;
  }

 private:
  struct Event {
    std::int32_t task;
    std::uint32_t version;
  };
  using ReadyHeap = std::vector<std::pair<std::int64_t, std::int32_t>>;  // (key, task), smallest first

  // ---- setup ------------------------------------------------------------------

  void setup() {
    if (o_.comm_channels < 1) fail("simulate: comm_channels must be >= 1, got ", o_.comm_channels);
    m_.validate(m_.name.empty() ? "machine" : m_.name);
    if (tg_.num_devices > m_.num_devices())
      fail("the task graph is placed on ", tg_.num_devices, " devices but machine '", m_.name, "' has ",
           m_.num_devices());
    for (std::size_t b = 0; b < tg_.buffers.size(); ++b)
      if (!tg_.buffers[b].device.valid() || tg_.buffers[b].device.value >= tg_.num_devices)
        fail("task graph: buffer ", b, " lives on device ", tg_.buffers[b].device.value, " of ", tg_.num_devices);

    n_ = static_cast<std::int32_t>(tg_.tasks.size());
    devices_ = tg_.num_devices;
    const auto n = static_cast<std::size_t>(n_);
    lane_.resize(n);
    slot_lane_.resize(n);
    hot_.assign(n, Hot{});
    link_bytes_.assign(m_.links.size(), 0);
    // Route per (source, destination) pair: a flat table for up to 2,048 devices, a hash
    // map beyond (lookups only; no order is taken from it).
    const bool flat = devices_ <= 2048;
    std::vector<std::int32_t> route_flat(flat ? static_cast<std::size_t>(devices_) * static_cast<std::size_t>(devices_) : 0, -1);
    std::unordered_map<std::int64_t, std::int32_t> route_map;
    bytes_.resize(n);
    read_offset_.assign(n + 1, 0);
    read_buf_.clear();
    const std::size_t nb = tg_.buffers.size();
    buf_bytes_.resize(nb);
    buf_dev_.resize(nb);
    for (std::size_t b = 0; b < nb; ++b) {
      buf_bytes_[b] = tg_.buffers[b].bytes();
      buf_dev_[b] = tg_.buffers[b].device.value;
    }
    readers_left_.assign(nb, 0);
    writers_left_.assign(nb, 0);
    allocated_.assign(nb, 0);
    // One pass over the tasks: TaskGraph::validate()'s checks, and every field the event
    // loop needs copied into compact arrays.
    succ_offset_.assign(n + 1, 0);
    std::vector<std::int32_t> dep_offset(n + 1, 0), dep_buf;
    dep_buf.reserve(n * 2);
    for (std::size_t i = 0; i < n; ++i) {
      const Task& t = tg_.tasks[i];
      for (TaskId d : t.deps) {
        if (!d.valid() || d.index() >= i)
          fail("task graph: task ", i, " depends on task ", d.value, ", which does not precede it");
        dep_buf.push_back(d.value);
        ++succ_offset_[d.index() + 1];
      }
      dep_offset[i + 1] = static_cast<std::int32_t>(dep_buf.size());
      hot_[i].remaining_deps = static_cast<std::int32_t>(t.deps.size());
      for (BufferId b : t.reads)
        if (!b.valid() || b.index() >= nb) fail("task graph: task ", i, " reads unknown buffer ", b.value);
      if (t.kind != TaskKind::output && (!t.writes.valid() || t.writes.index() >= nb))
        fail("task graph: task ", i, " writes unknown buffer ", t.writes.value);
      if (!t.device.valid() || t.device.value >= devices_ || !t.dst_device.valid() || t.dst_device.value >= devices_)
        fail("task graph: task ", i, " runs on device ", t.device.value, " of ", devices_);
      // The device whose lanes run the task. A move into a single-lane device (a CPU
      // worker) is a copy the receiving worker makes itself when it is free: it runs there.
      hot_[i].dev = t.kind == TaskKind::move && m_.type_of(t.dst_device).single_lane ? t.dst_device.value
                                                                                     : t.device.value;
      bytes_[i] = t.bytes;
      hot_[i].writes = t.writes.valid() ? t.writes.value : -1;
      if (t.writes.valid()) ++writers_left_[t.writes.index()];
      for (BufferId b : t.reads) {
        read_buf_.push_back(b.value);
        ++readers_left_[b.index()];
      }
      read_offset_[i + 1] = static_cast<std::int32_t>(read_buf_.size());
      switch (t.kind) {
        case TaskKind::input:
        case TaskKind::output: lane_[i] = kNoLane; break;
        case TaskKind::compute: lane_[i] = kCompute; break;
        case TaskKind::touch: lane_[i] = kCopy; break;
        case TaskKind::move: lane_[i] = kComm; break;
      }
      slot_lane_[i] = lane_[i] != kNoLane && m_.type_of(DeviceId(hot_[i].dev)).single_lane ? kCompute : lane_[i];
      if (t.kind == TaskKind::move) {
        const std::int64_t key = static_cast<std::int64_t>(t.device.value) * devices_ + t.dst_device.value;
        std::int32_t* slot = nullptr;
        if (flat) {
          slot = &route_flat[static_cast<std::size_t>(key)];
        } else {
          slot = &route_map.try_emplace(key, -1).first->second;
        }
        if (*slot < 0) *slot = routes_.add(m_, m_.route(t.device, t.dst_device));
        const std::int32_t r = *slot;
        hot_[i].route = r;
        for (LinkId l : routes_.route(r)) link_bytes_[l.index()] += t.bytes;
        bytes_moved_ += t.bytes;
        SimTime serial = t.bytes > 0 ? to_sim_time(static_cast<double>(t.bytes) / routes_.bytes_per_s[r]) : 0;
        hot_[i].nominal = routes_.latency[r] + serial;
      } else if (lane_[i] != kNoLane) {
        hot_[i].nominal = to_sim_time(compute_seconds(t, tg_, m_.type_of(t.device)));
      }
    }
    network_ = make_network_model(o_.network, NetworkContext{m_, routes_, n_});

    // Successors (CSR), in task order.
    for (std::size_t i = 0; i < n; ++i) succ_offset_[i + 1] += succ_offset_[i];
    succ_.resize(static_cast<std::size_t>(succ_offset_[n]));
    {
      std::vector<std::int32_t> fill(succ_offset_.begin(), succ_offset_.end() - 1);
      for (std::size_t i = 0; i < n; ++i)
        for (auto k = dep_offset[i]; k < dep_offset[i + 1]; ++k)
          succ_[static_cast<std::size_t>(fill[static_cast<std::size_t>(dep_buf[static_cast<std::size_t>(k)])]++)] =
              static_cast<std::int32_t>(i);
    }

    // Priority: the longest undisturbed path from a task to the end, itself included.
    if (o_.priority == Priority::longest_path) {
      for (std::size_t i = n; i-- > 0;) {
        SimTime best = 0;
        for (auto s = succ_offset_[i]; s < succ_offset_[i + 1]; ++s)
          best = std::max(best, hot_[static_cast<std::size_t>(succ_[static_cast<std::size_t>(s)])].rank);
        hot_[i].rank = best + hot_[i].nominal;
      }
    }

    // BSP phases, compressed to 0..P-1 in order.
    if (o_.policy == Policy::bsp) {
      std::vector<std::int32_t> phases(n);
      for (std::size_t i = 0; i < n; ++i) phases[i] = bsp_phase(tg_.tasks[i]);
      std::vector<std::int32_t> distinct = phases;
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      phase_.resize(n);
      phase_left_.assign(distinct.size(), 0);
      held_.assign(distinct.size(), {});
      for (std::size_t i = 0; i < n; ++i) {
        phase_[i] = static_cast<std::int32_t>(std::lower_bound(distinct.begin(), distinct.end(), phases[i]) - distinct.begin());
        ++phase_left_[static_cast<std::size_t>(phase_[i])];
      }
      for (std::size_t i = 0; i < n; ++i)
        for (TaskId d : tg_.tasks[i].deps)
          if (phase_[d.index()] > phase_[i])
            fail("task graph: task ", i, " (phase ", phases[i], ") depends on task ", d.value, " of a later phase (",
                 phases[d.index()], "); the bsp policy cannot run it");
    }

    const auto d = static_cast<std::size_t>(devices_);
    free_slots_.resize(d * kLanes);
    for (std::size_t dev = 0; dev < d; ++dev) {
      free_slots_[dev * kLanes + kCompute] = 1;
      free_slots_[dev * kLanes + kCopy] = 1;
      free_slots_[dev * kLanes + kComm] = o_.comm_channels;
    }
    ready_.assign(d * kLanes, {});
    lane_dirty_.assign(d * kLanes, 0);
    lane_release_task_.assign(d * kLanes, -1);
    lane_release_ps_.assign(d * kLanes, 0);
    lane_busy_.assign(d * kLanes, 0);
    lane_since_.assign(d * kLanes, 0);
    lane_total_.assign(d * kLanes, 0);
    any_busy_.assign(d, 0);
    any_since_.assign(d, 0);
    any_total_.assign(d, 0);
    tasks_on_.assign(d, 0);
    live_.assign(d, 0);
    peak_.assign(d, 0);
    peak_ps_.assign(d, 0);
    first_over_ps_.assign(d, -1);
    capacity_.resize(d);
    for (std::size_t dev = 0; dev < d; ++dev)
      capacity_[dev] = m_.type_of(DeviceId(static_cast<std::int32_t>(dev))).memory_capacity_bytes;

    interfere_ = o_.interference;
    if (interfere_) {
      compute_slowdown_.resize(d);
      for (std::size_t dev = 0; dev < d; ++dev)
        compute_slowdown_[dev] = m_.interference.compute_slowdown(m_.type_of(DeviceId(static_cast<std::int32_t>(dev))).sm_count);
      comm_slowdown_ = m_.interference.comm_slowdown();
      interfere_ = comm_slowdown_ > 1 ||
                   std::any_of(compute_slowdown_.begin(), compute_slowdown_.end(), [](double s) { return s > 1; });
    }
    compute_running_.assign(d, -1);
    run_remaining_.assign(d, 0);
    run_factor_.assign(d, 1);
    run_last_.assign(d, 0);
    moves_active_.assign(d * static_cast<std::size_t>(o_.comm_channels), -1);
    applied_comm_.assign(d, 0);
    applied_compute_.assign(d, 0);
    interf_dirty_.assign(d, 0);
    cause_.assign(n, -1);
    queue_.reserve(static_cast<std::size_t>(devices_) * 4);
  }

  // ---- event loop -------------------------------------------------------------

  void loop() {
    for (std::int32_t i = 0; i < n_; ++i)
      if (hot_[static_cast<std::size_t>(i)].remaining_deps == 0) make_ready(i, 0);
    settle(0);
    for (;;) {
      SimTime t = std::min(queue_.next_time(), network_->next_time());
      if (t == kNever) break;
      do {
        while (queue_.next_time() == t) {
          Event e = queue_.pop();
          if (e.version != hot_[static_cast<std::size_t>(e.task)].version) continue;  // rescheduled since
          finish_lane_task(e.task, t);
        }
        if (network_->next_time() == t) {
          finished_.clear();
          // Finishes are counted as task completions; the rest are network-internal events.
          events_ += network_->advance(t, finished_) - static_cast<std::int64_t>(finished_.size());
          for (std::int32_t id : finished_) finish_move(id, t);
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
  void settle(SimTime t) {
    while (!instant_.empty() || !dirty_lanes_.empty()) {
      // Zero-time tasks in the order they became ready (completing one may append more).
      for (std::size_t k = 0; k < instant_.size(); ++k) {
        const std::int32_t i = instant_[k];
        begin_task(i, t);
        complete(i, t);
      }
      instant_.clear();
      dispatch(t);
    }
    if (interfere_) apply_interference(t);
  }

  void make_ready(std::int32_t i, SimTime t) {
    const auto ui = static_cast<std::size_t>(i);
    if (o_.policy == Policy::bsp && phase_[ui] != current_phase_) {
      assert(phase_[ui] > current_phase_);
      held_[static_cast<std::size_t>(phase_[ui])].push_back(i);
      return;
    }
    if (lane_[ui] == kNoLane) {
      instant_.push_back(i);
      return;
    }
    const std::size_t slot = lane_slot(i);
    std::int64_t key = o_.priority == Priority::longest_path ? -hot_[ui].rank : ready_seq_++;
    ReadyHeap& h = ready_[slot];
    h.emplace_back(key, i);
    std::push_heap(h.begin(), h.end(), std::greater<>());
    if (!lane_dirty_[slot]) {
      lane_dirty_[slot] = 1;
      dirty_lanes_.push_back(static_cast<std::int32_t>(slot));
    }
    (void)t;
  }

  std::size_t lane_slot(std::int32_t i) const {
    const auto ui = static_cast<std::size_t>(i);
    return static_cast<std::size_t>(hot_[ui].dev) * kLanes + static_cast<std::size_t>(slot_lane_[ui]);
  }

  void dispatch(SimTime t) {
    // Lanes in the order they became dirty; a lane re-dirtied while dispatching is
    // picked up on the next pass of settle().
    std::vector<std::int32_t>& lanes = dispatch_scratch_;
    lanes.swap(dirty_lanes_);
    for (std::int32_t s : lanes) {
      const auto slot = static_cast<std::size_t>(s);
      lane_dirty_[slot] = 0;
      ReadyHeap& h = ready_[slot];
      while (free_slots_[slot] > 0 && !h.empty()) {
        std::pop_heap(h.begin(), h.end(), std::greater<>());
        std::int32_t i = h.back().second;
        h.pop_back();
        --free_slots_[slot];
        start_lane_task(i, t);
      }
    }
    lanes.clear();
  }

  // Bookkeeping common to every task start.
  void begin_task(std::int32_t i, SimTime t) {
    const auto ui = static_cast<std::size_t>(i);
    hot_[ui].start = t;
    // Critical path: whichever of (last dependency, barrier, lane predecessor) released it last.
    std::int32_t cause = hot_[ui].last_dep;
    SimTime when = hot_[ui].ready;
    if (o_.policy == Policy::bsp && barrier_task_ >= 0 && barrier_ps_ > when && phase_[ui] == current_phase_) {
      cause = barrier_task_;
      when = barrier_ps_;
    }
    if (lane_[ui] != kNoLane) {
      const std::size_t slot = lane_slot(i);
      if (lane_release_task_[slot] >= 0 && lane_release_ps_[slot] > when) cause = lane_release_task_[slot];
    }
    cause_[ui] = cause;
    ++tasks_on_[static_cast<std::size_t>(hot_[ui].dev)];
    if (hot_[ui].writes >= 0) {
      const auto b = static_cast<std::size_t>(hot_[ui].writes);
      if (!allocated_[b]) {
        allocated_[b] = 1;
        add_live(static_cast<std::size_t>(buf_dev_[b]), buf_bytes_[b], t);
      }
    }
  }

  void start_lane_task(std::int32_t i, SimTime t) {
    const auto ui = static_cast<std::size_t>(i);
    const auto dev = static_cast<std::size_t>(hot_[ui].dev);
    begin_task(i, t);
    const int lane = lane_[ui];
    lane_busy_add(dev, lane, +1, t);
    if (lane == kComm) {
      std::int32_t* slots = &moves_active_[dev * static_cast<std::size_t>(o_.comm_channels)];
      for (int c = 0; c < o_.comm_channels; ++c)
        if (slots[c] < 0) {
          slots[c] = i;
          break;
        }
      double slowdown = interfere_ && applied_compute_[dev] ? comm_slowdown_ : 1.0;
      network_->start(i, hot_[ui].route, bytes_[ui], slowdown, t);
      mark_interference(dev);
      return;
    }
    if (lane == kCompute) {
      compute_running_[dev] = i;
      run_factor_[dev] = interfere_ && applied_comm_[dev] ? compute_slowdown_[dev] : 1.0;
      run_remaining_[dev] = static_cast<double>(hot_[ui].nominal);
      run_last_[dev] = t;
      mark_interference(dev);
      schedule_compute(i, dev, t);
      return;
    }
    queue_.push(t + hot_[ui].nominal, Event{i, hot_[ui].version});
  }

  void schedule_compute(std::int32_t i, std::size_t dev, SimTime t) {
    const auto ui = static_cast<std::size_t>(i);
    ++hot_[ui].version;
    // Exact while the factor is 1: run_remaining_ then holds an integer.
    auto d = static_cast<SimTime>(std::llround(run_remaining_[dev] * run_factor_[dev]));
    queue_.push(t + d, Event{i, hot_[ui].version});
  }

  void release_lane(std::int32_t i, SimTime t) {
    const std::size_t slot = lane_slot(i);
    ++free_slots_[slot];
    lane_release_task_[slot] = i;
    lane_release_ps_[slot] = t;
    lane_busy_add(slot / kLanes, lane_[static_cast<std::size_t>(i)], -1, t);
    if (!ready_[slot].empty() && !lane_dirty_[slot]) {
      lane_dirty_[slot] = 1;
      dirty_lanes_.push_back(static_cast<std::int32_t>(slot));
    }
  }

  void finish_lane_task(std::int32_t i, SimTime t) {
    const auto ui = static_cast<std::size_t>(i);
    if (lane_[ui] == kCompute) {
      const auto dev = static_cast<std::size_t>(hot_[ui].dev);
      compute_running_[dev] = -1;
      mark_interference(dev);
    }
    release_lane(i, t);
    complete(i, t);
  }

  void finish_move(std::int32_t i, SimTime t) {
    const auto dev = static_cast<std::size_t>(hot_[static_cast<std::size_t>(i)].dev);
    std::int32_t* slots = &moves_active_[dev * static_cast<std::size_t>(o_.comm_channels)];
    for (int c = 0; c < o_.comm_channels; ++c)
      if (slots[c] == i) {
        slots[c] = -1;
        break;
      }
    mark_interference(dev);
    release_lane(i, t);
    complete(i, t);
  }

  void complete(std::int32_t i, SimTime t) {
    const auto ui = static_cast<std::size_t>(i);
    hot_[ui].end = t;
    ++completed_;
    ++events_;
    for (auto k = read_offset_[ui]; k < read_offset_[ui + 1]; ++k) {
      const auto b = static_cast<std::size_t>(read_buf_[static_cast<std::size_t>(k)]);
      if (--readers_left_[b] == 0) free_buffer(b, t);
    }
    if (hot_[ui].writes >= 0) {
      const auto b = static_cast<std::size_t>(hot_[ui].writes);
      if (--writers_left_[b] == 0 && readers_left_[b] == 0) free_buffer(b, t);
    }
    for (auto s = succ_offset_[ui]; s < succ_offset_[ui + 1]; ++s) {
      const std::int32_t j = succ_[static_cast<std::size_t>(s)];
      const auto uj = static_cast<std::size_t>(j);
      if (t >= hot_[uj].ready) {
        hot_[uj].ready = t;
        hot_[uj].last_dep = i;
      }
      if (--hot_[uj].remaining_deps == 0) make_ready(j, t);
    }
    if (o_.policy == Policy::bsp) {
      const auto p = static_cast<std::size_t>(phase_[ui]);
      if (--phase_left_[p] == 0 && static_cast<std::int32_t>(p) == current_phase_) next_phase(i, t);
    }
  }

  void next_phase(std::int32_t last, SimTime t) {
    const auto phases = static_cast<std::int32_t>(phase_left_.size());
    while (current_phase_ < phases && phase_left_[static_cast<std::size_t>(current_phase_)] == 0) {
      ++current_phase_;
      barrier_task_ = last;
      barrier_ps_ = t;
      if (current_phase_ == phases) break;
      std::vector<std::int32_t> held;
      held.swap(held_[static_cast<std::size_t>(current_phase_)]);
      for (std::int32_t j : held) make_ready(j, t);
    }
  }

  // ---- memory -----------------------------------------------------------------

  void free_buffer(std::size_t b, SimTime t) {
    if (!allocated_[b]) return;
    allocated_[b] = 0;
    add_live(static_cast<std::size_t>(buf_dev_[b]), -buf_bytes_[b], t);
  }

  void add_live(std::size_t dev, std::int64_t delta, SimTime t) {
    std::int64_t& live = live_[dev];
    live += delta;
    if (live > peak_[dev]) {
      peak_[dev] = live;
      peak_ps_[dev] = t;
    }
    if (live > capacity_[dev] && first_over_ps_[dev] < 0) first_over_ps_[dev] = t;
    if (o_.record_memory) memory_.push_back(MemorySample{to_seconds(t), DeviceId(static_cast<std::int32_t>(dev)), live});
  }

  // ---- lanes and interference ---------------------------------------------------

  void lane_busy_add(std::size_t dev, int lane, int delta, SimTime t) {
    const std::size_t slot = dev * kLanes + static_cast<std::size_t>(lane);
    int before = lane_busy_[slot];
    lane_busy_[slot] += delta;
    if (before == 0 && lane_busy_[slot] > 0) lane_since_[slot] = t;
    if (before > 0 && lane_busy_[slot] == 0) lane_total_[slot] += t - lane_since_[slot];
    int any_before = any_busy_[dev];
    any_busy_[dev] += delta;
    if (any_before == 0 && any_busy_[dev] > 0) any_since_[dev] = t;
    if (any_before > 0 && any_busy_[dev] == 0) any_total_[dev] += t - any_since_[dev];
  }

  void mark_interference(std::size_t dev) {
    if (!interfere_ || interf_dirty_[dev]) return;
    interf_dirty_[dev] = 1;
    interf_list_.push_back(static_cast<std::int32_t>(dev));
  }

  // Once the state at time t has settled: devices whose compute or comm lane changed
  // between busy and idle get their running work re-timed.
  void apply_interference(SimTime t) {
    for (std::int32_t d : interf_list_) {
      const auto dev = static_cast<std::size_t>(d);
      interf_dirty_[dev] = 0;
      const std::size_t slot = dev * kLanes;
      const char comm_now = lane_busy_[slot + kComm] > 0;
      const char compute_now = compute_running_[dev] >= 0;
      if (comm_now != applied_comm_[dev]) {
        applied_comm_[dev] = comm_now;
        const std::int32_t c = compute_running_[dev];
        const double factor = comm_now ? compute_slowdown_[dev] : 1.0;
        if (c >= 0 && factor != run_factor_[dev]) {
          run_remaining_[dev] -= static_cast<double>(t - run_last_[dev]) / run_factor_[dev];
          if (run_remaining_[dev] < 0) run_remaining_[dev] = 0;
          run_last_[dev] = t;
          run_factor_[dev] = factor;
          schedule_compute(c, dev, t);
        }
      }
      if (compute_now != applied_compute_[dev]) {
        applied_compute_[dev] = compute_now;
        const std::int32_t* slots = &moves_active_[dev * static_cast<std::size_t>(o_.comm_channels)];
        for (int c = 0; c < o_.comm_channels; ++c)
          if (slots[c] >= 0) network_->set_slowdown(slots[c], compute_now ? comm_slowdown_ : 1.0, t);
      }
    }
    interf_list_.clear();
  }

  // ---- result -----------------------------------------------------------------

  SimResult finish() {
    SimResult r;
    r.network = std::string(network_->name());
    r.policy = o_.policy;
    SimTime makespan = 0;
    std::int32_t last = -1;
    for (std::int32_t i = 0; i < n_; ++i)
      if (hot_[static_cast<std::size_t>(i)].end >= makespan) {
        makespan = hot_[static_cast<std::size_t>(i)].end;
        last = i;
      }
    r.makespan_s = to_seconds(makespan);
    r.events = events_;
    r.bytes_moved = bytes_moved_;
    r.link_bytes = std::move(link_bytes_);
    r.devices.resize(static_cast<std::size_t>(devices_));
    for (std::size_t dev = 0; dev < r.devices.size(); ++dev) {
      DeviceStats& s = r.devices[dev];
      s.compute_busy_s = to_seconds(lane_total_[dev * kLanes + kCompute]);
      s.comm_busy_s = to_seconds(lane_total_[dev * kLanes + kComm]);
      s.copy_busy_s = to_seconds(lane_total_[dev * kLanes + kCopy]);
      s.busy_s = to_seconds(any_total_[dev]);
      s.idle_s = to_seconds(makespan - any_total_[dev]);
      s.tasks = tasks_on_[dev];
      s.peak_memory_bytes = peak_[dev];
      s.peak_memory_time_s = to_seconds(peak_ps_[dev]);
      r.peak_memory_bytes = std::max(r.peak_memory_bytes, peak_[dev]);
      if (peak_[dev] > capacity_[dev])
        r.over_capacity.push_back(MemoryOverflow{DeviceId(static_cast<std::int32_t>(dev)), capacity_[dev], peak_[dev],
                                                 peak_[dev] - capacity_[dev], to_seconds(first_over_ps_[dev]),
                                                 to_seconds(peak_ps_[dev])});
    }
    for (std::int32_t i = last; i >= 0; i = cause_[static_cast<std::size_t>(i)]) r.critical_path.emplace_back(i);
    std::reverse(r.critical_path.begin(), r.critical_path.end());
    r.memory = std::move(memory_);
    r.timeline.source = "sim";
    r.timeline.spans.reserve(static_cast<std::size_t>(n_));
    for (std::int32_t i = 0; i < n_; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      const Task& t = tg_.tasks[ui];
      r.timeline.spans.push_back(Span{TaskId(i), DeviceId(hot_[ui].dev), default_lane(t.kind),
                                      to_seconds(hot_[ui].start), to_seconds(hot_[ui].end)});
    }
    return r;
  }

  const TaskGraph& tg_;
  const Machine& m_;
  const SimOptions& o_;
  std::int32_t n_ = 0;
  std::int32_t devices_ = 0;

  // Per task: the state the event loop touches, one cache line per task (TaskGraph's
  // own Task structs are large and scattered), plus CSR arrays.
  struct alignas(64) Hot {
    SimTime start = -1;
    SimTime end = -1;
    SimTime ready = 0;    // when its last dependency finished
    SimTime nominal = 0;  // undisturbed duration
    SimTime rank = 0;     // longest undisturbed path to the end, itself included
    std::int32_t dev = 0;
    std::int32_t writes = -1;  // buffer, -1 for outputs
    std::int32_t route = -1;   // moves: index into routes_
    std::int32_t remaining_deps = 0;
    std::int32_t last_dep = -1;  // the dependency that finished last
    std::uint32_t version = 0;   // bumped when its finish event is rescheduled
  };
  static_assert(sizeof(Hot) == 64);
  std::vector<Hot> hot_;
  std::vector<std::int8_t> lane_;       // the lane a task's time is accounted to
  std::vector<std::int8_t> slot_lane_;  // the lane it queues for: kCompute on single-lane devices
  std::vector<std::int32_t> read_offset_, read_buf_;
  std::vector<std::int64_t> bytes_;
  std::vector<std::int32_t> succ_offset_, succ_;
  std::vector<std::int32_t> cause_;
  std::vector<std::int32_t> phase_;

  // BSP.
  std::vector<std::int32_t> phase_left_;
  std::vector<std::vector<std::int32_t>> held_;
  std::int32_t current_phase_ = 0;
  std::int32_t barrier_task_ = -1;
  SimTime barrier_ps_ = 0;

  // Per buffer.
  std::vector<std::int64_t> buf_bytes_;
  std::vector<std::int32_t> buf_dev_;
  std::vector<std::int32_t> readers_left_, writers_left_;
  std::vector<char> allocated_;

  // Per (device, lane).
  std::vector<int> free_slots_;
  std::vector<ReadyHeap> ready_;
  std::vector<char> lane_dirty_;
  std::vector<std::int32_t> dirty_lanes_, dispatch_scratch_;
  std::vector<std::int32_t> lane_release_task_;
  std::vector<SimTime> lane_release_ps_;
  std::vector<int> lane_busy_;
  std::vector<SimTime> lane_since_, lane_total_;

  // Per device.
  std::vector<int> any_busy_;
  std::vector<SimTime> any_since_, any_total_;
  std::vector<std::int64_t> tasks_on_;
  std::vector<std::int64_t> live_, peak_, capacity_;
  std::vector<SimTime> peak_ps_, first_over_ps_;
  std::vector<std::int32_t> compute_running_;
  std::vector<double> run_remaining_, run_factor_;
  std::vector<SimTime> run_last_;
  std::vector<std::int32_t> moves_active_;  // comm_channels slots per device
  std::vector<char> applied_comm_, applied_compute_, interf_dirty_;
  std::vector<std::int32_t> interf_list_;
  std::vector<double> compute_slowdown_;
  double comm_slowdown_ = 1;
  bool interfere_ = false;

  RouteTable routes_;
  std::vector<std::int64_t> link_bytes_;
  std::int64_t bytes_moved_ = 0;
  std::unique_ptr<NetworkModel> network_;
  EventQueue<Event> queue_;
  std::vector<std::int32_t> instant_, finished_;
  std::vector<MemorySample> memory_;
  std::int64_t ready_seq_ = 0;
  std::int64_t events_ = 0;
  std::int32_t completed_ = 0;
};

}  // namespace

SimResult simulate(const TaskGraph& tg, const Machine& m, const SimOptions& options) {
  return Run(tg, m, options).run();
}

nlohmann::json to_json(const SimResult& r, const Machine& m) {
  using nlohmann::json;
  json devices = json::array();
  for (std::size_t d = 0; d < r.devices.size(); ++d) {
    const DeviceStats& s = r.devices[d];
    devices.push_back({{"device", d},
                       {"compute_busy_s", s.compute_busy_s},
                       {"comm_busy_s", s.comm_busy_s},
                       {"copy_busy_s", s.copy_busy_s},
                       {"idle_s", s.idle_s},
                       {"tasks", s.tasks},
                       {"peak_memory_bytes", s.peak_memory_bytes}});
  }
  json links = json::array();
  for (std::size_t l = 0; l < r.link_bytes.size(); ++l) {
    if (r.link_bytes[l] == 0) continue;
    const Link& link = m.links.at(l);
    double util = r.makespan_s > 0 ? static_cast<double>(r.link_bytes[l]) / (link.bytes_per_s * r.makespan_s) : 0.0;
    links.push_back({{"link", link.name}, {"bytes", r.link_bytes[l]}, {"utilization", util}});
  }
  json over = json::array();
  for (const MemoryOverflow& o : r.over_capacity)
    over.push_back({{"device", o.device.value},
                    {"capacity_bytes", o.capacity_bytes},
                    {"peak_bytes", o.peak_bytes},
                    {"excess_bytes", o.excess_bytes},
                    {"first_exceeded_s", o.first_exceeded_s},
                    {"peak_time_s", o.peak_time_s}});
  json path = json::array();
  for (TaskId t : r.critical_path) path.push_back(t.value);
  return {{"network", r.network},
          {"policy", std::string(to_string(r.policy))},
          {"machine", m.name},
          {"makespan_s", r.makespan_s},
          {"events", r.events},
          {"sim_wall_s", r.sim_wall_s},
          {"events_per_s", r.sim_wall_s > 0 ? static_cast<double>(r.events) / r.sim_wall_s : 0.0},
          {"bytes_moved", r.bytes_moved},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"devices", devices},
          {"links", links},
          {"critical_path", {{"tasks", path.size()}, {"task_ids", path}}},
          {"over_capacity", over}};
}

}  // namespace tessel::sim
