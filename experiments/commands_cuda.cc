// The CUDA backend's part of the CLI (see backend.h): compiled into every build. Where the
// backend was built, its calls go to the CUDA backend module that this file loads on first
// use (experiments/cuda_module.h), so that the CLI neither maps cuBLAS and NVRTC nor needs
// them installed until a CUDA path runs.
#include "experiments/backend.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "experiments/cli.h"

#ifdef TESSEL_HAVE_CUDA
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

#include "experiments/cuda_module.h"
#endif

namespace tessel::cli {

void CudaCliOptions::add(CLI::App& app) {
  app.add_option("--gpus", gpus,
                 "--backend cuda: physical GPUs to spread the devices over (default: every visible one, at most -d); "
                 "fewer GPUs than devices runs several virtual devices on one GPU, sharing its SMs and memory "
                 "bandwidth")
      ->check(non_negative_number());
  app.add_option("--moves", moves, "--backend cuda: copy (cudaMemcpyPeerAsync / device-to-device) or nccl (send/recv)")
      ->capture_default_str()
      ->check(CLI::IsMember({"copy", "nccl"}));
  app.add_option("--launch", launch,
                 "--backend cuda: graph (default: the run's tasks captured into one CUDA graph before the clock, "
                 "launched at once: the GPU's time) or stream (each task issued to its stream while the clock runs: "
                 "on small kernels the host's issue rate is timed too)")
      ->capture_default_str()
      ->check(CLI::IsMember({"graph", "stream"}));
  app.add_flag("--unmarked", unmarked,
               "--backend cuda --launch graph: also run each graph once without its per-task timing events and time "
               "it whole (run: graph_unmarked_s; compare: measured_unmarked_s), to see what the marks cost (not yet "
               "run on a GPU)");
  app.add_option("--comm-priority", comm_priority,
                 "priority of the communication stream: normal (default) or high; --backend cuda creates the moves' "
                 "stream with it, and compare also simulates with it (the machine's interference.comm_priority); "
                 "run and einsum refuse it with any other backend")
      ->check(CLI::IsMember({"normal", "high"}));
  app.add_flag("--tf32", tf32, "--backend cuda: f32 contractions on tensor cores (TF32)");
}

void CudaCliOptions::check_backend(const CLI::App& cmd, const std::string& backend) {
  if (backend == "cuda") return;
  for (const char* name : {"--gpus", "--moves", "--launch", "--unmarked", "--tf32"})
    if (cmd.count(name) > 0) fail(name, " applies to --backend cuda; the ", backend, " backend does not use it");
  if (cmd.count("--comm-priority") > 0)
    fail("--comm-priority applies to --backend cuda (the priority of its communication stream); the ", backend,
         " backend has no such stream, so it would change nothing (simulate and compare take --comm-priority for "
         "the simulated stream)");
}

#ifdef TESSEL_HAVE_CUDA

namespace {

// The directory of the running binary (libtessel_cuda.so is built beside it).
std::string binary_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

// The CUDA backend module, loaded on first use (experiments/cuda_module.h); Error when it
// cannot be loaded (missing, or the CUDA libraries it needs are not installed).
const CudaModuleApi& cuda_module(const char* what) {
  static std::mutex mu;
  static const CudaModuleApi* api = nullptr;
  const std::lock_guard<std::mutex> lock(mu);
  if (api) return *api;
  std::string path;
  if (const char* env = std::getenv("TESSEL_CUDA_MODULE"); env && *env) {
    path = env;
  } else {
    path = binary_dir() + "/libtessel_cuda.so";
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    fail(what, ": cannot load the CUDA backend module ", path, ": ", dlerror(),
         " (it is built beside the tessel binary; the CUDA runtime libraries, cuBLAS, NVRTC and NCCL, must be "
         "installed)");
  using Entry = const CudaModuleApi* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaModuleEntry));
  if (!entry) fail(what, ": ", path, " is not a tessel CUDA backend module (no ", kCudaModuleEntry, ")");
  const CudaModuleApi* a = entry();
  if (!a || a->abi != kCudaModuleAbi)
    fail(what, ": ", path, " was built from another version of tessel (module interface ", a ? a->abi : -1,
         ", expected ", kCudaModuleAbi, "): rebuild it");
  api = a;  // the module stays loaded until the process ends
  return *api;
}

}  // namespace

bool cuda_backend_built() { return true; }

std::unique_ptr<runtime::Executor> make_cuda_executor(runtime::Policy policy, const CudaCliOptions& o) {
  return cuda_module("--backend cuda").make_executor(policy, o);
}

nlohmann::json calibrate_cuda_backend(int devices, int gpus, double seconds_per_point, Machine* machine) {
  return cuda_module("calibrate --backend cuda").calibrate(devices, gpus, seconds_per_point, machine);
}

nlohmann::json calibrate_cuda_overlap_backend(double seconds_per_point, Machine* machine) {
  return cuda_module("calibrate --backend cuda --overlap").calibrate_overlap(seconds_per_point, machine);
}

runtime::KernelProfile profile_cuda_kernels(runtime::Executor& exec, const Graph& g, const TaskGraph& tg,
                                         const runtime::TensorMap& inputs) {
  return cuda_module("compare --backend cuda").profile_kernels(exec, g, tg, inputs);
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

runtime::KernelProfile profile_cuda_kernels(runtime::Executor&, const Graph&, const TaskGraph&, const runtime::TensorMap&) {
  no_cuda_build("compare --backend cuda");
}

#endif

}  // namespace tessel::cli
