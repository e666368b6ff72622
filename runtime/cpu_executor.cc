#include "runtime/cpu_executor.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>

#include "core/collective_rewrite.h"
#include "core/error.h"
#include "core/ready_order.h"
#include "core/stats.h"
#include "runtime/cpu_arena.h"
#include "runtime/cpu_kernels.h"
#include "runtime/cpu_threads.h"
#include "runtime/measure.h"

namespace tessel::runtime {

Policy parse_policy(std::string_view s) {
  if (s == "async") return Policy::async;
  if (s == "bsp") return Policy::bsp;
  fail("unknown policy '", s, "' (expected async or bsp)");
}

std::string_view to_string(Policy p) { return p == Policy::async ? "async" : "bsp"; }

CopyLane parse_copy_lane(std::string_view s, std::string_view what) {
  if (s == "worker") return CopyLane::worker;
  if (s == "thread") return CopyLane::thread;
  fail(what, ": unknown copy lane '", s, "' (expected worker or thread)");
}

std::string_view to_string(CopyLane c) { return c == CopyLane::worker ? "worker" : "thread"; }

int cpu_cores() { return pinnable_cores(); }

int copy_lane_core(int devices, int device) {
  const int core = devices + device;
  return core < cpu_cores() ? core : -1;
}

namespace {

using Clock = std::chrono::steady_clock;

using cpu::cpu_relax;
using cpu::kLinkSpin;
using cpu::kSpins;
using cpu::ReadyQueue;
using cpu::WorkerPool;

// The worker that runs a task: a move is a copy the receiving worker makes.
DeviceId worker_of(const Task& t) { return t.kind == TaskKind::move ? t.dst_device : t.device; }

template <class T>
class Run {
 public:
  Run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs, CpuOptions options,
      std::vector<cpu::Scratch<T>>& scratch, WorkerPool& pool, const InPlaceProfileOptions* profile = nullptr,
      TaskProfile* profile_out = nullptr)
      : g_(g), tg_(tg), inputs_(inputs), options_(options), devices_(tg.num_devices),
        copy_lanes_(options.copy_lane == CopyLane::thread && has_host_copies(tg)),
        lanes_(copy_lanes_ ? 2 * devices_ : devices_), queues_(static_cast<std::size_t>(lanes_)), scratch_(scratch),
        pool_(pool), link_(options.link), profile_(profile), profile_out_(profile_out) {
    if (scratch_.size() < static_cast<std::size_t>(tg.num_devices)) scratch_.resize(static_cast<std::size_t>(tg.num_devices));
    if (link_) {
      lo_ = link_->first_device();
      hi_ = link_->last_device();
    } else {
      hi_ = tg.num_devices;
    }
  }

  RunResult execute() {
    const std::size_t n = tg_.tasks.size();
    succs_ = successors(tg_);
    // Priority: the longest path from a task to the end, with rough CPU costs (GEMM
    // flops at 3e10/s, other flops at 5e8/s, bytes at 1e10/s): the order the simulator's
    // async policy uses, up to its calibrated durations.
    rank_.assign(n, 0.0);
    for (std::size_t i = n; i-- > 0;) {
      const Task& t = tg_.tasks[i];
      double cost = t.flops / (t.contraction ? 3e10 : 5e8) + static_cast<double>(t.bytes) / 1e10;
      double best = 0;
      for (TaskId s : succs_[i]) best = std::max(best, rank_[s.index()]);
      rank_[i] = best + cost;
    }
    // The workers of one process (or of MPI ranks, whose calibrated machine is one host):
    // one level of stagger, as the simulator takes for a machine of one host.
    tie_ = ready_ties(tg_, StaggerLayout{tg_.num_devices});
    involved_.assign(n, 0);
    std::int64_t involved = 0;
    for (std::size_t i = 0; i < n; ++i) {
      involved_[i] = local(runner(tg_.tasks[i])) ? 1 : 0;
      involved += involved_[i];
    }
    deps_left_ = std::make_unique<std::atomic<std::int32_t>[]>(n);
    readers_left_ = std::make_unique<std::atomic<std::int32_t>[]>(tg_.buffers.size());
    for (std::size_t b = 0; b < tg_.buffers.size(); ++b) readers_left_[b].store(0, std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i) {
      // A move from another process waits for its data only (its dependencies run there).
      deps_left_[i].store(incoming(tg_.tasks[i]) ? 1 : static_cast<std::int32_t>(tg_.tasks[i].deps.size()),
                          std::memory_order_relaxed);
      for (BufferId b : tg_.tasks[i].reads) readers_left_[b.index()].fetch_add(1, std::memory_order_relaxed);
    }
    storage_.resize(tg_.buffers.size());
    arena_ = arena_layout<T>(tg_);
    if (arena_.planned) {  // memory-capped: arenas of the planned size, nothing freed or preallocated
      device_arena_.resize(static_cast<std::size_t>(tg_.num_devices));
      host_arena_.resize(static_cast<std::size_t>(tg_.num_devices));
    } else {
      std::int64_t total = 0;
      for (const Buffer& b : tg_.buffers) total += b.bytes();
      std::int64_t limit = options_.preallocate_limit_bytes;
      if (limit <= 0) limit = static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) / 4;
      preallocate_ = total <= limit;
      if (preallocate_) {
        device_buffers_.resize(static_cast<std::size_t>(tg_.num_devices));
        for (std::size_t b = 0; b < tg_.buffers.size(); ++b)
          device_buffers_[static_cast<std::size_t>(tg_.buffers[b].device.value)].emplace_back(static_cast<std::int32_t>(b));
      }
    }
    for (NodeId id : g_.outputs()) {
      const Node& node = g_.node(id);
      result_.outputs.emplace(node.name, Tensor(node.shape, node.dtype));
    }
    result_.timeline.source = std::string("cpu-") + std::string(to_string(options_.policy));
    if (options_.policy == Policy::bsp) {
      // A task held for its phase while an earlier phase waits on it would stall the run
      // for good: refuse such a graph, as the simulator's bsp policy does.
      refuse_backward_bsp_dependencies(g_, tg_, "cpu executor");
      std::int32_t phases = 0;
      for (const Task& t : tg_.tasks) phases = std::max(phases, bsp_phase(t) + 1);
      phase_left_ = std::make_unique<std::atomic<std::int32_t>[]>(static_cast<std::size_t>(phases));
      for (std::int32_t p = 0; p < phases; ++p) phase_left_[p].store(0, std::memory_order_relaxed);
      for (std::size_t i = 0; i < n; ++i)
        if (involved_[i]) phase_left_[bsp_phase(tg_.tasks[i])].fetch_add(1, std::memory_order_relaxed);
      held_.resize(static_cast<std::size_t>(phases));
      num_phases_ = phases;
    }
    // Input blocks are placed in their devices' memories before the clock starts (each
    // worker places its own, so that they sit in its caches as a repeated step's resident
    // inputs would), and outputs are copied out after it stops: the run measures the
    // task graph proper, as the simulator models it (input and output tasks take no time
    // there).
    whole_inputs_.assign(g_.size(), {});
    for (NodeId id : g_.inputs()) {
      const Tensor& t = inputs_.at(g_.node(id).name);
      whole_inputs_[id.index()].assign(t.data.begin(), t.data.end());
    }
    input_tasks_.assign(static_cast<std::size_t>(tg_.num_devices), {});
    for (std::size_t i = 0; i < n; ++i)
      if (tg_.tasks[i].kind == TaskKind::input && involved_[i])
        input_tasks_[static_cast<std::size_t>(tg_.tasks[i].device.value)].push_back(static_cast<std::int32_t>(i));
    tasks_left_.store(involved);
    spans_.resize(static_cast<std::size_t>(lanes_));
    if (copy_lanes_) {
      has_copy_.assign(static_cast<std::size_t>(devices_), 0);
      for (const Task& t : tg_.tasks)
        if (is_host_copy(t)) has_copy_[t.device.index()] = 1;
    }
    // The link's callbacks, and its end whatever leaves this function (declared before
    // the workers' release below, so that it runs after the workers have stopped).
    struct LinkEnd {
      RemoteLink* link;
      ~LinkEnd() {
        if (link) link->end(true);
      }
    } link_end{link_};
    if (link_) {
      RemoteRun hooks;
      hooks.element_bytes = static_cast<int>(sizeof(T));
      hooks.buffer = [this](BufferId b) -> void* { return writable(b).data(); };
      hooks.received = [this](TaskId m, double end_s) {
        const Task& t = tg_.tasks[m.index()];
        remote_spans_.push_back(Span{m, t.dst_device, default_lane(t.kind), end_s, end_s});
        finish(m.value);
      };
      hooks.released = [this](std::int32_t phase) {
        std::lock_guard<std::mutex> lock(phase_mutex_);
        released_ = std::max(released_, phase + 1);
        advance_phase_locked();
      };
      hooks.failed = [this](std::exception_ptr e) {
        {
          std::lock_guard<std::mutex> lock(error_mutex_);
          if (!error_) error_ = std::move(e);
        }
        stop_all();
      };
      link_->begin(tg_, std::move(hooks));
    }
    // Start the workers (and copy lanes) first and the clock once all of them are pinned
    // and waiting: waking them is not part of the task graph's time (nor of the simulator's).
    pool_.start(lanes_, [this](int lane) { worker(lane); });
    // From here the workers use this Run: whatever leaves this function, by return or
    // by exception, first lets them finish.
    struct Release {
      Run* run;
      ~Release() {
        if (!run) return;
        run->stop_all();
        run->go_.store(true, std::memory_order_release);
        run->go_.notify_all();
        try {
          run->pool_.wait();
        } catch (...) {  // already unwinding: the first error is the one reported
        }
      }
    } release{this};
    while (workers_ready_.load(std::memory_order_acquire) < lanes_) std::this_thread::yield();
    whole_inputs_ = {};  // every worker has placed its input blocks
    if (error_) {  // a worker could not: release the others and report it
      release.run = nullptr;
      stop_all();
      go_.store(true, std::memory_order_release);
      go_.notify_all();
      pool_.wait();
      std::rethrow_exception(error_);
    }
    t0_ = Clock::now();
    if (link_) link_->started(t0_);
    if (options_.policy == Policy::bsp) {
      std::lock_guard<std::mutex> lock(phase_mutex_);
      advance_phase_locked();
    }
    for (std::size_t i = 0; i < n; ++i)
      if (tg_.tasks[i].deps.empty() && involved_[i]) make_ready(static_cast<std::int32_t>(i));
    if (involved == 0) stop_all();
    go_.store(true, std::memory_order_release);
    go_.notify_all();
    release.run = nullptr;
    pool_.wait();
    if (error_) std::rethrow_exception(error_);
    if (link_) {
      link_end.link = nullptr;
      link_->end(false);
      if (error_) std::rethrow_exception(error_);
    }
    for (const Task& t : tg_.tasks) {
      if (t.kind != TaskKind::output || !local(t.device)) continue;
      const Buffer& src = tg_.buffer(t.reads[0]);
      Tensor& out = result_.outputs.at(g_.node(t.node).name);
      if (arena_.planned) continue;  // copied out by the output task itself
      const BufferStore<T>& data = storage_[t.reads[0].index()];
      cpu::copy_region_to_double<T>(data.data(), src.shape, Rect::whole(src.shape), out.data.data(), out.shape,
                                    t.src);
    }
    if (profile_) profile_in_place();
    for (auto& s : spans_) result_.timeline.spans.insert(result_.timeline.spans.end(), s.begin(), s.end());
    result_.timeline.spans.insert(result_.timeline.spans.end(), remote_spans_.begin(), remote_spans_.end());
    std::sort(result_.timeline.spans.begin(), result_.timeline.spans.end(),
              [](const Span& a, const Span& b) { return a.task < b.task; });
    return std::move(result_);
  }

 private:
  // InPlaceProfileOptions: each worker times its device's compute tasks, the k-th of
  // every device at once (a device with fewer tasks repeats its own, so that every
  // worker stays busy, and those repeats are not kept).
  void profile_in_place() {
    const int devices = tg_.num_devices;
    std::vector<std::vector<std::int32_t>> mine(static_cast<std::size_t>(devices));
    for (std::size_t i = 0; i < tg_.tasks.size(); ++i)
      if (tg_.tasks[i].kind == TaskKind::compute)
        mine[tg_.tasks[i].device.index()].push_back(static_cast<std::int32_t>(i));
    std::size_t rounds = 0;
    for (const auto& m : mine) rounds = std::max(rounds, m.size());
    TaskProfile& out = *profile_out_;
    out.hot_s.assign(tg_.tasks.size(), -1.0);
    out.cold_s.assign(tg_.tasks.size(), -1.0);
    const bool dram = profile_->cold && profile_->dram;
    out.dram_s.assign(dram ? tg_.tasks.size() : 0, -1.0);
    out.dram_flushed = dram && can_flush_caches();
    out.tasks = 0;
    // Buffers freed after their last reader during the run (a graph too large to
    // preallocate) are allocated again for the round that times their task, and freed
    // after it, so that the profile never holds more than a task per device.
    const bool freed = !preallocate_ && !arena_.planned;
    std::vector<std::vector<const T*>> operands(static_cast<std::size_t>(devices));
    std::vector<CacheEvictor> evict(static_cast<std::size_t>(devices));
    const std::int64_t evict_bytes = profile_->evict_bytes > 0 ? profile_->evict_bytes : 2 * per_core_cache_bytes();
    for (std::size_t k = 0; k < rounds; ++k) {
      auto task_of = [&](int w) -> std::int32_t {
        const auto& m = mine[static_cast<std::size_t>(w)];
        return m.empty() ? -1 : m[k % m.size()];
      };
      std::vector<BufferId> allocated;
      if (freed)
        for (int w = 0; w < devices; ++w)
          if (const std::int32_t i = task_of(w); i >= 0) {
            const Task& t = tg_.tasks[static_cast<std::size_t>(i)];
            for (BufferId b : t.reads)
              if (storage_[b.index()].empty()) {
                (void)writable(b);
                allocated.push_back(b);
              }
            if (t.writes.valid() && storage_[t.writes.index()].empty()) allocated.push_back(t.writes);  // by run_task
          }
      auto setup = [](int) {};
      auto body = [&](int w) {
        const std::int32_t i = task_of(w);
        if (i < 0) return;
        const Task& t = tg_.tasks[static_cast<std::size_t>(i)];
        try {
          run_task(t, scratch_[static_cast<std::size_t>(w)], operands[static_cast<std::size_t>(w)]);
        } catch (const std::exception& e) {
          fail("cpu executor: in-place profile of task ", i, " (node '", g_.node(t.node).name, "'): ", e.what());
        }
      };
      const std::vector<double> hot = per_call_seconds_each(devices, profile_->seconds_per_task, setup, body);
      std::vector<double> cold = hot, from_dram;
      if (profile_->cold) {
        // As many cold calls on every worker, sized by the workers that have a task this round.
        std::vector<double> busy;
        for (int w = 0; w < devices; ++w)
          if (k < mine[static_cast<std::size_t>(w)].size()) busy.push_back(hot[static_cast<std::size_t>(w)]);
        auto cold_setup = [&](int w) { evict[static_cast<std::size_t>(w)] = CacheEvictor(evict_bytes); };
        auto before = [&](int w) { evict[static_cast<std::size_t>(w)].push(); };
        cold = per_call_seconds_after_each(devices, profile_->seconds_per_task / 2, stats::median(busy), cold_setup,
                                           before, body);
        if (dram) {
          // The same calls with the task's operands then flushed from every cache level.
          auto flush = [&](BufferId b) {
            const BufferStore<T>& s = storage_[b.index()];
            (void)flush_from_caches(s.data(), s.size() * sizeof(T));
          };
          auto before_dram = [&](int w) {
            evict[static_cast<std::size_t>(w)].push();
            const std::int32_t i = task_of(w);
            if (i < 0) return;
            const Task& t = tg_.tasks[static_cast<std::size_t>(i)];
            for (BufferId b : t.reads) flush(b);
            if (t.writes.valid()) flush(t.writes);
          };
          from_dram = per_call_seconds_after_each(devices, profile_->seconds_per_task / 2, stats::median(cold),
                                                  cold_setup, before_dram, body);
        }
      }
      for (int w = 0; w < devices; ++w) {
        const auto& m = mine[static_cast<std::size_t>(w)];
        if (k >= m.size()) continue;
        const auto i = static_cast<std::size_t>(m[k]);
        out.hot_s[i] = hot[static_cast<std::size_t>(w)];
        out.cold_s[i] = std::max(hot[static_cast<std::size_t>(w)], cold[static_cast<std::size_t>(w)]);
        if (dram) out.dram_s[i] = std::max(out.cold_s[i], from_dram[static_cast<std::size_t>(w)]);
        ++out.tasks;
      }
      for (BufferId b : allocated) storage_[b.index()].release();
    }
  }

  // Heap order: larger rank first, then smaller tie key.
  bool before(std::int32_t a, std::int32_t b) const {
    return rank_[a] != rank_[b] ? rank_[a] < rank_[b] : tie_[a] > tie_[b];
  }

  // This process runs the device's worker (every device, unless the run is split over
  // processes by a RemoteLink).
  bool local(DeviceId d) const { return d.value >= lo_ && d.value < hi_; }
  // A move whose data comes from another process.
  bool incoming(const Task& t) const { return t.kind == TaskKind::move && local(t.dst_device) && !local(t.device); }
  // The worker that runs a task here: worker_of, except that a move to another process
  // is packed and handed to the link by its source's worker.
  DeviceId runner(const Task& t) const {
    return t.kind == TaskKind::move && !local(t.dst_device) ? t.device : worker_of(t);
  }

  static bool is_host_copy(const Task& t) { return t.kind == TaskKind::evict || t.kind == TaskKind::load; }
  static bool has_host_copies(const TaskGraph& tg) {
    return std::any_of(tg.tasks.begin(), tg.tasks.end(), [](const Task& t) { return is_host_copy(t); });
  }
  // The lane whose queue a task waits in: its runner's worker, or with copy lanes, an
  // evict's or a load's device's copy lane (devices_ + device).
  std::size_t lane_of(const Task& t) const {
    if (copy_lanes_ && is_host_copy(t)) return static_cast<std::size_t>(devices_) + t.device.index();
    return runner(t).index();
  }

  void push(std::int32_t task) {
    ReadyQueue& q = queues_[lane_of(tg_.tasks[task])];
    {
      std::lock_guard<std::mutex> lock(q.mutex);
      q.heap.push_back(task);
      std::push_heap(q.heap.begin(), q.heap.end(), [this](std::int32_t a, std::int32_t b) { return before(a, b); });
      q.size.store(static_cast<std::int32_t>(q.heap.size()), std::memory_order_release);
    }
    q.cv.notify_one();
  }

  void make_ready(std::int32_t task) {
    if (options_.policy == Policy::bsp) {
      std::int32_t p = bsp_phase(tg_.tasks[task]);
      std::lock_guard<std::mutex> lock(phase_mutex_);
      if (p > current_phase_) {
        held_[p].push_back(task);
        return;
      }
    }
    push(task);
  }

  // Moves past finished phases and releases the tasks held for the new one.
  void advance_phase_locked() {
    while (current_phase_ < num_phases_ && phase_left_[current_phase_].load() == 0) {
      if (link_) {  // the phase ends when every process has finished it
        if (reported_ <= current_phase_) {
          reported_ = current_phase_ + 1;
          link_->phase_done(current_phase_);
        }
        if (released_ <= current_phase_) return;
      }
      ++current_phase_;
      if (current_phase_ < num_phases_) {
        for (std::int32_t t : held_[current_phase_]) push(t);
        held_[current_phase_].clear();
      }
    }
  }

  void finish(std::int32_t task) {
    for (TaskId s : succs_[task])
      if (involved_[s.index()] && deps_left_[s.index()].fetch_sub(1, std::memory_order_acq_rel) == 1)
        make_ready(s.value);
    if (!preallocate_ && !arena_.planned && tg_.tasks[task].kind != TaskKind::output)  // output buffers are read after the run
      for (BufferId b : tg_.tasks[task].reads)
        if (readers_left_[b.index()].fetch_sub(1, std::memory_order_acq_rel) == 1) storage_[b.index()].release();
    if (options_.policy == Policy::bsp) {
      std::int32_t p = bsp_phase(tg_.tasks[task]);
      if (phase_left_[p].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(phase_mutex_);
        advance_phase_locked();
      }
    }
    if (tasks_left_.fetch_sub(1, std::memory_order_acq_rel) == 1) stop_all();
  }

  void stop_all() {
    done_.store(true);
    for (auto& q : queues_) {
      std::lock_guard<std::mutex> lock(q.mutex);
      q.cv.notify_all();
    }
  }

  // Pool thread `lane`: device lane's worker, or (lane >= devices_) a copy lane.
  void worker(int lane) {
    if (lane >= devices_) {
      copy_lane(lane - devices_);
      return;
    }
    const int device = lane;
    if (!local(DeviceId(device))) {  // another process runs this device
      workers_ready_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    if (options_.pin_threads) pin_to_core(device);
    set_worker_float_mode();
    cpu::Scratch<T>& scratch = scratch_[static_cast<std::size_t>(device)];
    std::vector<const T*> operands;
    try {
      if (preallocate_)  // this device's memory, allocated and first touched by its own worker
        for (BufferId b : device_buffers_[static_cast<std::size_t>(device)]) (void)writable(b);
      if (arena_.planned) {  // its arenas, allocated and first touched by its own worker
        const auto d = static_cast<std::size_t>(device);
        device_arena_[d].assign(static_cast<std::size_t>(arena_.device_elements[d]), T(0));
        host_arena_[d].assign(static_cast<std::size_t>(arena_.host_elements[d]), T(0));
      }
      for (std::int32_t i : input_tasks_[static_cast<std::size_t>(device)]) {
        const Task& t = tg_.tasks[static_cast<std::size_t>(i)];
        BufferStore<T>& out = writable(t.writes);
        const Shape& shape = tg_.buffer(t.writes).shape;
        cpu::copy_region<T>(whole_inputs_[t.node.index()].data(), g_.node(t.node).shape, t.src, out.data(), shape,
                            Rect::whole(shape), Agg::none);
      }
    } catch (...) {  // out of memory, most likely: the run stops before the clock
      {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) {
          try {
            try {
              throw;
            } catch (const std::exception& e) {
              throw Error("cpu executor: device " + std::to_string(device) + " could not place its buffers: " +
                          e.what());
            }
          } catch (...) {  // the Error, or whatever else was thrown (even a bad_alloc building the message)
            error_ = std::current_exception();
          }
        }
      }
      workers_ready_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    workers_ready_.fetch_add(1, std::memory_order_acq_rel);
    if (link_) {
      // mpirun binds a rank to one core, the core this worker is pinned to: a worker
      // spinning here would hold it until the scheduler's next tick (4 ms) while the
      // rank's main thread waits on it to start the clock and enter the start barrier
      // with the other ranks (link_->started). Sleep instead.
      go_.wait(false, std::memory_order_acquire);
    } else {
      while (!go_.load(std::memory_order_acquire)) cpu_relax();
    }
    serve(device, scratch, operands, true);
  }

  // Device `device`'s copy lane: its evicts and loads, one at a time, in priority order.
  // Pinned to a core of its own where the machine has one; else unpinned, and it sleeps
  // rather than spins while it waits (it shares the workers' cores).
  void copy_lane(int device) {
    if (!local(DeviceId(device)) || !has_copy_[static_cast<std::size_t>(device)]) {
      workers_ready_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    const int core = options_.pin_threads ? copy_lane_core(devices_, device) : -1;
    if (core >= 0) {
      pin_to_core(core);
    } else if (options_.pin_threads) {
      unpin_thread();  // off a core an earlier run pinned this pooled thread to
    }
    set_worker_float_mode();
    workers_ready_.fetch_add(1, std::memory_order_acq_rel);
    if (core >= 0) {
      while (!go_.load(std::memory_order_acquire)) cpu_relax();
    } else {
      go_.wait(false, std::memory_order_acquire);
    }
    cpu::Scratch<T> unused;  // evicts and loads are whole-buffer copies: no kernel scratch
    std::vector<const T*> operands;
    serve(devices_ + device, unused, operands, core >= 0);
  }

  // Runs the tasks of lane `lane`'s queue until the run stops; `spin`: pause before
  // sleeping while the queue is empty (a thread that owns its core).
  void serve(int lane, cpu::Scratch<T>& scratch, std::vector<const T*>& operands, bool spin) {
    ReadyQueue& q = queues_[static_cast<std::size_t>(lane)];
    for (;;) {
      std::int32_t task = -1;
      {
        // A worker owns its core: spin (kSpins, ~0.5 ms here) before sleeping, so that a task made
        // ready by another worker starts within a microsecond instead of after a
        // futex wake-up (tens of microseconds on a loaded machine).
        if (link_) {
          // The link's thread may share this core (mpirun binds a rank to one): a worker
          // that waits for a move from another process yields to it, and not for long.
          for (const auto until = Clock::now() + kLinkSpin;
               q.size.load(std::memory_order_acquire) == 0 && !done_.load() && Clock::now() < until;)
            std::this_thread::yield();
        } else if (spin) {
          for (int k = 0; k < kSpins && q.size.load(std::memory_order_acquire) == 0 && !done_.load(); ++k) cpu_relax();
        }
        std::unique_lock<std::mutex> lock(q.mutex);
        q.cv.wait(lock, [&] { return !q.heap.empty() || done_.load(); });
        if (q.heap.empty()) return;
        std::pop_heap(q.heap.begin(), q.heap.end(), [this](std::int32_t a, std::int32_t b) { return before(a, b); });
        task = q.heap.back();
        q.heap.pop_back();
        q.size.store(static_cast<std::int32_t>(q.heap.size()), std::memory_order_release);
      }
      const Task& t = tg_.tasks[task];
      const auto start = Clock::now();
      try {
        if (link_) link_->before_task(TaskId(task));
        if (options_.before_task) options_.before_task(TaskId(task));
        run_task(t, scratch, operands);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(error_mutex_);
          if (!error_) {
            std::string what = "?";
            try {
              throw;
            } catch (const std::exception& e) {
              what = e.what();
            } catch (...) {
            }
            error_ = std::make_exception_ptr(Error("cpu executor: task " + std::to_string(task) + " (" +
                                                   std::string(to_string(t.kind)) + " of node '" +
                                                   g_.node(t.node).name + "') failed: " + what));
          }
        }
        stop_all();
        return;
      }
      const auto end = Clock::now();
      spans_[static_cast<std::size_t>(lane)].push_back(
          Span{TaskId(task), worker_of(t), default_lane(t.kind), std::chrono::duration<double>(start - t0_).count(),
               std::chrono::duration<double>(end - t0_).count()});
      finish(task);
    }
  }

  // The buffer's memory, set to its initial value when first written (unless `fill` is
  // false: the caller overwrites all of it).
  BufferStore<T>& writable(BufferId b, bool fill = true) {
    BufferStore<T>& s = storage_[b.index()];
    if (s.empty()) {
      const Buffer& info = tg_.buffer(b);
      const auto n = static_cast<std::size_t>(elements(info.shape));
      const T init = static_cast<T>(info.init == Agg::none ? 0.0 : agg_identity(info.init));
      const std::int64_t at = arena_.planned ? arena_.element_offset[b.index()] : -1;
      if (at >= 0) {  // its place in its device's (or host) arena
        std::vector<T>& arena = (info.host ? host_arena_ : device_arena_)[info.device.index()];
        s.view = arena.data() + at;
        s.count = n;
        if (fill) std::fill(s.view, s.view + n, init);
      } else {
        s.owned.assign(n, init);
      }
    }
    return s;
  }

  void run_task(const Task& t, cpu::Scratch<T>& scratch, std::vector<const T*>& operands) {
    switch (t.kind) {
      case TaskKind::input:  // placed before the run
        break;
      case TaskKind::output: {  // copied out after the run, or now from an arena its buffer may leave
        if (!arena_.planned) break;
        const Buffer& src = tg_.buffer(t.reads[0]);
        const BufferStore<T>& data = storage_[t.reads[0].index()];
        Tensor& out = result_.outputs.at(g_.node(t.node).name);
        // Converted as it is copied: no temporary, which (an allocation and a page fault
        // per page, on the clock) cost 17-28 us per 64 KB block of the tiny LLaMA block.
        cpu::copy_region_to_double<T>(data.data(), src.shape, Rect::whole(src.shape), out.data.data(), out.shape,
                                      t.src);
        break;
      }
      case TaskKind::evict:
      case TaskKind::load: {  // a whole buffer between the device and the host arena
        const BufferStore<T>& from = storage_[t.reads[0].index()];
        BufferStore<T>& to = writable(t.writes, false);
        std::copy(from.data(), from.data() + from.size(), to.data());
        break;
      }
      case TaskKind::collective: {  // a lowered collective as loops of copies
        const CollectiveSpec& s = tg_.collectives[static_cast<std::size_t>(t.block)];
        if (!s.lowered()) fail("cpu executor: a collective node that is not lowered; run its expanded form");
        for (std::size_t r = 0; r < s.outputs.size(); ++r) {
          const Buffer& dst = tg_.buffer(s.outputs[r]);
          BufferStore<T>& out = writable(s.outputs[r]);
          for (std::size_t k = 0; k < t.reads.size(); ++k) {
            const BufferId in = t.reads[k];
            const Shape& in_shape = tg_.buffer(in).shape;
            if (s.collective == Collective::allgather)  // every rank's whole input to its region of every output
              cpu::copy_region<T>(storage_[in.index()].data(), in_shape, Rect::whole(in_shape), out.data(), dst.shape,
                                  s.regions[k], Agg::none);
            else  // every rank's region of every input, combined
              cpu::copy_region<T>(storage_[in.index()].data(), in_shape, s.regions[r], out.data(), dst.shape,
                                  Rect::whole(dst.shape), s.agg);
          }
        }
        break;
      }
      case TaskKind::compute: {
        const Node& n = g_.node(t.node);
        BufferStore<T>& out = writable(t.writes);
        if (n.kind == NodeKind::fill) {
          cpu::fill_block<T>(n.fill, t.src, out.data());
        } else {
          const Einsum block = n.einsum.with_join_shape(t.src.shape());
          if (t.reads.size() != block.inputs.size())
            fail("compute task reads ", t.reads.size(), " buffers for ", block.inputs.size(), " operands");
          operands.clear();
          for (std::size_t i = 0; i < t.reads.size(); ++i) {
            const BufferStore<T>& in = storage_[t.reads[i].index()];
            if (static_cast<std::int64_t>(in.size()) != elements(block.input_shape(static_cast<int>(i))))
              fail("operand ", i, " holds ", in.size(), " elements but block ", to_string(t.src), " needs ",
                   tessel::to_string(block.input_shape(static_cast<int>(i))));
            operands.push_back(in.data());
          }
          if (static_cast<std::int64_t>(out.size()) != elements(block.out_shape()))
            fail("output buffer holds ", out.size(), " elements but block ", to_string(t.src), " writes ",
                 tessel::to_string(block.out_shape()));
          cpu::einsum_block<T>(block, operands, out.data(), scratch);
        }
        break;
      }
      case TaskKind::touch: {
        const Buffer& src = tg_.buffer(t.reads[0]);
        const Buffer& dst = tg_.buffer(t.writes);
        BufferStore<T>& out = writable(t.writes);
        cpu::copy_region<T>(storage_[t.reads[0].index()].data(), src.shape, t.src, out.data(), dst.shape, t.dst,
                            t.op == TouchOp::accumulate ? t.agg : Agg::none);
        break;
      }
      case TaskKind::move: {
        const Buffer& src = tg_.buffer(t.reads[0]);
        const Buffer& dst = tg_.buffer(t.writes);
        if (!local(t.dst_device)) {  // to another process: packed here, sent by the link
          std::vector<std::byte> packed = link_->send_buffer(static_cast<std::size_t>(elements(dst.shape)) * sizeof(T));
          cpu::copy_region<T>(storage_[t.reads[0].index()].data(), src.shape, t.src,
                              reinterpret_cast<T*>(packed.data()), dst.shape, Rect::whole(dst.shape), Agg::none);
          link_->send(TaskId(static_cast<std::int32_t>(&t - tg_.tasks.data())), std::move(packed));
          break;
        }
        BufferStore<T>& out = writable(t.writes);
        cpu::copy_region<T>(storage_[t.reads[0].index()].data(), src.shape, t.src, out.data(), dst.shape,
                            Rect::whole(dst.shape), Agg::none);
        break;
      }
    }
  }

  const Graph& g_;
  const TaskGraph& tg_;
  const TensorMap& inputs_;
  CpuOptions options_;
  int devices_ = 0;
  bool copy_lanes_ = false;  // CopyLane::thread and the graph has evicts or loads
  int lanes_ = 0;            // pool threads: the workers, then (copy_lanes_) a copy lane per device
  std::vector<ReadyQueue> queues_;  // per lane
  std::vector<char> has_copy_;      // per device, with copy lanes: it has evicts or loads
  std::vector<std::vector<TaskId>> succs_;
  std::vector<double> rank_;  // priority: longest estimated path to the end
  std::vector<std::uint64_t> tie_;  // then this, smaller first (core/ready_order.h)
  std::unique_ptr<std::atomic<std::int32_t>[]> deps_left_;
  std::unique_ptr<std::atomic<std::int32_t>[]> readers_left_;
  std::vector<BufferStore<T>> storage_;
  ArenaLayout arena_;                                  // memory-capped graphs: where buffers live
  std::vector<std::vector<T>> device_arena_, host_arena_;  // per device, when arena_.planned
  std::vector<cpu::Scratch<T>>& scratch_;  // per device, the executor's: kept warm across runs
  WorkerPool& pool_;                       // the executor's threads: kept warm across runs
  RemoteLink* link_ = nullptr;             // a run split over processes: the other processes' moves
  const InPlaceProfileOptions* profile_ = nullptr;  // run_profiled: time every compute task after the run
  TaskProfile* profile_out_ = nullptr;
  int lo_ = 0, hi_ = 0;                    // the devices this process runs: [lo_, hi_)
  std::vector<char> involved_;             // per task: runs here (or arrives here)
  std::vector<Span> remote_spans_;         // moves that arrived from other processes (the link's thread)
  bool preallocate_ = false;                       // see CpuOptions::preallocate_limit_bytes
  std::vector<std::vector<BufferId>> device_buffers_;  // per device, when preallocating
  std::vector<std::vector<T>> whole_inputs_;            // per graph node: the whole input tensor
  std::vector<std::vector<std::int32_t>> input_tasks_;  // per device: its input tasks, placed by its worker
  std::atomic<std::int64_t> tasks_left_{0};
  std::atomic<bool> done_{false};
  std::atomic<int> workers_ready_{0};
  std::atomic<bool> go_{false};
  std::vector<std::vector<Span>> spans_;
  Clock::time_point t0_;
  RunResult result_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  // bsp only
  std::mutex phase_mutex_;
  std::unique_ptr<std::atomic<std::int32_t>[]> phase_left_;
  std::vector<std::vector<std::int32_t>> held_;
  std::int32_t current_phase_ = 0;
  std::int32_t num_phases_ = 0;
  std::int32_t reported_ = 0;  // with a link: phases reported done to it
  std::int32_t released_ = 0;  // with a link: phases every process has finished
};

}  // namespace

struct CpuWorkspaces {
  std::vector<cpu::Scratch<float>> f32;
  std::vector<cpu::Scratch<double>> f64;
  WorkerPool pool;
};

CpuExecutor::CpuExecutor(CpuOptions options) : options_(options), scratch_(std::make_unique<CpuWorkspaces>()) {}
CpuExecutor::~CpuExecutor() = default;
CpuExecutor::CpuExecutor(CpuExecutor&&) noexcept = default;
CpuExecutor& CpuExecutor::operator=(CpuExecutor&&) noexcept = default;

RunResult CpuExecutor::run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) {
  return run_with(g, tg, inputs, nullptr, nullptr);
}

ProfiledRun CpuExecutor::run_profiled(const Graph& g, const TaskGraph& tg, const TensorMap& inputs,
                                      const InPlaceProfileOptions& options) {
  if (!(options.seconds_per_task > 0)) fail("cpu executor: in-place profile: seconds per task must be > 0");
  if (options.evict_bytes < 0 || (options.evict_bytes > 0 && options.evict_bytes < 4))
    fail("cpu executor: in-place profile: evict bytes must be 0 (twice the per-core cache) or >= 4, got ",
         options.evict_bytes);
  if (options_.link) fail("cpu executor: an in-place profile needs every device in this process (no RemoteLink)");
  ProfiledRun r;
  r.run = run_with(g, tg, inputs, &options, &r.profile);
  return r;
}

RunResult CpuExecutor::run_with(const Graph& g, const TaskGraph& tg, const TensorMap& inputs,
                                const InPlaceProfileOptions* options, TaskProfile* profile) {
  check_inputs(g, inputs);
  tg.validate();
  // Over MPI a move from another process is received straight into its destination
  // buffer, posted before the clock: in a memory-capped graph that buffer's planned range
  // may still hold a buffer this process's tasks use (the move's dependencies on them are
  // not waited for here), and the arenas do not exist yet when the receives are posted.
  const bool split = options_.link && (options_.link->first_device() > 0 || options_.link->last_device() < tg.num_devices);
  if (split && std::any_of(tg.buffers.begin(), tg.buffers.end(),
                           [](const Buffer& b) { return b.host || b.offset_bytes >= 0; }))
    fail("cpu executor: a memory-capped task graph (evicts, loads, buffers at planned offsets) cannot run split "
         "over processes (MPI): a move from another process would be received into a planned range before this "
         "process's earlier users of that range are done; run it in one process (--backend cpu)");
  if (options_.link && options_.copy_lane == CopyLane::thread)
    fail("cpu executor: copy lane 'thread' runs on one process's devices only; over MPI (a RemoteLink) evicts and "
         "loads run on the worker (copy lane 'worker')");
  // Split over processes, a collective's ranks are in several: run it as moves.
  if (options_.link && has_lowered_collectives(tg)) return run(g, collectives_as_moves(tg), inputs);
  bool f64 = false;
  for (const Node& n : g.nodes()) f64 = f64 || n.dtype == DType::f64;
  if (f64) return Run<double>(g, tg, inputs, options_, scratch_->f64, scratch_->pool, options, profile).execute();
  return Run<float>(g, tg, inputs, options_, scratch_->f32, scratch_->pool, options, profile).execute();
}

}  // namespace tessel::runtime
