#pragma once
// Calibration of the CUDA backend (first run on an H200, 2026-11-28): micro-benchmarks on the GPU(s)
// turned into a machine JSON the simulator accepts.
//
//   gemm       cuBLAS GEMMs by shape (M, N, K: square and skinny) and dtype (bf16, f16,
//              f32, tf32, f64), each timed with CUDA events (a warm-up call, then batches
//              of calls; the median batch) on non-zero data → peak flop/s per dtype and an
//              efficiency table by flops (square bf16 GEMMs)
//   memory     a device-to-device cudaMemcpy of 1 GiB → HBM bandwidth (bytes read + written)
//   copies     64 MiB copies between two ranges of one GPU (what a move between virtual
//              devices is) and, with two GPUs, cudaMemcpyPeerAsync between them → bytes/s
//   launch     back-to-back launches of an empty NVRTC kernel → seconds per launch
//   overhead   the executor on a chain of tiny elementwise nodes → seconds per task
//              beyond its kernels (span of the graph less its kernels' time, per task)
//   dispatch   the same chain split into at least four independent chains per GPU (its
//              virtual devices, so that the front end always has a task to start): the
//              median gap between consecutive task starts on one GPU → its front end's
//              seconds per task (DeviceType::dispatch_interval_s), for the graph launch,
//              for tasks issued to streams, and without marks the graph's span per task
//              of its busiest GPU (the marks cost the difference; reported, not used)
//   barrier    the chain split over the calibrated devices under bsp (every node two
//              phases): per GPU the median gap from a phase's last compute end to the next
//              phase's first compute start, less task_overhead_s (the simulator spends it
//              inside each compute span, the executor between them) → the machine's
//              barrier_latency_s. A probe that fails warns and leaves its figure 0.
//
// Virtual devices: with n logical devices on G < n GPUs, each of the n devices of the
// machine JSON is described with its whole GPU's rates and the GPU's index as its chip
// (Device::chip); the simulator shares a chip among the devices computing on it at once
// (k of them: each k times slower). Memory capacity is split (each has its own range).
// Moves between virtual devices of one GPU cross a link of the measured same-GPU copy
// bandwidth that all of them share. The machine's per-task overhead (launch_latency_s) and
// dispatch interval are the graph-launch figures, the executor's default.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/graph.h"
#include "core/machine.h"

namespace tessel::runtime {

struct CudaCalibrationOptions {
  int devices = 1;  // logical devices of the machine JSON
  int gpus = 0;     // physical GPUs (0: every visible one, at most `devices`)
  double seconds_per_point = 0.05;
};

struct CudaCalibration {
  int devices = 0;
  int gpus = 0;
  std::string device_name;
  std::string compute_capability;
  std::string driver_version;
  std::string runtime_version;
  int sm_count = 0;
  std::int64_t memory_capacity_bytes = 0;
  struct GemmPoint {
    std::string dtype;  // bf16, f16, f32, tf32, f64
    std::int64_t m = 0, n = 0, k = 0;
    double flops = 0;
    double seconds = 0;
    double flops_per_s = 0;
  };
  std::vector<GemmPoint> gemm;
  double peak_bf16_flops_per_s = 0, peak_f16_flops_per_s = 0, peak_f32_flops_per_s = 0, peak_tf32_flops_per_s = 0,
         peak_f64_flops_per_s = 0;  // one whole GPU
  double memory_bytes_per_s = 0;          // HBM: bytes read + written by a 1 GiB D2D copy
  double same_gpu_copy_bytes_per_s = 0;   // bytes copied per second between two ranges of one GPU
  double peer_copy_bytes_per_s = 0;       // between two GPUs; 0 with one GPU
  double launch_latency_s = 0;            // per back-to-back launch of an empty kernel
  double task_overhead_s = 0;             // the executor's time per task beyond its kernel (--launch graph)
  double task_overhead_stream_s = 0;      // the same with every task issued to its stream (--launch stream)
  double dispatch_interval_s = 0;         // least time between task starts on one GPU (--launch graph)
  double dispatch_interval_stream_s = 0;  // the same, tasks issued to streams (--launch stream)
  double dispatch_interval_unmarked_s = 0;  // the unmarked graph's span per task; 0: not measured
  double barrier_latency_s = 0;           // a bsp barrier: last end of a phase to the next one's first start
};

[[nodiscard]] CudaCalibration calibrate_cuda(const CudaCalibrationOptions& options);
[[nodiscard]] Machine machine_from_cuda_calibration(const CudaCalibration& c);
[[nodiscard]] nlohmann::json to_json(const CudaCalibration& c);
// The per-task overhead probe: a chain of `nodes` tiny elementwise maps (256 floats) on one
// device, so that a run's span is almost all dispatch. Calibration and the benchmark share it.
[[nodiscard]] Graph overhead_probe_graph(int nodes = 200);

}  // namespace tessel::runtime
