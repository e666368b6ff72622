#pragma once
// The interface between the `tessel` CLI and its CUDA backend module. The backend
// (runtime/cuda/ with cuBLAS, NVRTC and NCCL) is built as a shared module,
// libtessel_cuda.so beside the `tessel` binary, that the CLI loads with dlopen the first
// time a CUDA path runs (`--backend cuda`, `calibrate --backend cuda`). The CLI
// therefore does not map cuBLAS (about 150 MB resident once loaded) or NVRTC for the
// commands that do not use them, and starts on machines without the CUDA libraries.
//
// The module defines no copy of core/ or runtime/: it takes them from the `tessel`
// binary, which exports its symbols (ENABLE_EXPORTS) and links those two libraries
// whole. Both are built by the same build from the same sources, and kCudaModuleAbi
// guards against a module left over from another build of a different interface.

#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/graph.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "runtime/cpu_executor.h"  // runtime::Policy
#include "runtime/executor.h"

namespace tessel::cli {

struct CudaCliOptions;

inline constexpr int kCudaModuleAbi = 2;

// The module's entry points: backend.h's functions of the same name.
struct CudaModuleApi {
  int abi = kCudaModuleAbi;
  std::unique_ptr<runtime::Executor> (*make_executor)(runtime::Policy policy, const CudaCliOptions& o) = nullptr;
  nlohmann::json (*calibrate)(int devices, int gpus, double seconds_per_point, Machine* machine) = nullptr;
  nlohmann::json (*calibrate_overlap)(double seconds_per_point, Machine* machine) = nullptr;
  runtime::KernelProfile (*profile_kernels)(runtime::Executor& exec, const Graph& g, const TaskGraph& tg,
                                            const runtime::TensorMap& inputs) = nullptr;
};

}  // namespace tessel::cli

// The module's one exported symbol.
extern "C" const tessel::cli::CudaModuleApi* tessel_cuda_module_api();
inline constexpr const char* kCudaModuleEntry = "tessel_cuda_module_api";
