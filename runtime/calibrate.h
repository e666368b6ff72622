#pragma once
// Calibration of the CPU backend: micro-benchmarks run with all N workers busy at once
// (pinned as the executor pins them), turned into a Machine that the simulator can
// model the executor with. The points are measured in rounds (each point once per
// round) and each keeps its median, so that drift of the machine's speed during the
// calibration does not land on a few points only.
//
//   gemm        float GEMMs of growing size → peak flop/s per worker and an efficiency
//               table by task flops (the compute model's efficiency curve)
//   generic     elementwise/reduction blocks through the executor's generic kernels →
//               flop/s of non-contraction tasks
//   memory      strided copies inside one worker's memory (touches) → bytes/s past the
//               caches, within the per-core cache, and within this worker's share of
//               the last-level cache
//   copies      copies between device memories, one alone and all workers at once →
//               the bandwidth of a memory bus that concurrent copies share; a worker's
//               copy of a whole buffer within its memory by the buffer's size (16 KiB
//               to 64 MiB) → the rate of evicts and loads by size
//   rows        a strided copy of short rows within the per-core cache → seconds per
//               row beyond what its bytes take at the cache's bandwidth; generic kernels
//               over short rows → seconds per row beyond what their flops take
//   overhead    empty tasks through the executor → seconds per task
//   barriers    a chain of elementwise nodes under bsp against async → seconds per barrier
//   retention   a buffer of the per-core cache's size, pushed out of that cache, read back
//               at once, after the workers idled kRetentionIdleS, and after the whole
//               last-level cache was overwritten → the fraction of it the last-level
//               cache still held after the idle (a diagnostic of the host, not a model
//               input: on a VM whose last-level cache other tenants share, data a task
//               graph placed milliseconds ago has partly gone to DRAM, which no kernel
//               profile sees)

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/machine.h"

namespace tessel::runtime {

struct CalibrationOptions {
  int devices = 2;
  double seconds_per_point = 0.05;  // minimum measuring time of each point in each round
  int rounds = 3;                   // every point is measured once per round; the median is kept
};

struct Calibration {
  int devices = 0;
  struct GemmPoint {
    int size = 0;  // square: size x size x size
    double flops = 0;
    double flops_per_s = 0;  // per worker, all workers running
  };
  std::vector<GemmPoint> gemm;
  double peak_flops_per_s = 0;          // best GEMM rate per worker
  double generic_flops_per_s = 0;       // per worker, arithmetic elementwise/reduction kernels
  double transcendental_flops_per_s = 0;  // per worker, exp/silu/... evaluations in such kernels
  double memory_bytes_per_s = 0;        // per worker, bytes read + written, past the caches
  std::int64_t cache_capacity_bytes = 0;  // per-core L2 (sysconf), traffic that stays in cache
  double cache_bytes_per_s = 0;         // per worker, bytes read + written within the cache
  std::int64_t outer_cache_capacity_bytes = 0;  // this worker's share of the last-level cache; 0 = none found
  double outer_cache_bytes_per_s = 0;   // per worker, bytes read + written within that share
  double copy_bytes_per_s_alone = 0;    // one copy between device memories, nothing else running
  double copy_bytes_per_s_shared = 0;   // per copy, when every worker copies at once
  // A worker's copy of one whole buffer into another of its memory, as evicts and loads
  // are made, by the buffer's bytes (rising): small buffers stay in the caches.
  // The machine's own rate-by-size points (core/machine.h), put on each worker's host links.
  std::vector<SizeRate> copy_by_size;
  double copy_row_s = 0;                // per contiguous run of a strided copy, beside its bytes
  double generic_row_s = 0;             // per row of a generic kernel's block, beside its flops
  double task_overhead_s = 0;           // executor bookkeeping per task
  double barrier_latency_s = 0;         // bsp: extra time per barrier (phase end to next phase start)
  // The retention probe: how much of a buffer pushed out of the per-core cache the
  // last-level cache still holds after the workers idled outer_cache_retention_idle_s
  // (1: all of it, 0: none, read as fast as after the whole cache was overwritten).
  double outer_cache_retention_idle_s = 0;
  double outer_cache_retained_fraction = 0;
};

// The idle of the retention probe: 4 ms, twice a LLaMA block's makespan on two workers
// here, so that it reads what a graph's early buffers meet when they are read late.
inline constexpr double kRetentionIdleS = 0.004;
// The retention probe's fraction from its three reads of one buffer: right after it left
// the per-core cache (`now_s`), after the idle (`idle_s`) and from DRAM (`dram_s`): how far
// the idle read stayed from DRAM's time toward the cache's, clamped to [0, 1]; 1 where the
// DRAM read is not slower (nothing to tell apart).
[[nodiscard]] double retained_fraction(double now_s, double idle_s, double dram_s);
// Below this retained fraction `tessel compare` warns that the host's last-level cache
// is shared with other work (see Calibration::outer_cache_retained_fraction).
inline constexpr double kRetentionWarnBelow = 0.9;

[[nodiscard]] Calibration calibrate_cpu(const CalibrationOptions& options);

// The same, one round at a time, so that a caller can interleave calibration rounds
// with its own measurements (`tessel compare` does: both then sample the same moments of
// a machine whose speed drifts). `options.rounds` is not used.
class CpuCalibrator {
 public:
  explicit CpuCalibrator(const CalibrationOptions& options);
  ~CpuCalibrator();
  CpuCalibrator(const CpuCalibrator&) = delete;
  CpuCalibrator& operator=(const CpuCalibrator&) = delete;
  void round();  // measures every point once
  [[nodiscard]] int rounds() const;
  // Each point's median over the rounds so far; an error before the first round.
  [[nodiscard]] Calibration result() const;
  // The figures of round `round` alone (0-based), for pairing with measurements taken
  // right after it; an error for a round not measured.
  [[nodiscard]] Calibration round_result(int round) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A Machine of `c.devices` CPU workers: peaks and efficiency from the GEMMs, the generic
// kernels' rate, memory bandwidth, one link per worker into and out of its memory and a
// memory bus shared by all copies, per-task overhead as launch latency, and a single
// lane per device (a copy runs on the worker and occupies it).
[[nodiscard]] Machine machine_from_calibration(const Calibration& c);
[[nodiscard]] nlohmann::json to_json(const Calibration& c);

}  // namespace tessel::runtime
