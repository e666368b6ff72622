#pragma once
// Every CUDA runtime, cuBLAS, NVRTC and NCCL call of the CUDA backend goes through one of
// these macros: a failure throws tessel::Error naming the call, the file and the line,
// and the library's own name and description of the status, e.g.
//   CUDA call cudaMalloc(&p, bytes) failed at runtime/cuda/cuda_executor.cc:412:
//   cudaErrorMemoryAllocation (out of memory)

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstddef>
#include <string>

namespace tessel::runtime::cuda {

// The message of a failed call (the checks throw Error with it).
[[nodiscard]] std::string failure_message(const char* library, const char* call, const char* file, int line,
                                          const std::string& status);
[[nodiscard]] std::string describe(cudaError_t e);
[[nodiscard]] std::string describe(cublasStatus_t s);
[[nodiscard]] std::string describe(nvrtcResult r);
[[nodiscard]] std::string describe(ncclResult_t r);

void check(cudaError_t e, const char* call, const char* file, int line);
void check(cublasStatus_t s, const char* call, const char* file, int line);
void check(nvrtcResult r, const char* call, const char* file, int line);
void check(ncclResult_t r, const char* call, const char* file, int line);

}  // namespace tessel::runtime::cuda

#define TESSEL_CUDA_CHECK(call) ::tessel::runtime::cuda::check((call), #call, __FILE__, __LINE__)
#define TESSEL_CUBLAS_CHECK(call) ::tessel::runtime::cuda::check((call), #call, __FILE__, __LINE__)
#define TESSEL_NVRTC_CHECK(call) ::tessel::runtime::cuda::check((call), #call, __FILE__, __LINE__)
#define TESSEL_NCCL_CHECK(call) ::tessel::runtime::cuda::check((call), #call, __FILE__, __LINE__)

namespace tessel::runtime::cuda {

// Device memory (at least 256 bytes) freed however the measuring code that owns it ends:
// the calibration and the overlap benchmark allocate their scratch buffers through it.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { TESSEL_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 256))); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace tessel::runtime::cuda
