#pragma once
// Internal to sim/: one simulate() run of an expanded task graph (a TaskGraph without
// collective nodes). The model is documented in simulator.h; here is its state, and
// where each part of the run lives:
//   run_compile.cc       setup(): the task graph, machine and options checked and
//                        compiled into the compact per-task, per-buffer, per-lane and
//                        per-device arrays below; routes, priorities, bsp phases
//   run_loop.cc          the event loop: releasing, dispatching, starting and
//                        completing tasks; bsp phases and barriers
//   run_moves.cc         moves on comm lanes: channels and their routes, handing bytes
//                        to the network model, waiting for busy links (alpha-beta)
//   run_interference.cc  re-timing running work when a device's lanes overlap
//   run_cache.cc         the per-device LRU cache model (SimOptions::task_seconds_cold)
//   run_result.cc        the SimResult (statistics, critical path, timeline), to_json()
//   simulator.cc         the public entry points (simulate(), option names)
// Memory accounting and the lane and interference bookkeeping every event makes are a
// few lines each, defined at the end of this header so that they inline into the event
// loop (the build has no link-time optimisation).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "core/checked.h"
#include "core/error.h"
#include "core/machine.h"
#include "core/ready_order.h"
#include "core/task_graph.h"
#include "sim/event_queue.h"
#include "sim/large_pages.h"
#include "sim/network.h"
#include "sim/simulator.h"

namespace tessel::sim::detail {

// Per device: core's Lane (compute, comm, copy), then the two directions of its host
// link, where loads and evicts queue (sim/offload.h); their time counts as copy.
constexpr int kLanes = 5;
constexpr int kCompute = static_cast<int>(Lane::compute);
constexpr int kComm = static_cast<int>(Lane::comm);
constexpr int kCopy = static_cast<int>(Lane::copy);
constexpr int kHostIn = 3, kHostOut = 4;  // load, evict
constexpr std::int8_t kNoLane = -1;  // inputs and outputs (unless memory-planned): no time, no lane

class Run {
 public:
  Run(const TaskGraph& tg, const Machine& m, const SimOptions& o) : tg_(tg), m_(m), o_(o) {}

  SimResult run();

 private:
  static constexpr std::int32_t kBarrierEvent = -1;
  // Event::task of a dispatch gate g opening for the first task held at it: kGateEvent - g.
  static constexpr std::int32_t kGateEvent = -2;
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
    std::int64_t key;   // smallest first: -rank (longest path) or arrival order (FIFO)
    std::uint64_t tie;  // then core's ready_tie (core/ready_order.h): a move's stagger step, the task id
    Released r;
    friend bool operator>(const Ready& a, const Ready& b) { return a.key > b.key || (a.key == b.key && a.tie > b.tie); }
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

  // ---- run_compile.cc: the task graph compiled into the arrays below
  void setup();
  [[noreturn]] void fail_beyond_clock(std::size_t i, const char* what) const;

  // ---- run_loop.cc: the event loop
  [[noreturn]] void fail_clock_limit() const;
  void loop();
  void settle(SimTime t);
  void make_ready(const Released& r);
  void dispatch(SimTime t);
  void begin_task(const Released& r, SimTime t);
  void start_lane_task(const Released& r, SimTime t);
  void schedule_compute(std::int32_t i, std::size_t dev, SimTime t);
  void release_lane(const Info& in, std::int32_t i, SimTime t);
  void finish_lane_task(std::int32_t i, SimTime t);
  void complete(std::int32_t i, SimTime t);
  void next_phase(std::int32_t last, SimTime t);

  // ---- run_moves.cc: moves on comm lanes: channels, routes, waiting for links
  void wake_link_waiters();
  void unpark();
  static bool parked_after(const Parked& a, const Parked& b);
  void park(std::int32_t link, const Parked& p);
  void push_bucket(std::size_t slot, const Ready& r);
  void dispatch_buckets(std::size_t slot, SimTime t);
  std::int32_t channel_route(std::int32_t i, std::size_t c);
  std::int32_t route_now(std::int32_t i);
  void start_transfer(std::int32_t i, std::size_t slot, SimTime t);
  void finish_move(std::int32_t slot, SimTime t);

  // ---- run_cache.cc: the cache model (SimOptions::task_seconds_cold)
  void setup_cache();
  void lru_unlink(std::int32_t b, std::size_t dev);
  void cache_use(std::int32_t b);
  SimTime cache_start(std::int32_t i);

  // ---- run_loop.cc: the chips' dispatch gates (DeviceType::dispatch_interval_s)
  void setup_gates();
  [[nodiscard]] bool pass_gate(const Released& r, SimTime t);
  void start_held(std::int32_t gate, SimTime t);

  // ---- run_interference.cc
  void setup_interference();
  void apply_interference(SimTime t);
  [[nodiscard]] double compute_factor(std::size_t dev, std::int32_t task) const;
  [[nodiscard]] std::int64_t chip_share_units(std::int32_t task) const;
  void chip_compute(std::size_t dev, std::int32_t task, int sign);

  // ---- run_result.cc
  SimResult finish();

  // ---- defined below, in this header, so that they inline into the event loop
  // lanes: a (device, lane) slot, its ready work, its busy time
  static std::size_t lane_slot(const Info& in);
  void mark_lane(std::size_t slot);
  [[nodiscard]] bool has_ready(std::size_t slot) const;
  void lane_busy_add(std::size_t dev, int lane, int delta, SimTime t);
  // memory: live bytes per device, peaks, over capacity
  void free_buffer(std::size_t b, SimTime t);
  void add_live(std::size_t dev, std::int64_t delta, SimTime t);
  // interference: devices whose lanes changed, to re-time in apply_interference()
  [[nodiscard]] bool is_fused(std::int32_t i) const;
  void mark_interference(std::size_t dev);

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
  // Virtual devices of one chip (Device::chip): per device its chip group (-1: none), per
  // group its devices and the summed shares of the compute tasks running on it, in units
  // of 1/kShareUnits (integers: the same sum whatever the order); load L → each L× slower.
  static constexpr std::int64_t kShareUnits = 1 << 16;
  std::vector<std::int32_t> chip_of_;
  std::vector<std::vector<std::int32_t>> chip_members_;
  std::vector<std::int64_t> chip_load_;
  bool share_ = false;    // some chip holds two or more devices
  bool retime_ = false;   // interfere_ || share_: running compute may be re-timed
  // Dispatch gates (DeviceType::dispatch_interval_s): per device its gate (its chip's;
  // -1: none), per gate the earliest time the next task may start, the interval, the task
  // that took its latest start, and the tasks held at it in the order they start (their
  // lanes, if any, stay taken; a gate's opening events come in that order too).
  bool gated_ = false;
  std::vector<std::int32_t> gate_of_;
  std::vector<SimTime> gate_next_, gate_step_;
  std::vector<std::int32_t> gate_last_;
  std::vector<std::deque<Released>> gate_held_queue_;
  std::int64_t gate_held_ = 0;  // tasks held at a gate
  SimTime gate_wait_ = 0;       // their waits, summed

  RouteTable routes_;
  // Per route of a move (Info::route; one per source and destination): its stagger step
  // (core/ready_order.h), the move's tie-break among ready tasks of equal priority.
  std::vector<std::uint16_t> route_step_;
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
  bool cancelled_ = false;  // stopped by SimOptions::cancel, not stop_after_s
  // The makespan cannot be below a released task's release time plus its longest
  // undisturbed path to the end (Info::rank; tasks only slow down under interference and
  // shared links): the largest such bound past stop_at_ + kBoundSlack stops the run.
  static constexpr SimTime kBoundSlack = 1000;  // 1 ns: rounding along a path, with room
  SimTime path_bound_ = -1;
};

// ---- per-event bookkeeping, inline (see the top of this file): lanes

inline std::size_t Run::lane_slot(const Info& in) {
  return static_cast<std::size_t>(in.dev) * kLanes + static_cast<std::size_t>(in.slot_lane);
}

inline void Run::mark_lane(std::size_t slot) {
  if (!lane_dirty_[slot] && has_ready(slot)) {
    lane_dirty_[slot] = 1;
    dirty_lanes_.push_back(static_cast<std::int32_t>(slot));
  }
}

inline bool Run::has_ready(std::size_t slot) const {
  return !ready_[slot].empty() || (bucketed_ && bucket_count_[slot] > 0);
}

inline void Run::lane_busy_add(std::size_t dev, int lane, int delta, SimTime t) {
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

// ---- memory

inline void Run::free_buffer(std::size_t b, SimTime t) {
  Buf& buf = bufs_[b];
  if (!buf.allocated) return;
  buf.allocated = false;
  if (!buf.host) add_live(static_cast<std::size_t>(buf.dev), -buf.bytes, t);
}

inline void Run::add_live(std::size_t dev, std::int64_t delta, SimTime t) {
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

// ---- interference

// A task of a fused computation-collective kernel: exempt from interference (sim/fuse.h).
inline bool Run::is_fused(std::int32_t i) const {
  return i >= 0 && !o_.fused.empty() && o_.fused[static_cast<std::size_t>(i)] != 0;
}

inline void Run::mark_interference(std::size_t dev) {
  if (!retime_) return;
  if (interfere_ && share_ && chip_of_[dev] >= 0) {  // interference is chip-wide: every device of it
    for (std::int32_t other : chip_members_[static_cast<std::size_t>(chip_of_[dev])]) {
      const auto o = static_cast<std::size_t>(other);
      if (interf_dirty_[o]) continue;
      interf_dirty_[o] = 1;
      interf_list_.push_back(other);
    }
    return;
  }
  if (interf_dirty_[dev]) return;
  interf_dirty_[dev] = 1;
  interf_list_.push_back(static_cast<std::int32_t>(dev));
}

}  // namespace tessel::sim::detail
