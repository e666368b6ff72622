// The CUDA backend module, libtessel_cuda.so (experiments/cuda_module.h): the CLI's CUDA
// entry points over runtime/cuda/, loaded by the `tessel` binary only when a CUDA path
// runs (experiments/commands_cuda.cc).
#include "experiments/cuda_module.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "experiments/backend.h"
#include "experiments/cli.h"
#include "runtime/cuda/cuda_calibrate.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/cuda/cuda_overlap.h"

namespace tessel::cli {
namespace {

std::unique_ptr<runtime::Executor> module_make_executor(runtime::Policy policy, const CudaCliOptions& o) {
  runtime::CudaOptions c;
  c.policy = policy;
  c.gpus = o.gpus;
  c.moves = runtime::parse_move_method(o.moves);
  c.launch = runtime::parse_launch_mode(o.launch);
  c.unmarked_run = o.unmarked;
  c.comm_priority = o.comm_priority.empty() ? CommPriority::normal : runtime::parse_comm_priority(o.comm_priority);
  c.tf32 = o.tf32;
  return std::make_unique<runtime::CudaExecutor>(c);
}

nlohmann::json module_calibrate(int devices, int gpus, double seconds_per_point, Machine* machine) {
  std::fprintf(stderr, "calibrating the CUDA backend: %d device%s...\n", devices, devices == 1 ? "" : "s");
  runtime::CudaCalibration c = runtime::calibrate_cuda({devices, gpus, seconds_per_point});
  *machine = runtime::machine_from_cuda_calibration(c);
  std::fprintf(stderr,
               "  %s (sm %s, driver %s): bf16 GEMM peak %s, f32 %s, HBM %s/s, same-GPU copy %s/s, launch %s, "
               "%s per task as one graph (%s issued to streams), one task start per %s on a GPU (%s issued to "
               "streams, %s per task without marks)%s\n",
               c.device_name.c_str(), c.compute_capability.c_str(), c.driver_version.c_str(),
               human_count(c.peak_bf16_flops_per_s, "flop/s").c_str(), human_count(c.peak_f32_flops_per_s, "flop/s").c_str(),
               human_bytes(c.memory_bytes_per_s).c_str(), human_bytes(c.same_gpu_copy_bytes_per_s).c_str(),
               human_seconds(c.launch_latency_s).c_str(), human_seconds(c.task_overhead_s).c_str(),
               human_seconds(c.task_overhead_stream_s).c_str(), human_seconds(c.dispatch_interval_s).c_str(),
               human_seconds(c.dispatch_interval_stream_s).c_str(), human_seconds(c.dispatch_interval_unmarked_s).c_str(),
               c.devices > c.gpus ? " (virtual devices: each with its GPU's rates, sharing it in the simulator)" : "");
  return runtime::to_json(c);
}

nlohmann::json module_calibrate_overlap(double seconds_per_point, Machine* machine) {
  std::fprintf(stderr, "measuring compute/communication overlap (GEMM stream + communication stream)...\n");
  runtime::OverlapCalibrationOptions o;
  o.seconds_per_point = std::max(0.02, seconds_per_point);
  const runtime::OverlapCalibration c = runtime::calibrate_cuda_overlap(o);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  const Interference measured = runtime::interference_from_overlap(c, date);
  machine->interference.measured = measured.measured;
  machine->interference.normal = measured.normal;
  machine->interference.high = measured.high;
  machine->interference.copy_engine_normal = measured.copy_engine_normal;
  machine->interference.copy_engine_high = measured.copy_engine_high;
  machine->interference.reserved = measured.reserved;
  for (const runtime::OverlapPoint& p : c.points)
    std::fprintf(stderr,
                 "  %-11s %-6s %3d SMs reserved: compute x%.3f, comm x%.3f while both run; total %s against serial %s "
                 "and perfect overlap %s (%.0f%% of the ideal overlap captured)\n",
                 p.mechanism.c_str(), p.priority.c_str(), p.comm_sms, p.compute_slowdown, p.comm_slowdown,
                 human_seconds(p.total_s).c_str(), human_seconds(p.serial_s).c_str(), human_seconds(p.perfect_s).c_str(),
                 100 * p.overlap_captured);
  return runtime::to_json(c);
}

runtime::KernelProfile module_profile_kernels(runtime::Executor& exec, const Graph& g, const TaskGraph& tg,
                                         const runtime::TensorMap& inputs) {
  auto* cuda = dynamic_cast<runtime::CudaExecutor*>(&exec);
  if (!cuda) fail("profile_cuda_kernels: not a CUDA executor");
  return cuda->profile_kernels(g, tg, inputs);
}

}  // namespace
}  // namespace tessel::cli

extern "C" __attribute__((visibility("default"))) const tessel::cli::CudaModuleApi* tessel_cuda_module_api() {
  using namespace tessel::cli;
  static const CudaModuleApi api = [] {
    CudaModuleApi a;
    a.make_executor = module_make_executor;
    a.calibrate = module_calibrate;
    a.calibrate_overlap = module_calibrate_overlap;
    a.profile_kernels = module_profile_kernels;
    return a;
  }();
  return &api;
}
