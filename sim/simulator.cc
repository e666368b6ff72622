#include "sim/simulator.h"

#include <algorithm>
#include <cassert>
#include <atomic>
#include <cmath>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/checked.h"
#include "core/error.h"
#include "sim/collective_engine.h"
#include "sim/compute_model.h"
#include "sim/event_queue.h"
#include "sim/large_pages.h"
#include "sim/network.h"
#include "sim/offload.h"

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
    SimResult r;
    if (stopped_ < 0) r = finish();
    else r.stopped = true, r.makespan_s = to_seconds(stopped_), r.events = events_;  // SimOptions::stop_after_s, cancel
    r.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return r;
  }

 private:
  static constexpr std::int32_t kBarrierEvent = -1;
  // Event::version of a move whose copy loop's per-row cost has passed: its transfer starts.
  static constexpr std::uint32_t kMoveRowsDone = 0xffffffffu;
  static constexpr std::uint32_t kMoveArrived = 0xfffffffeu;  // a move's latency after its bytes has passed
  struct Event {
    std::int32_t task;  // kBarrierEvent: the end of a bsp barrier
    std::uint32_t version;  // compute tasks: the device's run_version_ when it was scheduled
  };
  // A task that became ready: when, and which task released it (for the critical path).
  struct Released {
    std::int32_t task;
    std::int32_t by;  // the dependency that finished last, -1 for none
    SimTime at;
  };
  struct Ready {
    std::int64_t key;  // smallest first: -rank (longest path) or arrival order (FIFO)
    Released r;
    friend bool operator>(const Ready& a, const Ready& b) {
      return a.key > b.key || (a.key == b.key && a.r.task > b.r.task);
    }
  };
  using ReadyHeap = std::vector<Ready>;
  struct Bucket {
    std::int32_t link;  // the first link of its moves' routes, -1 for an empty route
    ReadyHeap heap;
    int in_flight = 0;  // its moves holding a channel
  };
  struct Parked {
    Ready ready;
    std::int32_t slot;  // its lane
  };

  // Per task, what the event loop reads, written once in setup: 32 bytes, so that
  // releasing or starting a task touches one half cache line of it.
  struct alignas(32) Info {
    SimTime rank = 0;          // longest undisturbed path to the end, itself included
    std::int64_t amount = 0;   // moves: bytes; other tasks: undisturbed duration (ps)
    std::int32_t dev = 0;      // the device whose lanes run it
    std::int32_t writes = -1;  // buffer, -1 for outputs
    std::int32_t route = -1;   // moves: index into routes_
    std::int8_t lane = kNoLane;       // the lane its time is accounted to
    std::int8_t slot_lane = kNoLane;  // the lane it queues for: kCompute on single-lane devices
    std::uint16_t reads = 0;          // buffers it reads: the first `reads` of its adjacency
  };
  static_assert(sizeof(Info) == 32);

  // ---- setup ------------------------------------------------------------------

  void setup() {
    if (o_.comm_channels < 1) fail("simulate: comm_channels must be >= 1, got ", o_.comm_channels);
    if (!o_.task_seconds.empty() && o_.task_seconds.size() != tg_.tasks.size())
      fail("simulate: task_seconds has ", o_.task_seconds.size(), " entries for ", tg_.tasks.size(), " tasks");
    for (std::size_t i = 0; i < o_.task_seconds.size(); ++i)
      if (!std::isfinite(o_.task_seconds[i]))
        fail("simulate: task_seconds[", i, "] is not a finite number");
    if (!o_.task_seconds_cold.empty() && o_.task_seconds_cold.size() != tg_.tasks.size())
      fail("simulate: task_seconds_cold has ", o_.task_seconds_cold.size(), " entries for ", tg_.tasks.size(),
           " tasks");
    for (std::size_t i = 0; i < o_.task_seconds_cold.size(); ++i)
      if (!std::isfinite(o_.task_seconds_cold[i]))
        fail("simulate: task_seconds_cold[", i, "] is not a finite number");
    if (!o_.fused.empty() && o_.fused.size() != tg_.tasks.size())
      fail("simulate: fused has ", o_.fused.size(), " entries for ", tg_.tasks.size(), " tasks");
    m_.validate(m_.name.empty() ? "machine" : m_.name);
    if (tg_.num_devices > m_.num_devices())
      fail("the task graph is placed on ", tg_.num_devices, " devices but machine '", m_.name, "' has ",
           m_.num_devices());
    n_ = static_cast<std::int32_t>(tg_.tasks.size());
    devices_ = tg_.num_devices;
    const auto n = static_cast<std::size_t>(n_);
    const std::size_t nb = tg_.buffers.size();
    bufs_.resize(nb);
    for (std::size_t b = 0; b < nb; ++b) {
      const Buffer& buf = tg_.buffers[b];
      if (!buf.device.valid() || buf.device.value >= devices_)
        fail("task graph: buffer ", b, " lives on device ", buf.device.value, " of ", devices_);
      bufs_[b].bytes = buf.bytes();
      bufs_[b].dev = buf.device.value;
      bufs_[b].host = buf.host;
    }
    check_host_memory(tg_, m_);
    info_.resize(n);
    deps_left_.resize(n);
    link_bytes_.assign(m_.links.size(), 0);
    if (o_.channels_per_link) first_links_.assign(static_cast<std::size_t>(devices_), {});
    // Route per (source, destination) pair: a flat table for up to 2,048 devices, a hash
    // map beyond (lookups only; no order is taken from it).
    const bool flat = devices_ <= 2048;
    LargeVector<std::int32_t> route_flat(flat ? static_cast<std::size_t>(devices_) * static_cast<std::size_t>(devices_) : 0, -1);
    std::unordered_map<std::int64_t, std::int32_t> route_map;
    std::vector<LinkId> route_links;  // scratch
    // One pass over the tasks: TaskGraph::validate()'s checks, and every field the event
    // loop needs copied into compact arrays (TaskGraph's own Task structs are large).
    // adj_offset_[i + 1] counts task i's successors until the offsets are summed; rank
    // holds each task's undisturbed duration until the priority pass replaces it.
    adj_offset_.assign(n + 1, 0);
    LargeVector<std::int32_t> dep_offset(n + 1, 0), dep_buf, read_buf;
    std::vector<const DeviceType*> type_of(static_cast<std::size_t>(devices_));
    std::vector<char> single_lane(static_cast<std::size_t>(devices_));
    for (std::int32_t dev = 0; dev < devices_; ++dev) {
      type_of[static_cast<std::size_t>(dev)] = &m_.type_of(DeviceId(dev));
      single_lane[static_cast<std::size_t>(dev)] = type_of[static_cast<std::size_t>(dev)]->single_lane;
    }
    dep_buf.reserve(n * 2);
    read_buf.reserve(n * 2);
    for (std::size_t i = 0; i < n; ++i) {
      const Task& t = tg_.tasks[i];
      Info& in = info_[i];
      for (TaskId d : t.deps) {
        if (!d.valid() || d.index() >= i)
          fail("task graph: task ", i, " depends on task ", d.value, ", which does not precede it");
        dep_buf.push_back(d.value);
        ++adj_offset_[d.index() + 1];
      }
      dep_offset[i + 1] = static_cast<std::int32_t>(dep_buf.size());
      deps_left_[i] = static_cast<std::int32_t>(t.deps.size());
      if (t.reads.size() > std::numeric_limits<std::uint16_t>::max())
        fail("task graph: task ", i, " reads ", t.reads.size(), " buffers; the simulator supports at most ",
             std::numeric_limits<std::uint16_t>::max());
      for (BufferId b : t.reads) {
        if (!b.valid() || b.index() >= nb) fail("task graph: task ", i, " reads unknown buffer ", b.value);
        read_buf.push_back(b.value);
        ++bufs_[b.index()].readers_left;
      }
      in.reads = static_cast<std::uint16_t>(t.reads.size());
      if (t.kind != TaskKind::output && (!t.writes.valid() || t.writes.index() >= nb))
        fail("task graph: task ", i, " writes unknown buffer ", t.writes.value);
      if (!t.device.valid() || t.device.value >= devices_ || !t.dst_device.valid() || t.dst_device.value >= devices_)
        fail("task graph: task ", i, " runs on device ", t.device.value, " of ", devices_);
      // The device whose lanes run the task. A move into a single-lane device (a CPU
      // worker) is a copy the receiving worker makes itself when it is free: it runs there.
      in.dev = t.kind == TaskKind::move && single_lane[t.dst_device.index()] ? t.dst_device.value : t.device.value;
      in.writes = t.writes.valid() ? t.writes.value : -1;
      if (t.writes.valid()) ++bufs_[t.writes.index()].writers_left;
      switch (t.kind) {
        case TaskKind::input:
        case TaskKind::output: in.lane = kNoLane; break;
        case TaskKind::collective: fail("task graph: task ", i, " is a collective node mixed with other tasks (not supported yet)");
        case TaskKind::compute: in.lane = kCompute; break;
        case TaskKind::touch: in.lane = kCopy; break;
        case TaskKind::move: in.lane = kComm; break;
        case TaskKind::evict:
        case TaskKind::load: in.lane = kCopy; break;  // over the device's host link (offload.h)
      }
      in.slot_lane = in.lane != kNoLane && single_lane[static_cast<std::size_t>(in.dev)] ? kCompute : in.lane;
      if (t.kind == TaskKind::move) {
        const std::int64_t key = static_cast<std::int64_t>(t.device.value) * devices_ + t.dst_device.value;
        std::int32_t* slot = nullptr;
        if (flat) {
          slot = &route_flat[static_cast<std::size_t>(key)];
        } else {
          slot = &route_map.try_emplace(key, -1).first->second;
        }
        if (*slot < 0) {
          m_.route(t.device, t.dst_device, route_links);
          *slot = routes_.add(m_, route_links);
        }
        const std::int32_t r = *slot;
        in.route = r;
        if (o_.channels_per_link) {  // the device's distinct first links, for the channel pools
          auto route = routes_.route(r);
          auto& firsts = first_links_[static_cast<std::size_t>(in.dev)];
          const std::int32_t first = route.empty() ? -1 : route[0].value;
          if (std::find(firsts.begin(), firsts.end(), first) == firsts.end()) firsts.push_back(first);
        }
        for (LinkId l : routes_.route(r))
          link_bytes_[l.index()] = checked_add(link_bytes_[l.index()], t.bytes, "simulate: bytes over one link");
        bytes_moved_ = checked_add(bytes_moved_, t.bytes, "simulate: bytes moved");
        SimTime serial = t.bytes > 0 ? to_sim_time(static_cast<double>(t.bytes) / routes_.bytes_per_s(r)) : 0;
        // A copy loop's per-row cost (the receiving CPU worker's strided copy), before its
        // bytes flow.
        const double row_s = type_of[t.dst_device.index()]->copy_row_s;
        if (row_s > 0) {
          if (move_rows_.empty()) move_rows_.assign(n, 0);
          move_rows_[i] = to_sim_time(inner_rows(t) * row_s);
          serial = add_sim_time(serial, move_rows_[i]);
        }
        in.rank = add_sim_time(routes_.latency(r), serial);
        if (in.rank >= kMaxSimTime) fail_beyond_clock(i, "its transfer");
        in.amount = t.bytes;
      } else if (t.kind == TaskKind::evict || t.kind == TaskKind::load) {
        in.rank = in.amount = host_copy_ps(m_, t, link_bytes_);
        if (in.amount >= kMaxSimTime) fail_beyond_clock(i, "its copy");
      } else if (in.lane != kNoLane) {
        const double measured = o_.task_seconds.empty() ? -1.0 : o_.task_seconds[i];
        in.rank = in.amount =
            to_sim_time(measured >= 0 ? measured : compute_seconds(t, tg_, *type_of[t.device.index()]));
        if (in.amount >= kMaxSimTime) fail_beyond_clock(i, "it");
      }
    }
    // In flight at once: comm_channels moves per device (per first link of their routes
    // with channels_per_link); ids are the slots of moves_active_.
    std::size_t pools = 1;
    for (const auto& f : first_links_) pools = std::max(pools, f.size());
    chan_stride_ = static_cast<std::size_t>(o_.comm_channels) * pools;
    const auto slots = static_cast<std::size_t>(devices_) * chan_stride_;
    network_ = make_network_model(o_.network, NetworkContext{m_, routes_, static_cast<std::int32_t>(slots), true});
    freed_links_ = network_->freed_links();
    if (freed_links_) {
      link_waiters_.assign(m_.links.size(), {});
      parked_.assign(m_.links.size(), {});
      unpark_pending_.assign(m_.links.size(), 0);
    }

    // Adjacency (CSR): per task, the buffers it reads, then its successors in task order.
    for (std::size_t i = 0; i < n; ++i)
      adj_offset_[i + 1] += adj_offset_[i] + static_cast<std::int32_t>(info_[i].reads);
    adj_.resize(static_cast<std::size_t>(adj_offset_[n]));
    {
      // Reads first; dep_offset then becomes each task's next free successor position.
      std::size_t r = 0;
      for (std::size_t i = 0; i < n; ++i) {
        auto at = static_cast<std::size_t>(adj_offset_[i]);
        for (std::uint16_t k = 0; k < info_[i].reads; ++k) adj_[at++] = read_buf[r++];
      }
      LargeVector<std::int32_t>& fill = read_buf;
      fill.resize(n);
      for (std::size_t i = 0; i < n; ++i) fill[i] = adj_offset_[i] + static_cast<std::int32_t>(info_[i].reads);
      for (std::size_t i = 0; i < n; ++i)
        for (auto k = dep_offset[i]; k < dep_offset[i + 1]; ++k)
          adj_[static_cast<std::size_t>(fill[static_cast<std::size_t>(dep_buf[static_cast<std::size_t>(k)])]++)] =
              static_cast<std::int32_t>(i);
    }

    // Priority: the longest undisturbed path from a task to the end, itself included.
    // In reverse task order every successor's rank is final when it is read.
    if (o_.priority == Priority::longest_path) {
      for (std::size_t i = n; i-- > 0;) {
        SimTime best = 0;
        for (auto s = adj_offset_[i] + info_[i].reads; s < adj_offset_[i + 1]; ++s)
          best = std::max(best, info_[static_cast<std::size_t>(adj_[static_cast<std::size_t>(s)])].rank);
        info_[i].rank = add_sim_time(info_[i].rank, best);
      }
    } else {
      for (Info& in : info_) in.rank = 0;
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
      barrier_latency_ = to_sim_time(m_.barrier_latency_s);
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

    rec_.resize(n);
    const auto d = static_cast<std::size_t>(devices_);
    free_slots_.resize(d * kLanes);
    for (std::size_t dev = 0; dev < d; ++dev) {
      free_slots_[dev * kLanes + kCompute] = 1;
      free_slots_[dev * kLanes + kCopy] = 1;
      free_slots_[dev * kLanes + kComm] = static_cast<int>(chan_stride_);
    }
    ready_.assign(d * kLanes, {});
    bucketed_ = freed_links_ || o_.channels_per_link;
    if (bucketed_) {
      buckets_.assign(d * kLanes, {});
      bucket_count_.assign(d * kLanes, 0);
    }
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

    setup_cache();

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
    run_version_.assign(d, 0);
    run_remaining_.assign(d, 0);
    run_factor_.assign(d, 1);
    run_last_.assign(d, 0);
    moves_active_.assign(slots, -1);
    slot_route_.assign(slots, -1);
    channel_routes_ = std::make_unique<ChannelRoutes>(m_, routes_);
    network_max_route_ = routes_.max_length;
    topology_ = m_.has_topology();
    applied_comm_.assign(d, 0);
    applied_compute_.assign(d, 0);
    interf_dirty_.assign(d, 0);
    queue_.reserve(static_cast<std::size_t>(devices_) * 4);
  }

  // ---- the clock's limit ------------------------------------------------------

  [[noreturn]] void fail_beyond_clock(std::size_t i, const char* what) const {
    const Task& t = tg_.tasks[i];
    fail("simulate: task ", i, " (", to_string(t.kind), " on device ", t.device.value, ") alone: ", what,
         " would take at least ", kMaxSimSeconds, " s, the simulator's clock limit (4e18 ps, about 46 days)");
  }

  [[noreturn]] void fail_clock_limit() const {
    std::string running;
    for (std::size_t dev = 0; dev < compute_running_.size() && running.empty(); ++dev)
      if (compute_running_[dev] >= 0) running = "; task " + std::to_string(compute_running_[dev]) + " is running on device " + std::to_string(dev);
    fail("simulate: the simulated run passes ", kMaxSimSeconds,
         " s, the simulator's clock limit (4e18 ps, about 46 days)", running,
         " — a machine too slow for the workload (check its flop/s and link bandwidths) or a workload too large");
  }

  // ---- event loop -------------------------------------------------------------

  void loop() {
    for (std::int32_t i = 0; i < n_; ++i)
      if (deps_left_[static_cast<std::size_t>(i)] == 0) make_ready(Released{i, -1, 0});
    settle(0);
    for (;;) {
      SimTime t = std::min(queue_.next_time(), network_->next_time());
      if (t == kNever) break;
      if (t >= kMaxSimTime) fail_clock_limit();
      if (completed_ < n_ && (t > stop_at_ || (o_.cancel && o_.cancel->load(std::memory_order_relaxed)))) {
        stopped_ = t;  // tasks end at t or later: the makespan is at least t
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
  void settle(SimTime t) {
    while (!instant_.empty() || !dirty_lanes_.empty() || !unpark_links_.empty()) {
      // Zero-time tasks in the order they became ready (completing one may append more).
      for (std::size_t k = 0; k < instant_.size(); ++k) {
        const Released r = instant_[k];
        begin_task(r, t);
        complete(r.task, t);
      }
      instant_.clear();
      if (!unpark_links_.empty()) unpark();
      dispatch(t);
    }
    if (interfere_) apply_interference(t);
  }

  void make_ready(const Released& r) {
    const auto ui = static_cast<std::size_t>(r.task);
    if (o_.policy == Policy::bsp && phase_[ui] != current_phase_) {
      assert(phase_[ui] > current_phase_);
      held_[static_cast<std::size_t>(phase_[ui])].push_back(r);
      return;
    }
    const Info& in = info_[ui];
    if (in.lane == kNoLane) {
      instant_.push_back(r);
      return;
    }
    const std::size_t slot = lane_slot(in);
    // Lines its start will write, requested now.
    __builtin_prefetch(&rec_[ui], 1);
    __builtin_prefetch(&adj_offset_[ui]);
    if (in.writes >= 0) __builtin_prefetch(&bufs_[static_cast<std::size_t>(in.writes)], 1);
    std::int64_t key = o_.priority == Priority::longest_path ? -in.rank : ready_seq_++;
    if (bucketed_ && in.slot_lane == kComm) {
      push_bucket(slot, Ready{key, r});
    } else {
      ReadyHeap& h = ready_[slot];
      h.push_back(Ready{key, r});
      std::push_heap(h.begin(), h.end(), std::greater<>());
    }
    if (!lane_dirty_[slot]) {
      lane_dirty_[slot] = 1;
      dirty_lanes_.push_back(static_cast<std::int32_t>(slot));
    }
  }

  static std::size_t lane_slot(const Info& in) {
    return static_cast<std::size_t>(in.dev) * kLanes + static_cast<std::size_t>(in.slot_lane);
  }

  void dispatch(SimTime t) {
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
        start_lane_task(r, t);
      }
      for (const Ready& w : waiting_scratch_) {
        h.push_back(w);
        std::push_heap(h.begin(), h.end(), std::greater<>());
      }
      waiting_scratch_.clear();
    }
    lanes.clear();
  }

  // Lanes whose ready moves waited for a link that is free now are dispatched again;
  // moves parked on it go back to their lanes.
  void wake_link_waiters() {
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
  void unpark() {
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
  static bool parked_after(const Parked& a, const Parked& b) { return a.ready > b.ready; }
  void park(std::int32_t link, const Parked& p) {
    auto& heap = parked_[static_cast<std::size_t>(link)];
    heap.push_back(p);
    std::push_heap(heap.begin(), heap.end(), parked_after);
  }

  void mark_lane(std::size_t slot) {
    if (!lane_dirty_[slot] && has_ready(slot)) {
      lane_dirty_[slot] = 1;
      dirty_lanes_.push_back(static_cast<std::int32_t>(slot));
    }
  }
  [[nodiscard]] bool has_ready(std::size_t slot) const {
    return !ready_[slot].empty() || (bucketed_ && bucket_count_[slot] > 0);
  }

  // Under a model with busy() (alpha-beta), a comm lane's ready moves sit in one heap per
  // first link of their route (the device's NVLink, NIC, PCIe): a bucket whose top move
  // finds that link full is skipped as a whole, so a device with thousands of moves queued
  // behind its own busy link costs one check, not thousands. A top move that is blocked
  // further along its route (a receiver's link) is parked on that link until it frees.
  void push_bucket(std::size_t slot, const Ready& r) {
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

  void dispatch_buckets(std::size_t slot, SimTime t) {
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
      start_lane_task(r, t);
    }
  }

  // Bookkeeping common to every task start.
  void begin_task(const Released& r, SimTime t) {
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

  // ---- cache model (SimOptions::task_seconds_cold) ---------------------------------

  void setup_cache() {
    cache_model_ = !o_.task_seconds_cold.empty();
    if (!cache_model_) return;
    const auto d = static_cast<std::size_t>(devices_);
    const std::size_t nb = bufs_.size();
    cache_cap_.assign(d, 0);
    for (std::size_t dev = 0; dev < d; ++dev)
      cache_cap_[dev] = m_.type_of(DeviceId(static_cast<std::int32_t>(dev))).cache_capacity_bytes;
    cache_used_.assign(d, 0);
    lru_head_.assign(d, -1);
    lru_tail_.assign(d, -1);
    lru_prev_.assign(nb, -1);
    lru_next_.assign(nb, -1);
    in_cache_.assign(nb, 0);
    cold_extra_.assign(static_cast<std::size_t>(n_), 0);
    for (std::size_t i = 0; i < static_cast<std::size_t>(n_); ++i) {
      const double cold = o_.task_seconds_cold[i];
      // Devices without a known cache keep their hot times.
      if (tg_.tasks[i].kind == TaskKind::compute && cold >= 0 && cache_cap_[static_cast<std::size_t>(info_[i].dev)] > 0)
        cold_extra_[i] = std::max<SimTime>(0, to_sim_time(cold) - static_cast<SimTime>(info_[i].amount));
    }
    // As the CPU executor starts a run: each worker first touches every buffer of its
    // device in id order, then writes its input blocks. (The executor preallocates so
    // while all buffers fit in a quarter of the RAM; beyond, it allocates each buffer
    // when first written, and this start state is then only an approximation.)
    for (std::size_t b = 0; b < nb; ++b) cache_use(static_cast<std::int32_t>(b));
    for (std::size_t i = 0; i < static_cast<std::size_t>(n_); ++i)
      if (tg_.tasks[i].kind == TaskKind::input) cache_use(info_[i].writes);
  }

  void lru_unlink(std::int32_t b, std::size_t dev) {
    const auto ub = static_cast<std::size_t>(b);
    const std::int32_t p = lru_prev_[ub], nx = lru_next_[ub];
    if (p >= 0) lru_next_[static_cast<std::size_t>(p)] = nx; else lru_head_[dev] = nx;
    if (nx >= 0) lru_prev_[static_cast<std::size_t>(nx)] = p; else lru_tail_[dev] = p;
    lru_prev_[ub] = lru_next_[ub] = -1;
    in_cache_[ub] = 0;
    cache_used_[dev] -= bufs_[ub].bytes;
  }

  // Buffer b was just used on its device: most recently used, evicting the least
  // recently used beyond the capacity.
  void cache_use(std::int32_t b) {
    if (b < 0) return;
    const auto ub = static_cast<std::size_t>(b);
    const auto dev = static_cast<std::size_t>(bufs_[ub].dev);
    const std::int64_t cap = cache_cap_[dev];
    if (cap <= 0) return;
    if (in_cache_[ub]) lru_unlink(b, dev);
    if (bufs_[ub].bytes > cap) {  // flushes the cache and does not fit itself
      while (lru_tail_[dev] >= 0) lru_unlink(lru_tail_[dev], dev);
      return;
    }
    lru_next_[ub] = lru_head_[dev];
    if (lru_head_[dev] >= 0) lru_prev_[static_cast<std::size_t>(lru_head_[dev])] = b; else lru_tail_[dev] = b;
    lru_head_[dev] = b;
    in_cache_[ub] = 1;
    cache_used_[dev] += bufs_[ub].bytes;
    while (cache_used_[dev] > cap) lru_unlink(lru_tail_[dev], dev);
  }

  // Task i starts: the extra picoseconds its data's absence from the cache costs it
  // (compute tasks with a cold time), then its buffers become the most recently used.
  SimTime cache_start(std::int32_t i) {
    const auto ui = static_cast<std::size_t>(i);
    const Info& in = info_[ui];
    const auto reads = adj_.begin() + adj_offset_[ui];
    SimTime extra = 0;
    if (cold_extra_[ui] > 0) {
      std::int64_t total = 0, missing = 0;
      auto count = [&](std::int32_t b) {
        const auto ub = static_cast<std::size_t>(b);
        total += bufs_[ub].bytes;
        if (!in_cache_[ub]) missing += bufs_[ub].bytes;
      };
      // Each buffer once: an operand read twice (x·x of RMSNorm) or read and written is
      // one set of cache lines.
      auto seen_before = [&](std::uint16_t k, std::int32_t b) {
        for (std::uint16_t j = 0; j < k; ++j)
          if (reads[j] == b) return true;
        return false;
      };
      for (std::uint16_t k = 0; k < in.reads; ++k)
        if (!seen_before(k, reads[k])) count(reads[k]);
      if (in.writes >= 0 && !seen_before(in.reads, in.writes)) count(in.writes);
      if (total > 0)
        extra = to_sim_ps(static_cast<double>(cold_extra_[ui]) * static_cast<double>(missing) /
                          static_cast<double>(total));
    }
    if (in.lane == kComm) {  // a move: its destination, on the receiving device
      cache_use(in.writes);
    } else {
      for (std::uint16_t k = 0; k < in.reads; ++k) cache_use(reads[k]);
      cache_use(in.writes);
    }
    return extra;
  }

  void start_lane_task(const Released& r, SimTime t) {
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
      run_factor_[dev] = interfere_ && applied_comm_[dev] && !is_fused(i) ? compute_slowdown_[dev] : 1.0;
      run_remaining_[dev] = static_cast<double>(in.amount + cold);
      run_last_[dev] = t;
      mark_interference(dev);
      schedule_compute(i, dev, t);
      return;
    }
    queue_.push(t + in.amount, Event{i, 0});
  }

  // Channel c of a device takes the ECMP route of (source, destination, c) (ChannelRoutes).
  std::int32_t channel_route(std::int32_t i, std::size_t c) {
    const std::int32_t r = info_[static_cast<std::size_t>(i)].route;
    if (c == 0 || !topology_) return r;
    const Task& task = tg_.tasks[static_cast<std::size_t>(i)];
    return channel_routes_->get(r, task.device, task.dst_device, static_cast<std::uint32_t>(c), network_max_route_);
  }
  // The route move i would take on the channel it would get now.
  std::int32_t route_now(std::int32_t i) {
    if (!topology_) return info_[static_cast<std::size_t>(i)].route;
    const std::size_t base = static_cast<std::size_t>(info_[static_cast<std::size_t>(i)].dev) * chan_stride_;
    std::size_t c = 0;
    while (c + 1 < chan_stride_ && moves_active_[base + c] >= 0) ++c;
    return channel_route(i, c);
  }

  // Move i, holding channel `slot` of its device since it started, hands its bytes to the network.
  void start_transfer(std::int32_t i, std::size_t slot, SimTime t) {
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

  void schedule_compute(std::int32_t i, std::size_t dev, SimTime t) {
    ++run_version_[dev];
    // Exact while the factor is 1: run_remaining_ then holds an integer.
    const SimTime d = to_sim_ps(run_remaining_[dev] * run_factor_[dev]);  // saturates at the clock's limit
    queue_.push(t + d, Event{i, run_version_[dev]});
  }

  void release_lane(const Info& in, std::int32_t i, SimTime t) {
    const std::size_t slot = lane_slot(in);
    ++free_slots_[slot];
    lane_release_task_[slot] = i;
    lane_release_ps_[slot] = t;
    lane_busy_add(static_cast<std::size_t>(in.dev), in.lane, -1, t);
    mark_lane(slot);
  }

  void finish_lane_task(std::int32_t i, SimTime t) {
    const Info& in = info_[static_cast<std::size_t>(i)];
    if (in.lane == kCompute) {
      const auto dev = static_cast<std::size_t>(in.dev);
      compute_running_[dev] = -1;
      mark_interference(dev);
    }
    release_lane(in, i, t);
    complete(i, t);
  }

  void finish_move(std::int32_t slot, SimTime t) {
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

  void complete(std::int32_t i, SimTime t) {
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

  void next_phase(std::int32_t last, SimTime t) {
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

  // ---- memory -----------------------------------------------------------------

  void free_buffer(std::size_t b, SimTime t) {
    Buf& buf = bufs_[b];
    if (!buf.allocated) return;
    buf.allocated = false;
    if (!buf.host) add_live(static_cast<std::size_t>(buf.dev), -buf.bytes, t);
  }

  void add_live(std::size_t dev, std::int64_t delta, SimTime t) {
    std::int64_t& live = live_[dev];
    if (__builtin_add_overflow(live, delta, &live))
      fail("simulate: the bytes live on device ", dev, " overflow 64-bit integers (more than ", kMaxInt64, ")");
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

  // A task of a fused computation-collective kernel: exempt from interference (sim/fuse.h).
  [[nodiscard]] bool is_fused(std::int32_t i) const {
    return i >= 0 && !o_.fused.empty() && o_.fused[static_cast<std::size_t>(i)] != 0;
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
        const double factor = comm_now && !is_fused(c) ? compute_slowdown_[dev] : 1.0;
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
        const std::size_t base = dev * chan_stride_;
        for (std::size_t c = 0; c < static_cast<std::size_t>(o_.comm_channels); ++c)
          if (moves_active_[base + c] >= 0)
            network_->set_slowdown(static_cast<std::int32_t>(base + c),
                                   compute_now && !is_fused(moves_active_[base + c]) ? comm_slowdown_ : 1.0, t);
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
      if (rec_[static_cast<std::size_t>(i)].end >= makespan) {
        makespan = rec_[static_cast<std::size_t>(i)].end;
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
    for (std::int32_t i = last; i >= 0; i = rec_[static_cast<std::size_t>(i)].cause) r.critical_path.emplace_back(i);
    std::reverse(r.critical_path.begin(), r.critical_path.end());
    r.memory = std::move(memory_);
    r.timeline.source = "sim";
    r.timeline.spans.reserve(static_cast<std::size_t>(n_));
    for (std::int32_t i = 0; i < n_; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      // Inputs and outputs have no lane of their own; the timeline shows them on compute.
      const Lane lane = info_[ui].lane == kNoLane ? Lane::compute : static_cast<Lane>(info_[ui].lane);
      r.timeline.spans.push_back(Span{TaskId(i), DeviceId(info_[ui].dev), lane, to_seconds(rec_[ui].start),
                                      to_seconds(rec_[ui].end)});
    }
    return r;
  }

  const TaskGraph& tg_;
  const Machine& m_;
  const SimOptions& o_;
  std::int32_t n_ = 0;
  std::int32_t devices_ = 0;

  // Per task, what the run records: written when it starts and ends.
  struct Record {
    SimTime start = -1;
    SimTime end = -1;
    std::int32_t cause = -1;  // the task that released it last (critical path)
  };
  LargeVector<Info> info_;
  LargeVector<std::int32_t> deps_left_;  // dependencies not yet finished
  LargeVector<std::int32_t> adj_offset_, adj_;  // CSR: reads, then successors
  LargeVector<Record> rec_;
  std::vector<std::int32_t> phase_;

  // BSP.
  std::vector<std::int32_t> phase_left_;
  std::vector<std::vector<Released>> held_;
  std::int32_t current_phase_ = 0;
  SimTime barrier_latency_ = 0;    // Machine::barrier_latency_s
  std::int32_t barrier_last_ = -1;  // the task that ended the phase whose barrier is pending
  std::int32_t barrier_task_ = -1;
  SimTime barrier_ps_ = 0;

  // Per buffer: one entry, so that a read or write touches one line.
  struct Buf {
    std::int64_t bytes = 0;
    std::int32_t dev = 0;
    std::int32_t readers_left = 0;
    std::int32_t writers_left = 0;
    bool allocated = false;
    bool host = false;  // in host RAM (Buffer::host): not counted in device memory
  };
  LargeVector<Buf> bufs_;
  LargeVector<SimTime> move_rows_;  // per task: a move's per-row copy cost (empty: none)
  // cache model: per device its capacity, bytes held and LRU list (head: most recent);
  // per buffer its list links; per task the extra picoseconds when nothing is cached
  bool cache_model_ = false;
  std::vector<std::int64_t> cache_cap_, cache_used_;
  std::vector<std::int32_t> lru_head_, lru_tail_, lru_prev_, lru_next_;
  std::vector<char> in_cache_;
  std::vector<SimTime> cold_extra_;

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
  std::vector<std::uint32_t> run_version_;  // bumped whenever its compute finish is (re)scheduled
  std::vector<double> run_remaining_, run_factor_;
  std::vector<SimTime> run_last_;
  std::vector<std::int32_t> moves_active_;  // comm_channels slots per device: the network's transfer ids
  std::vector<char> applied_comm_, applied_compute_, interf_dirty_;
  std::vector<std::int32_t> interf_list_;
  std::vector<double> compute_slowdown_;
  double comm_slowdown_ = 1;
  bool interfere_ = false;

  RouteTable routes_;
  std::vector<std::int64_t> link_bytes_;
  std::int64_t bytes_moved_ = 0;
  std::unique_ptr<NetworkModel> network_;
  std::unique_ptr<ChannelRoutes> channel_routes_;  // ECMP per channel on topology graphs
  std::vector<std::int32_t> slot_route_;          // per slot: the route its transfer takes
  std::int32_t network_max_route_ = 0;
  bool topology_ = false;  // routes depend on the channel
  // A model that serves a link one transfer at a time (network.h, busy()): the links it
  // freed, and per link the lanes (dev * kLanes + lane) holding a ready move that waits for it.
  std::vector<std::int32_t>* freed_links_ = nullptr;
  std::vector<std::vector<std::int32_t>> link_waiters_;
  std::vector<Ready> waiting_scratch_;
  bool bucketed_ = false;   // comm lanes keep buckets (a model with busy(), or channels_per_link)
  std::size_t chan_stride_ = 1;  // channel slots per device
  std::vector<std::vector<std::int32_t>> first_links_;  // channels_per_link: per device, its routes' first links
  std::vector<std::vector<Bucket>> buckets_;  // per lane slot (comm lanes)
  std::vector<std::int32_t> bucket_count_;    // per lane slot: ready moves in its buckets
  std::vector<char> bucket_blocked_;          // scratch
  std::vector<std::vector<Parked>> parked_;   // per link: moves whose route waits for it (a heap, best on top)
  std::vector<char> unpark_pending_;           // per link: in unpark_links_
  std::vector<std::int32_t> unpark_links_, unpark_scratch_;  // free links with parked moves to return
  EventQueue<Event> queue_;
  std::vector<Released> instant_;
  std::vector<std::int32_t> finished_;
  std::vector<MemorySample> memory_;
  std::int64_t ready_seq_ = 0;
  std::int64_t events_ = 0;
  std::int32_t completed_ = 0;
  SimTime stop_at_ = std::isfinite(o_.stop_after_s) ? to_sim_time(std::max(0.0, o_.stop_after_s)) : kNever, stopped_ = -1;
};

}  // namespace

SimResult simulate(const TaskGraph& tg, const Machine& m, const SimOptions& options) {
  if (tg.has_collectives()) return simulate_collective_node(tg, m, options);  // collective_engine.h
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
