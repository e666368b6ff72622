#pragma once
// The discrete-event simulator: a TaskGraph on a Machine → makespan, statistics and a
// Timeline in the same schema the executors write.
//
// Model, per device:
//   lanes        compute (one kernel at a time: compute tasks), copy (one at a time:
//                touches), comm (`comm_channels` moves at a time, charged to the
//                sending device). Inputs and outputs take no time and no lane, except
//                that a memory-planned graph's outputs copy their blocks to the host
//                (sim/offload.h). Under a
//                network model whose links serve one transfer at a time (alpha-beta), a
//                ready move whose route has a busy link stays in its lane's ready queue,
//                holding no channel, and moves behind it whose routes are free go first;
//                it is tried again when a link it waits for frees. A move holds its
//                channel (and its comm lane is busy) while its bytes are on the links;
//                its route's latency follows with the channel free, and the move completes
//                after it. With channels_per_link, comm_channels is per first link of a
//                move's route (NVLink, NIC, PCIe) rather than per device.
//   single lane  on a device type with single_lane (a CPU worker), compute, touches and
//                incoming moves all queue for one lane: one task at a time. A move into
//                such a device runs on the receiver (the worker copies what it needs when
//                it is free), and its span carries the receiver's id. Evicts and loads
//                take the same lane unless the type has host_copy_lane (the executor's
//                copy-lane thread): then they queue on one copy lane of their own, both
//                directions, beside the worker.
//   touches      all touches of a device run one after another on its copy lane, so two
//                touches into one buffer (always on that buffer's device) never overlap —
//                the serialisation TaskGraph asks of executors, and what one copy stream
//                per device gives.
//   chips       devices with the same Device::chip (virtual devices of one GPU) share it:
//                compute tasks running on its devices at once each run max(1, Σ share)
//                times slower, where a task's share of the chip is 1 unless
//                SimOptions::task_chip_share says less (processor sharing; it multiplies
//                the interference factor below). Moves and touches are not shared.
//   dispatch    on a device type with dispatch_interval_s (a GPU's front end taking the
//                executor's graph nodes one by one), tasks of one chip (Device::chip, or
//                the device alone) start at least that far apart, first come first served:
//                a task that reaches the gate (when it would start: ready, its lane free)
//                takes the gate's next start, one interval after the start taken before
//                it, or now if that has passed; until then it holds its lane (if it has
//                one). Inputs and outputs, which take no time, pass the gate too (the
//                executor marks them as it marks every task). The time held is not busy
//                time. A move held under a network whose links serve one transfer at a
//                time (alpha-beta) was checked for a free route when it reached the gate,
//                not again when it starts. Every tile of a fused kernel (sim/fuse.h) passes
//                the gate as a task of its own; a graph of collective nodes ignores gates.
//   interference while a device's compute lane and its comm lane are both busy (on a
//                chip shared by virtual devices: while any of its devices computes and
//                any communicates — the streams of one GPU), its
//                compute task runs Machine::interference.compute_slowdown(sm_count) times
//                slower and its outgoing moves comm_slowdown times slower; the factors
//                are re-applied whenever either lane starts or stops (progress is kept).
//                The copy lane neither causes nor suffers interference.
//   copy rows    on a device type with copy_row_s (a CPU worker's strided copy loop), a
//                touch takes rows × copy_row_s beside its bytes (compute_model.h), and a
//                move into such a device holds its channel for its rows × copy_row_s
//                before its bytes enter the network.
//   cache        with SimOptions::task_seconds_cold, each device whose type has a
//                cache_capacity_bytes keeps the buffers it used last, least recently
//                used out first, as a CPU worker's per-core cache does: a compute task
//                uses what it reads and writes, a touch its source and destination, a
//                move into the device its destination, an evict or load on the worker's
//                lane its source and destination; one on a host_copy_lane copy lane
//                (another thread and core) none, and its load's destination leaves the
//                worker's cache, so the compute that reads it finds it cold. A buffer
//                larger than the cache flushes it and stays out. The run starts as the CPU executor starts
//                one: every buffer of the device first touched in id order, then the
//                input blocks written.
//   memory       a buffer is live from the start of the first task that writes it to the
//                end of the last task that reads it (to the end of its last writer when
//                nothing reads it); peak live bytes per device, and every device whose
//                peak exceeds its capacity is reported (the run is not stopped). Host
//                buffers (a memory-capped graph's evicted copies) are not device memory.
//   offload      evict and load tasks (core/memory_plan.h) take the copy lane for their
//                bytes over the device's host link (sim/offload.h); on a single-lane
//                device they run on the worker's lane, or with host_copy_lane on a
//                copy lane of their own, as if on a core of its own (a copy thread that
//                time-shares the worker's core is not modelled) and without taking
//                memory bandwidth from the worker (no contention is modelled between
//                them; interference covers the comm lane only).
//
// Policies:
//   async  work-conserving: a task starts as soon as its dependencies are done and its
//          lane is free; among ready tasks on a lane the highest priority goes first —
//          the longest path from the task to the end (undisturbed durations; ties by
//          core's ready_tie, core/ready_order.h: a move's stagger step — two levels on a
//          machine of several equal hosts, devices_per_host() —, then the task id, the
//          order every executor's ready queue takes too), or FIFO (ready order).
//   bsp    bulk-synchronous (core's bsp_phase): for each graph node, all its input and
//          compute tasks, a barrier, all the communication its outputs need (moves,
//          touches, outputs), a barrier. Within a phase, tasks run as under async. A
//          barrier takes the machine's barrier_latency_s: the next phase's tasks start
//          at least that long after the end of the phase's last task (one event per
//          barrier; a dispatch gate may hold them longer).
//          A graph with a dependency on a later phase (core's
//          first_backward_bsp_dependency; a memory-capped graph typically has one) is
//          an error naming it.
//
// Events: one per task completion plus one per network-internal state change (a flow
// joining the network after its latency), one per bsp barrier and one per task held at
// a dispatch gate. Deterministic: the same inputs give the same
// Timeline bit for bit (event order is fixed by (time, sequence); no hashing decides an
// order; no clock is read except for sim_wall_s).

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/machine.h"
#include "core/task_graph.h"
#include "core/timeline.h"

namespace tessel::sim {

enum class Policy : std::uint8_t { async, bsp };
enum class Priority : std::uint8_t { longest_path, fifo };
[[nodiscard]] std::string_view to_string(Policy p);
[[nodiscard]] std::string_view to_string(Priority p);
[[nodiscard]] Policy parse_policy(std::string_view s, std::string_view what = "policy");
[[nodiscard]] Priority parse_priority(std::string_view s, std::string_view what = "priority");

struct SimOptions {
  std::string network = "flow";  // a name from network_models(): flow, alpha-beta
  Policy policy = Policy::async;
  Priority priority = Priority::longest_path;
  bool interference = true;  // false: perfect overlap, whatever the machine says
  int comm_channels = 1;     // moves one device sends at the same time
  // True: comm_channels per first link of a move's route (a device sends that many moves
  // over each of its NVLink, NIC, PCIe links at once, as NCCL keeps a connection per peer
  // link), not per device.
  bool channels_per_link = false;
  bool record_memory = false;  // keep every change of live bytes (SimResult::memory)
  // A collective that runs alone is simulated on one period of ranks where the machine and
  // the program are shift-invariant (sim/collective_symmetry.h); false: every rank.
  bool symmetry = true;
  // Measured durations that replace the compute model: empty, or one entry per task,
  // where a value >= 0 is that compute or touch task's undisturbed seconds (interference
  // still applies) and a negative one keeps the model. `tessel compare` fills it from a
  // kernel profile (the CPU executor's in-place profile, runtime/cpu_executor.h, or the
  // CUDA backend's) plus the per-task overhead.
  std::vector<double> task_seconds;
  // Measured cold durations (runtime/cpu_executor.h, InPlaceProfileOptions): empty, or
  // one entry per task, where a value >= 0 is that compute task's seconds with none of
  // its data in its device's cache. Given, the simulator keeps what each device's cache holds (see "cache" above)
  // and a compute task with task_seconds t and cold seconds c takes
  // t + (c - t) × (its bytes not in the cache) / (its bytes).
  std::vector<double> task_seconds_cold;
  // The share of its chip a compute task occupies when it runs alone (the CUDA backend's
  // kernel profile: how much slower K copies of its kernel run at once on one GPU than
  // one): empty, or one entry per task, (0, 1]; other values mean 1. On a chip that
  // virtual devices share (Device::chip), compute tasks running at once each run
  // max(1, sum of their shares) times slower; a task with share 1 claims the whole chip.
  std::vector<double> task_chip_share;
  // With task_seconds_cold: the bytes each device's simulated cache holds, in place of
  // its type's cache_capacity_bytes (a device type without one keeps its hot times);
  // 0: the type's. Only the cache model reads it (`tessel compare --cache-bytes`).
  std::int64_t cache_capacity_bytes = 0;
  // Tasks of a fused computation-collective kernel (sim/fuse.h): empty, or one entry per
  // task; a nonzero entry exempts that compute task or move from the interference factors.
  std::vector<char> fused;
  // Stop early (SimResult::stopped) once the simulated clock passes stop_after_s while
  // tasks remain — the run cannot end by then (a planner's bound: it cannot beat a known
  // makespan) — or, under longest-path priority, once a task released at t has t plus its
  // longest undisturbed path past it (by more than 1 ns; not on a topology graph with
  // several comm channels, whose other channels' routes may be faster than the one the
  // path is timed on), or when *cancel is true (read
  // once per event time; a wall-clock budget).
  // Graphs with collective nodes ignore both.
  double stop_after_s = std::numeric_limits<double>::infinity();
  const std::atomic<bool>* cancel = nullptr;
};

struct DeviceStats {
  double compute_busy_s = 0;  // compute lane occupied
  double comm_busy_s = 0;     // at least one outgoing move in flight
  double copy_busy_s = 0;     // copy lane occupied (touches)
  double busy_s = 0;          // any lane occupied
  double idle_s = 0;          // makespan − busy_s
  std::int64_t tasks = 0;
  std::int64_t peak_memory_bytes = 0;
  double peak_memory_time_s = 0;  // when the peak was first reached
};

struct MemoryOverflow {
  DeviceId device;
  std::int64_t capacity_bytes = 0;
  std::int64_t peak_bytes = 0;
  std::int64_t excess_bytes = 0;  // peak − capacity
  double first_exceeded_s = 0;    // when live bytes first went over capacity
  double peak_time_s = 0;
};

struct MemorySample {
  double time_s = 0;
  DeviceId device;
  std::int64_t live_bytes = 0;
};

struct SimResult {
  std::string network;
  Policy policy = Policy::async;
  double makespan_s = 0;
  // Stopped by SimOptions::stop_after_s or cancel: makespan_s is then the clock when it
  // stopped (or the end of the longest path that stopped it), a lower bound on the makespan (above stop_after_s unless cancelled), events
  // those run so far, and nothing else is filled. cancelled: stopped by cancel, the clock
  // not past stop_after_s.
  bool stopped = false;
  bool cancelled = false;
  std::int64_t events = 0;
  double sim_wall_s = 0;  // the simulator's own run time (setup included)
  std::int64_t bytes_moved = 0;
  std::int64_t peak_memory_bytes = 0;  // the largest device peak
  std::vector<DeviceStats> devices;    // one per device of the task graph
  std::vector<std::int64_t> link_bytes;  // one per machine link
  // A chain of tasks that ends at the makespan: each is the dependency, lane predecessor,
  // barrier or (at a dispatch gate) the task that took the gate's previous start that last
  // held the next one back (waits inside the network are charged to the move itself).
  std::vector<TaskId> critical_path;
  std::vector<MemoryOverflow> over_capacity;
  std::vector<MemorySample> memory;  // with SimOptions::record_memory
  // Dispatch gates (DeviceType::dispatch_interval_s): the tasks that found their chip's
  // gate busy and were held, and the seconds they waited in all (0 without gates).
  std::int64_t dispatch_held_tasks = 0;
  double dispatch_wait_s = 0;
  Timeline timeline;                 // one span per task, in task order
  // A collective simulated on ranks 0..symmetry_period−1 only (sim/collective_symmetry.h);
  // 0: every rank. `events` counts what was simulated; events_unreduced what the full run
  // has (events × n / period where reduced, else events). symmetry_note: why the full
  // engine ran (empty when reduced or not considered).
  int symmetry_period = 0;
  std::int64_t events_unreduced = 0;
  std::string symmetry_note;
};

// Throws Error when the task graph is malformed (a cycle, a bad id), uses more devices
// than the machine has, needs a route the machine lacks, or the options are invalid.
[[nodiscard]] SimResult simulate(const TaskGraph& tg, const Machine& m, const SimOptions& options = {});

// The result as JSON: makespan_s, events, sim_wall_s, events_per_s (both of what was
// simulated), symmetry ("reduced" or "full"), symmetry_period, events_unreduced,
// symmetry_note, bytes_moved,
// peak_memory_bytes, devices[{device, compute_busy_s, comm_busy_s, copy_busy_s, idle_s,
// peak_memory_bytes}], links (those that carried bytes), critical_path, over_capacity.
[[nodiscard]] nlohmann::json to_json(const SimResult& r, const Machine& m);

}  // namespace tessel::sim
