#pragma once
// Pinning and timing helpers shared by the CPU executor, calibration and kernel
// profiling (internal to runtime/).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/task_graph.h"
#include "core/timeline.h"

namespace tessel::runtime {

// Pins the calling thread to core `worker` modulo the cores (best effort), as the CPU
// executor pins its workers.
void pin_to_core(int worker);
// The cores pin_to_core() spreads threads over: std::thread::hardware_concurrency(), at least 1.
[[nodiscard]] int pinnable_cores();
// Gives the calling thread back the affinity mask the process started with (best
// effort; taken once, when the library is loaded, so a narrower taskset/numactl/mpirun
// binding is kept, not widened): a pooled thread pinned in an earlier run keeps its core
// otherwise.
void unpin_thread();

// Sets the calling thread's floating-point mode as every CPU worker runs: subnormal
// results flushed to zero and subnormal operands read as zero (x86's FTZ and DAZ,
// AArch64's FZ), as PyTorch's set_flush_denormal(True) does. Without it a kernel's time
// depends on its data: exp of a masked softmax's -inf entries and everything downstream
// of them produce subnormals, which cost the core microcode assists (the tiny LLaMA
// block's exp, division and P·V GEMM ran 1.2-1.5x slower on masked rows than the same
// kernels on a profile's operands). The executor, calibration and the in-place profile
// all run under it, so that what is profiled is what runs.
void set_worker_float_mode();

// Runs body(worker) repeatedly on `workers` pinned threads at once — after setup(worker)
// and one untimed call each — until each has spent at least `min_seconds`, in five
// batches timed apart; returns the median over workers of each one's median batch's
// seconds per call. Every worker keeps running until all have
// measured, so that each call is timed with all workers busy.
[[nodiscard]] double per_call_seconds(int workers, double min_seconds, const std::function<void(int)>& setup,
                                      const std::function<void(int)>& body);

// The same with before(worker) run, untimed, before every timed call of body(worker),
// for a body measured in the state `before` leaves (caches emptied of its data, say).
// Each call is timed on its own, after every worker has finished its `before` (so that
// no worker's `before` disturbs another's timed call); each batch makes the same number
// of calls on every worker: enough for `min_seconds` in all at `expected_call_seconds`
// a call, at least 3 and at most 200.
[[nodiscard]] double per_call_seconds_after(int workers, double min_seconds, double expected_call_seconds,
                                            const std::function<void(int)>& setup,
                                            const std::function<void(int)>& before,
                                            const std::function<void(int)>& body);

// The two above with each worker's own figure (its median batch's seconds per call), for
// workers that time different bodies at once (the CPU executor's in-place profile).
[[nodiscard]] std::vector<double> per_call_seconds_each(int workers, double min_seconds,
                                                        const std::function<void(int)>& setup,
                                                        const std::function<void(int)>& body);
[[nodiscard]] std::vector<double> per_call_seconds_after_each(int workers, double min_seconds,
                                                              double expected_call_seconds,
                                                              const std::function<void(int)>& setup,
                                                              const std::function<void(int)>& before,
                                                              const std::function<void(int)>& body);

// Memory a worker writes to push other data out of its per-core cache (before a cold
// call): `bytes` of its own, rewritten whole by each push() (an error below 4 bytes).
class CacheEvictor {
 public:
  explicit CacheEvictor(std::int64_t bytes = 0) : data_(bytes > 0 ? static_cast<std::size_t>(bytes / 4) : 0) {}
  void push();

 private:
  std::vector<float> data_;
};

// Gaps read off an executor's timeline of `tg`, for the calibrations' barrier figure (CPU
// and CUDA alike), over compute tasks only:
//   bsp_boundary_gaps       under bsp: from each phase's last end to the next phase's first
//                           start (core's bsp_phase; phases without compute are skipped)
//   same_device_compute_gaps from each compute task's end to the next compute task's start
//                           on the same device (under async: what dispatch costs there)
[[nodiscard]] std::vector<double> bsp_boundary_gaps(const TaskGraph& tg, const Timeline& bsp);
[[nodiscard]] std::vector<double> same_device_compute_gaps(const TaskGraph& tg, const Timeline& timeline);

// Writes back and drops [data, data + bytes) from every cache level of this machine (x86
// clflush, AArch64 `dc civac`), then waits for that to finish: the next read of it comes
// from DRAM. Returns false, touching nothing, where the CPU has no such instruction.
bool flush_from_caches(const void* data, std::size_t bytes);
// Whether flush_from_caches() can do so here.
[[nodiscard]] bool can_flush_caches();

// Bytes of this machine's per-core (level 2) cache, from sysconf; 1 MiB when it does not say.
[[nodiscard]] std::int64_t per_core_cache_bytes();

}  // namespace tessel::runtime
