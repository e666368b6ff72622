// Run::setup(): a TaskGraph, Machine and SimOptions checked and compiled into the
// run's arrays (sim/run.h).

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>

#include "core/checked.h"
#include "core/error.h"
#include "core/memory_plan.h"
#include "sim/compute_model.h"
#include "sim/offload.h"
#include "sim/run.h"

namespace tessel::sim::detail {

void Run::setup() {
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
  if (o_.cache_capacity_bytes < 0)
    fail("simulate: cache_capacity_bytes must be >= 0, got ", o_.cache_capacity_bytes);
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
  std::vector<char> single_lane(static_cast<std::size_t>(devices_)), host_copy_lane(static_cast<std::size_t>(devices_));
  for (std::int32_t dev = 0; dev < devices_; ++dev) {
    type_of[static_cast<std::size_t>(dev)] = &m_.type_of(DeviceId(dev));
    single_lane[static_cast<std::size_t>(dev)] = type_of[static_cast<std::size_t>(dev)]->single_lane;
    host_copy_lane[static_cast<std::size_t>(dev)] = type_of[static_cast<std::size_t>(dev)]->host_copy_lane;
  }
  static_assert(kMaxDevices - 1 <= std::numeric_limits<std::uint16_t>::max(), "a stagger step fits route_step_");
  const StaggerLayout stagger{devices_, devices_per_host(m_, devices_)};
  dep_buf.reserve(n * 2);
  read_buf.reserve(n * 2);
  // In a memory-planned graph both executors copy each output block off its device when
  // the output task runs (its range is reused after it): a copy to the host, timed as an
  // evict of the block over the device's host route. The CPU worker makes that copy
  // itself (also with a copy lane); elsewhere it takes the host link's outgoing
  // direction. Otherwise outputs are gathered after the run and take no time.
  const bool planned = memory_planned(tg_);
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
    const bool output_copy = planned && t.kind == TaskKind::output;
    switch (t.kind) {
      case TaskKind::input: in.lane = kNoLane; break;
      case TaskKind::output: in.lane = output_copy ? kCopy : kNoLane; break;
      case TaskKind::collective: fail("task graph: task ", i, " is a collective node mixed with other tasks (not supported yet)");
      case TaskKind::compute: in.lane = kCompute; break;
      case TaskKind::touch: in.lane = kCopy; break;
      case TaskKind::move: in.lane = kComm; break;
      case TaskKind::evict:
      case TaskKind::load: in.lane = kCopy; break;  // over the device's host link (offload.h)
    }
    // The lane it queues for. A single-lane device runs everything on its one lane, but
    // with host_copy_lane its evicts and loads share a copy lane of their own (one thread,
    // both directions: the host-in slot); elsewhere a load and an evict queue on the two
    // directions of the host link.
    const bool host_copy = t.kind == TaskKind::load || t.kind == TaskKind::evict;
    const auto dev_index = static_cast<std::size_t>(in.dev);
    in.slot_lane = in.lane == kNoLane                                       ? kNoLane
                   : single_lane[dev_index] && host_copy && host_copy_lane[dev_index] ? kHostIn
                   : single_lane[dev_index]                                 ? kCompute
                   : host_copy ? (t.kind == TaskKind::load ? kHostIn : kHostOut)
                   : output_copy ? kHostOut
                               : in.lane;
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
        route_step_.push_back(static_cast<std::uint16_t>(stagger_step(t.device.value, t.dst_device.value, stagger)));
        assert(route_step_.size() == static_cast<std::size_t>(routes_.size()));
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
    } else if (output_copy) {
      Task copy = t;
      copy.kind = TaskKind::evict;
      copy.bytes = tg_.buffer(t.reads[0]).bytes();
      in.rank = in.amount = host_copy_ps(m_, copy, link_bytes_);
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
    if (const std::optional<BackwardBspDependency> b = first_backward_bsp_dependency(tg_))
      fail("task graph: task ", b->task.value, " (phase ", phases[b->task.index()], ") depends on task ",
           b->dependency.value, " of a later phase (", phases[b->dependency.index()], "); the bsp policy cannot run it");
  }

  rec_.resize(n);
  const auto d = static_cast<std::size_t>(devices_);
  free_slots_.resize(d * kLanes);
  for (std::size_t dev = 0; dev < d; ++dev) {
    free_slots_[dev * kLanes + kCompute] = 1;
    free_slots_[dev * kLanes + kCopy] = 1;
    free_slots_[dev * kLanes + kHostIn] = free_slots_[dev * kLanes + kHostOut] = 1;
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

  setup_interference();
  setup_gates();
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

void Run::fail_beyond_clock(std::size_t i, const char* what) const {
  const Task& t = tg_.tasks[i];
  fail("simulate: task ", i, " (", to_string(t.kind), " on device ", t.device.value, ") alone: ", what,
       " would take at least ", kMaxSimSeconds, " s, the simulator's clock limit (4e18 ps, about 46 days)");
}

}  // namespace tessel::sim::detail
