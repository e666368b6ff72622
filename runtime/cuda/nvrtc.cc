#include "runtime/cuda/nvrtc.h"

#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "runtime/cuda/check.h"

namespace tessel::runtime::cuda {

CompiledKernel compile(const KernelSource& kernel, const std::string& arch) {
  const bool machine_code = arch.starts_with("sm_");
  if (!machine_code && !arch.starts_with("compute_"))
    fail("NVRTC target '", arch, "': expected sm_XY (machine code) or compute_XY (PTX)");
  nvrtcProgram prog = nullptr;
  TESSEL_NVRTC_CHECK(nvrtcCreateProgram(&prog, kernel.source.c_str(), (kernel.name + ".cu").c_str(), 0, nullptr, nullptr));
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  const std::string arch_option = "--gpu-architecture=" + arch;
  // Precise math (no --use_fast_math): the results are checked against the CPU reference.
  const char* options[] = {arch_option.c_str(), "--std=c++17", "--device-as-default-execution-space"};
  const nvrtcResult compiled = nvrtcCompileProgram(prog, 3, options);
  CompiledKernel out;
  out.arch = arch;
  std::size_t log_size = 0;
  TESSEL_NVRTC_CHECK(nvrtcGetProgramLogSize(prog, &log_size));
  if (log_size > 1) {
    out.log.resize(log_size);
    TESSEL_NVRTC_CHECK(nvrtcGetProgramLog(prog, out.log.data()));
    out.log.resize(log_size - 1);
  }
  if (compiled != NVRTC_SUCCESS)
    fail("NVRTC could not compile the generated kernel ", kernel.name, " for ", arch, " (", describe(compiled),
         ")\n--- generated source ---\n", numbered_lines(kernel.source), "--- NVRTC log ---\n", out.log);
  std::size_t size = 0;
  if (machine_code) {
    TESSEL_NVRTC_CHECK(nvrtcGetCUBINSize(prog, &size));
    out.image.resize(size);
    TESSEL_NVRTC_CHECK(nvrtcGetCUBIN(prog, out.image.data()));
  } else {
    TESSEL_NVRTC_CHECK(nvrtcGetPTXSize(prog, &size));
    out.image.resize(size);
    TESSEL_NVRTC_CHECK(nvrtcGetPTX(prog, out.image.data()));
  }
  return out;
}

const CompiledKernel& compile_cached(const KernelSource& kernel, const std::string& arch) {
  static std::mutex mutex;
  static std::map<std::string, CompiledKernel> cache;  // never shrinks: kernels are few and small
  const std::string key = (kernel.key.empty() ? kernel.source : kernel.key) + "@" + arch;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  CompiledKernel compiled = compile(kernel, arch);  // outside the lock: NVRTC takes ~0.1 s
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(key, std::move(compiled)).first->second;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  TESSEL_NVRTC_CHECK(nvrtcVersion(&major, &minor));
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace tessel::runtime::cuda
