// The CUDA backend's part of the CLI (see backend.h): compiled into every build, with the
// CUDA calls only where the backend was built.
#include "experiments/backend.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "experiments/cli.h"

#ifdef TESSEL_HAVE_CUDA
#include "runtime/cuda/cuda_calibrate.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/cuda/cuda_overlap.h"
#endif

#include <ctime>

namespace tessel::cli {

void CudaCliOptions::add(CLI::App& app) {
  app.add_option("--gpus", gpus,
                 "--backend cuda: physical GPUs to spread the devices over (default: every visible one, at most -d); "
                 "fewer GPUs than devices runs several virtual devices on one GPU, sharing its SMs and memory "
                 "bandwidth")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--moves", moves, "--backend cuda: copy (cudaMemcpyPeerAsync / device-to-device) or nccl (send/recv)")
      ->capture_default_str()
      ->check(CLI::IsMember({"copy", "nccl"}));
  app.add_option("--comm-priority", comm_priority,
                 "priority of the communication stream: normal (default) or high; --backend cuda creates the moves' "
                 "stream with it, and compare also simulates with it (the machine's interference.comm_priority)")
      ->check(CLI::IsMember({"normal", "high"}));
  app.add_flag("--tf32", tf32, "--backend cuda: f32 contractions on tensor cores (TF32)");
}

#ifdef TESSEL_HAVE_CUDA

bool cuda_backend_built() { return true; }

std::unique_ptr<runtime::Executor> make_cuda_executor(runtime::Policy policy, const CudaCliOptions& o) {
  runtime::CudaOptions c;
  c.policy = policy;
  c.gpus = o.gpus;
  c.moves = runtime::parse_move_method(o.moves);
  c.comm_priority = o.comm_priority.empty() ? CommPriority::normal : runtime::parse_comm_priority(o.comm_priority);
  c.tf32 = o.tf32;
  return std::make_unique<runtime::CudaExecutor>(c);
}

nlohmann::json calibrate_cuda_backend(int devices, int gpus, double seconds_per_point, Machine* machine) {
  std::fprintf(stderr, "calibrating the CUDA backend: %d device%s...\n", devices, devices == 1 ? "" : "s");
  runtime::CudaCalibration c = runtime::calibrate_cuda({devices, gpus, seconds_per_point});
  *machine = runtime::machine_from_cuda_calibration(c);
  std::fprintf(stderr,
               "  %s (sm %s, driver %s): bf16 GEMM peak %s, f32 %s, HBM %s/s, same-GPU copy %s/s, launch %s, "
               "%s per task%s\n",
               c.device_name.c_str(), c.compute_capability.c_str(), c.driver_version.c_str(),
               human_count(c.peak_bf16_flops_per_s, "flop/s").c_str(), human_count(c.peak_f32_flops_per_s, "flop/s").c_str(),
               human_bytes(c.memory_bytes_per_s).c_str(), human_bytes(c.same_gpu_copy_bytes_per_s).c_str(),
               human_seconds(c.launch_latency_s).c_str(), human_seconds(c.task_overhead_s).c_str(),
               c.devices > c.gpus ? " (virtual devices: each described as an equal share of its GPU)" : "");
  return runtime::to_json(c);
}

nlohmann::json calibrate_cuda_overlap_backend(double seconds_per_point, Machine* machine) {
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

std::vector<double> profile_cuda_kernels(runtime::Executor& exec, const Graph& g, const TaskGraph& tg,
                                         const runtime::TensorMap& inputs) {
  auto* cuda = dynamic_cast<runtime::CudaExecutor*>(&exec);
  if (!cuda) fail("profile_cuda_kernels: not a CUDA executor");
  return cuda->profile_kernels(g, tg, inputs);
}

#else

namespace {
[[noreturn]] void no_cuda_build(const char* what) {
  fail(what, ": this build has no CUDA backend (configured without the CUDA toolkit, cuBLAS or NCCL found, or with "
             "-DTESSEL_CUDA=OFF)");
}
}  // namespace

bool cuda_backend_built() { return false; }

std::unique_ptr<runtime::Executor> make_cuda_executor(runtime::Policy, const CudaCliOptions&) {
  no_cuda_build("--backend cuda");
}

nlohmann::json calibrate_cuda_backend(int, int, double, Machine*) { no_cuda_build("calibrate --backend cuda"); }

nlohmann::json calibrate_cuda_overlap_backend(double, Machine*) { no_cuda_build("calibrate --backend cuda --overlap"); }

std::vector<double> profile_cuda_kernels(runtime::Executor&, const Graph&, const TaskGraph&, const runtime::TensorMap&) {
  no_cuda_build("compare --backend cuda");
}

#endif

}  // namespace tessel::cli
