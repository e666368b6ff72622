#pragma once
// Compute/communication overlap on one GPU (first run on an H200, 2026-11-28): `tessel calibrate
// --backend cuda --overlap`. Measures how a GEMM stream and a communication stream slow
// each other, per configuration, and turns the figures into the machine JSON's
// interference rows (core/machine.h, Interference; "measured": true).
//
// Configurations (each measured alone and together, medians of 3):
//   mechanism  copy_engine: cudaMemcpyAsync device-to-device (the copy engines)
//              sm_kernels:  a grid-stride copy kernel of `comm_blocks` blocks (as NCCL
//                           runs one CTA per channel)
//   priority   the communication stream created at the least (normal) or greatest (high)
//              priority of cudaDeviceGetStreamPriorityRange
//   compute    a cuBLAS bf16 GEMM (n × n × n) on the whole GPU; with SMs reserved
//              (comm_sms = r > 0), a compute-bound kernel whose occupancy is capped
//              through its shared-memory request (the whole per-block opt-in maximum:
//              one block per SM), launched on sm_count − r blocks, with the copy kernel
//              on r blocks — the resource-aware overlap paper's method (arXiv
//              2606.09200); its time alone is the same total work on every SM (so the
//              SMs given up count in its slowdown). Green contexts
//              (cuGreenCtxCreate, CUDA 13) would partition SMs exactly; they need the
//              driver API, which this backend does not link.
// Work sizes are chosen so that compute and communication alone take about the same
// time; both streams start from one event.
//
// Factors, by inverting the simulator's model (sim/simulator.h: compute runs 1/a as fast
// and communication 1/b while both run): with C, M the times alone and Tc, Tm together,
//   communication ends first (Tm <= Tc):  b = Tm / M,  a = Tm / (C − Tc + Tm)
//   compute ends first:                   a = Tc / C,  b = Tc / (M − Tm + Tc)
// clamped to >= 1, so that the simulator reproduces each measured pair exactly.
// Reported per configuration too: total time against serial (C + M) and against perfect
// overlap (max(C, M)), and the share of the ideal overlap captured, (serial − total) /
// (serial − perfect), the figure arXiv 2412.14335 reports (21%, 42%, 72%).

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/machine.h"

namespace tessel::runtime {

struct OverlapCalibrationOptions {
  double seconds_per_point = 0.05;  // target time of compute alone per measurement
  int gemm_n = 8192;
  std::int64_t copy_bytes = std::int64_t{256} << 20;
  int comm_blocks = 16;  // copy kernel blocks without reservation (NCCL's channels)
  int reserved_sms = 16;
};

struct OverlapPoint {
  std::string mechanism;  // copy_engine | sm_kernels
  std::string priority;   // normal | high
  int comm_sms = 0;
  double compute_alone_s = 0, comm_alone_s = 0;
  double compute_together_s = 0, comm_together_s = 0;
  double compute_slowdown = 1, comm_slowdown = 1;
  double total_s = 0, serial_s = 0, perfect_s = 0;
  double overlap_captured = 0;  // (serial − total) / (serial − perfect)
};

struct OverlapCalibration {
  std::string device_name;
  std::string driver_version;
  int sm_count = 0;
  std::vector<OverlapPoint> points;
};

// The benchmark's two kernels (the SM copy kernel, the capped compute kernel), compiled
// by NVRTC at run time; tests compile them without a GPU.
[[nodiscard]] std::string overlap_kernel_source();

// The factors of one configuration from its four times (the inversion above).
[[nodiscard]] OverlapPoint overlap_point(std::string mechanism, std::string priority, int comm_sms, double compute_alone_s,
                                         double comm_alone_s, double compute_together_s, double comm_together_s);

// Needs a GPU; Error naming what cudaGetDeviceCount found otherwise.
[[nodiscard]] OverlapCalibration calibrate_cuda_overlap(const OverlapCalibrationOptions& options);
// The measured interference rows (measured: true), every one naming its source.
[[nodiscard]] Interference interference_from_overlap(const OverlapCalibration& c, const std::string& date);
[[nodiscard]] nlohmann::json to_json(const OverlapCalibration& c);

}  // namespace tessel::runtime
