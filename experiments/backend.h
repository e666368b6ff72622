#pragma once
// Executors by backend name for the CLI (run, einsum, compare, calibrate), and the CUDA
// backend's options. `--backend cuda` works in a build with the CUDA backend
// (TESSEL_HAVE_CUDA) on a machine with a GPU; elsewhere it is a user error that says
// which of the two is missing.

#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

#include "core/machine.h"
#include "runtime/cpu_executor.h"
#include "runtime/executor.h"

namespace tessel::cli {

// --gpus, --moves, --comm-priority, --tf32 (ignored by the other backends).
struct CudaCliOptions {
  int gpus = 0;
  std::string moves = "copy";
  std::string comm_priority;  // empty: normal (compare: and the machine's for the simulation)
  bool tf32 = false;
  void add(CLI::App& app);
};

// True when this build has the CUDA backend.
[[nodiscard]] bool cuda_backend_built();

// A CUDA executor; Error when the build has no CUDA backend or no GPU is usable.
[[nodiscard]] std::unique_ptr<runtime::Executor> make_cuda_executor(runtime::Policy policy, const CudaCliOptions& o);

// `tessel calibrate --backend cuda`: measures, returns the calibration as JSON and the
// machine to write.
[[nodiscard]] nlohmann::json calibrate_cuda_backend(int devices, int gpus, double seconds_per_point, Machine* machine);
// `tessel calibrate --backend cuda --overlap`: the overlap micro-benchmark
// (runtime/cuda/cuda_overlap.h); sets machine->interference to the measured rows and
// returns the measurements as JSON.
[[nodiscard]] nlohmann::json calibrate_cuda_overlap_backend(double seconds_per_point, Machine* machine);

// Per task of `tg`: seconds per call of its compute kernel on the GPU (-1 for other
// tasks), for compare's profiled compute model; `exec` must be a CUDA executor.
[[nodiscard]] std::vector<double> profile_cuda_kernels(runtime::Executor& exec, const Graph& g, const TaskGraph& tg,
                                                       const runtime::TensorMap& inputs);

}  // namespace tessel::cli
