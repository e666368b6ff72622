#pragma once
// Run-time compilation of generated kernels (runtime/cuda_codegen.h) with NVRTC. Needs
// no GPU: the target architecture is named, not read off a device.

#include <string>
#include <vector>

#include "runtime/cuda_codegen.h"

namespace tessel::runtime::cuda {

struct CompiledKernel {
  std::string arch;         // "sm_90" (machine code, a cubin) or "compute_90" (PTX)
  std::vector<char> image;  // the cubin, or the PTX text with its terminating NUL
  std::string log;          // the compiler's log (warnings), may be empty
};

// Compiles `kernel.source` for `arch`. A compilation error throws tessel::Error holding
// the kernel's name, the generated source with line numbers and NVRTC's log.
[[nodiscard]] CompiledKernel compile(const KernelSource& kernel, const std::string& arch);

// The same, memoised for the process by (kernel.key, arch): a pure function of its
// arguments, so that executors created one after another (compare makes one per row)
// compile each generated kernel once. Thread-safe.
[[nodiscard]] const CompiledKernel& compile_cached(const KernelSource& kernel, const std::string& arch);

// NVRTC's version, "13.0".
[[nodiscard]] std::string nvrtc_version();

}  // namespace tessel::runtime::cuda
