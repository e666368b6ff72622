#pragma once
// CpuExecutor: runs a TaskGraph on the CPU with one worker thread per device (pinned to
// a core where possible), each device with its own memory. Contractions run as Eigen
// GEMMs, other block einsums through vectorised generic loops; touches are strided
// copies or accumulations, moves real copies between device memories (run by the
// receiving device's worker when it is free).
//
// Ready tasks run longest-path-to-the-end first (estimated with rough CPU costs), ties
// by core's ready_tie (a move's stagger step, then the task id: core/ready_order.h), as
// the simulator's async policy orders them.
// Policies: `async` runs any ready task at once, no barriers (Einsummable); `bsp` adds
// the barriers of core's bsp_phase(), the same the simulator's bsp policy uses (a graph
// with a dependency on a later phase, as a memory-capped graph typically has, is an
// error: core's first_backward_bsp_dependency).
// Computes in float unless some node is f64. A task that throws stops the run and
// surfaces as an Error naming the task.
//
// Device memory is allocated before the clock starts, as GPU runtimes allocate theirs
// up front: each worker allocates (and first-touches) every buffer of its device while
// the others wait, so that no task's time includes malloc, page faults or zero-filling
// — costs the simulator does not model and that make a first run slower than a repeat.
// Where all buffers together would exceed `preallocate_limit_bytes`, buffers are
// allocated when first written and freed after their last reader instead. Each worker
// also places its own device's input blocks before the clock, so that they sit in its
// caches as a repeated step's resident inputs would. Likewise each worker's kernel
// scratch is kept by the executor from one run to the next.
//
// A memory-capped graph (core/memory_plan.h: evict and load tasks, buffers at planned
// offsets) runs in bounded memory instead (runtime/cpu_arena.h): each worker allocates
// one arena of the planned size for its device and a host arena for its host buffers
// before the clock, every buffer lives at its planned offset, nothing else is allocated
// or freed during the run; an evict or a load is a copy between the two arenas, and each
// lane picks among its ready tasks as their dependencies complete, as for any graph.
// Output tasks copy their block out when they run (the arena reuses the memory).
// Where the copies run is CpuOptions::copy_lane: `worker` (the default) makes them on
// the device's worker, its only lane, one task at a time with its compute; `thread`
// gives each device that has evicts or loads a copy lane of its own, a second thread
// with its own ready queue (the same priority order), so that loads overlap compute as
// a GPU's copy engine lets them (TURNIP). The copy lane of device d is pinned to core
// D + d of a machine with D devices where that core exists (copy_lane_core); elsewhere
// it is left unpinned, sharing the workers' cores, and sleeps instead of spinning while
// it waits. No lock guards the buffers the two lanes share: the memory plan's
// dependencies alone order every conflicting pair — a task that writes a range depends
// on every reader, writer and evict of what held it before, an evict on the writers of
// what it copies, a load on the writer of its host copy, a reader of a loaded buffer on
// its load (core/memory_plan.h), and host buffers are written once, each at its own
// place — so any order of ready tasks over any number of lanes is safe, the guarantee
// GPUs' copy streams rely on too. A capped graph split over processes (a RemoteLink
// covering some of its devices) is an error, whatever the copy lane, and so is the copy
// lane thread with any RemoteLink.

#include <chrono>
#include <exception>
#include <functional>

#include "runtime/executor.h"

namespace tessel::runtime {

enum class Policy : std::uint8_t { async, bsp };
[[nodiscard]] Policy parse_policy(std::string_view s);
[[nodiscard]] std::string_view to_string(Policy p);

// Where a memory-capped graph's evicts and loads run (see the header comment): on the
// device's worker, or on a copy lane of its own (a second thread per device).
enum class CopyLane : std::uint8_t { worker, thread };
// An Error naming `what` (the option) on anything but worker or thread.
[[nodiscard]] CopyLane parse_copy_lane(std::string_view s, std::string_view what = "copy lane");
[[nodiscard]] std::string_view to_string(CopyLane c);

// The cores the executor pins its threads over (std::thread::hardware_concurrency, at
// least 1): worker d on core d modulo these.
[[nodiscard]] int cpu_cores();
// With CopyLane::thread and pinned threads: the core device `device`'s copy lane is
// pinned to on a run of `devices` devices (devices + device), or -1 where the machine
// has no such core (the copy lane then shares the workers' cores, unpinned).
[[nodiscard]] int copy_lane_core(int devices, int device);

// A run split over processes (runtime/mpi/): the executor runs the workers of the devices
// [first_device(), last_device()) only, and a move between one of them and a device of
// another process goes through the link. Its source's worker packs the region into a
// contiguous block and hands it to send() (it never waits on the transfer); the link
// writes an arriving move straight into its destination buffer and reports it through
// RemoteRun::received. Under bsp a phase ends when every process has finished it: the
// executor reports its own end of each phase (phase_done) and waits for `released`.
struct RemoteRun {
  std::function<void*(BufferId)> buffer;                           // a buffer's memory (allocated on first call)
  std::function<void(TaskId move, double end_s)> received;         // a move into this process has arrived
  std::function<void(std::int32_t phase)> released;                // bsp: every process has finished `phase`
  std::function<void(std::exception_ptr error)> failed;            // the link failed: the run stops with `error`
  int element_bytes = 4;                                           // float or double, as the run computes
};

class RemoteLink {
 public:
  virtual ~RemoteLink() = default;
  [[nodiscard]] virtual int first_device() const = 0;
  [[nodiscard]] virtual int last_device() const = 0;
  // Before the workers start: the run's callbacks (arriving moves may be posted now).
  virtual void begin(const TaskGraph& tg, RemoteRun run) = 0;
  // The run's clock started (span times are seconds since t0).
  virtual void started(std::chrono::steady_clock::time_point t0) = 0;
  // Called by a worker right before it runs `task` (fault injection in tests).
  virtual void before_task(TaskId task) = 0;
  // A block of `bytes` bytes to pack a move out of this process into (the link may hand
  // out one of a finished send's).
  [[nodiscard]] virtual std::vector<std::byte> send_buffer(std::size_t bytes) { return std::vector<std::byte>(bytes); }
  // A move out of this process, its region packed; the link owns `data` now.
  virtual void send(TaskId move, std::vector<std::byte> data) = 0;
  // bsp: this process has finished every task of `phase` (called in phase order).
  virtual void phase_done(std::int32_t phase) = 0;
  // After the workers have stopped: waits for outstanding transfers (and, under bsp,
  // for the remaining phases of the other processes) unless `failed`; no callback
  // after it returns. Throws when the link failed.
  virtual void end(bool failed) = 0;
};

struct CpuOptions {
  Policy policy = Policy::async;
  bool pin_threads = true;
  // Largest total of all buffers that is allocated before the run; 0: a quarter of the
  // machine's physical memory.
  std::int64_t preallocate_limit_bytes = 0;
  // Set by the MPI backend: this process runs only its devices (see RemoteLink).
  RemoteLink* link = nullptr;
  // Where evicts and loads run (see the header comment); thread is refused with a link.
  CopyLane copy_lane = CopyLane::worker;
  // Called by the thread that runs a task right before it runs it, on every lane (tests:
  // to hold a task or make it fail; what it throws fails the task). Empty: none.
  std::function<void(TaskId)> before_task = {};
};

// Kernel workspaces of each worker, kept by the executor across runs.
struct CpuWorkspaces;

// An in-place kernel profile (CpuExecutor::run_profiled): after the run, its outputs
// copied out, every compute task is timed again on the buffers and kernel scratch the run
// used, each worker timing its own device's tasks while the others time theirs (all
// workers busy, as in a run; a device with fewer tasks repeats its own, not kept). On a
// CPU a kernel's time depends on where its data lies, not only on its shape: the same
// elementwise block ran 15 or 21 us with its input, output and scratch at other
// addresses (their offsets against each other and the cache sets their pages fall in),
// and 16 or 39 us inside a timing loop (measured 2026-11-25), so a profile taken on
// buffers of its own misjudges the run it is set beside by up to 2x per task.
// What is not the run's: the timing threads (pinned to the workers' cores, whatever
// CpuOptions::pin_threads says), so a GEMM's packing buffers on the thread's stack lie
// elsewhere; and in a graph too large to preallocate (buffers freed after their last
// reader during the run), each task's buffers, allocated again for its turn and freed
// after it.
// A task is timed hot (called again and again: its data in the core's caches), cold
// (each call right after the worker wrote `evict_bytes` of other memory: its data pushed
// out of the per-core cache, as other tasks' data pushes it out in a graph) and, with
// `dram`, from DRAM (each call after that and after every buffer it reads and the one it
// writes were flushed from every cache level, flush_from_caches(): as it runs where
// other work on the host took the last-level cache; where the CPU cannot flush, dram_s
// repeats cold_s and TaskProfile::dram_flushed says so).
// Re-running a task overwrites its output buffer, after the outputs were copied out; in a
// memory-capped graph a task's inputs may by then hold other buffers' data, which a
// kernel's time does not depend on (subnormals, the one data-dependent cost, are flushed:
// set_worker_float_mode()).
struct InPlaceProfileOptions {
  double seconds_per_task = 0.002;  // hot calls per task (at least); cold calls: half
  std::int64_t evict_bytes = 0;     // written before each cold call; 0: twice the per-core cache; else >= 4
  bool cold = true;                 // false: cold_s repeats hot_s
  bool dram = false;                // true (with cold): also dram_s; false: dram_s stays empty
};
struct TaskProfile {
  std::vector<double> hot_s;   // per task: a compute task's seconds per call, -1 for other tasks
  std::vector<double> cold_s;  // the same, cold; never below hot_s (timing noise can say otherwise)
  std::vector<double> dram_s;  // with InPlaceProfileOptions::dram: from DRAM; never below cold_s
  bool dram_flushed = false;   // dram_s was timed with the operands flushed (false: repeats cold_s)
  std::int64_t tasks = 0;      // compute tasks timed
};
struct ProfiledRun {
  RunResult run;
  TaskProfile profile;
};

class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(CpuOptions options = {});
  ~CpuExecutor() override;
  CpuExecutor(CpuExecutor&&) noexcept;
  CpuExecutor& operator=(CpuExecutor&&) noexcept;
  [[nodiscard]] std::string name() const override { return "cpu"; }
  [[nodiscard]] RunResult run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) override;
  // run(), then every compute task timed in place (see InPlaceProfileOptions). Not with a
  // RemoteLink (a run split over processes): an error.
  [[nodiscard]] ProfiledRun run_profiled(const Graph& g, const TaskGraph& tg, const TensorMap& inputs,
                                         const InPlaceProfileOptions& options);

 private:
  [[nodiscard]] RunResult run_with(const Graph& g, const TaskGraph& tg, const TensorMap& inputs,
                                   const InPlaceProfileOptions* options, TaskProfile* profile);
  CpuOptions options_;
  // Each worker's kernel scratch (permuted operands, evaluation stacks) outlives a run,
  // as a GPU runtime keeps its workspaces: repeated runs do not pay for growing them.
  // run() is therefore not to be called concurrently on one executor.
  std::unique_ptr<CpuWorkspaces> scratch_;
};

}  // namespace tessel::runtime
