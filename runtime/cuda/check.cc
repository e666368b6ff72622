#include "runtime/cuda/check.h"

#include "core/error.h"

namespace tessel::runtime::cuda {

std::string failure_message(const char* library, const char* call, const char* file, int line,
                            const std::string& status) {
  return std::string(library) + " call " + call + " failed at " + file + ":" + std::to_string(line) + ": " + status;
}

std::string describe(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}
std::string describe(cublasStatus_t s) {
  return std::string(cublasGetStatusName(s)) + " (" + cublasGetStatusString(s) + ")";
}
std::string describe(nvrtcResult r) { return nvrtcGetErrorString(r); }
std::string describe(ncclResult_t r) { return std::string("NCCL result ") + std::to_string(static_cast<int>(r)) + " (" + ncclGetErrorString(r) + ")"; }

void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) throw Error(failure_message("CUDA", call, file, line, describe(e)));
}
void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(failure_message("cuBLAS", call, file, line, describe(s)));
}
void check(nvrtcResult r, const char* call, const char* file, int line) {
  if (r != NVRTC_SUCCESS) throw Error(failure_message("NVRTC", call, file, line, describe(r)));
}
void check(ncclResult_t r, const char* call, const char* file, int line) {
  if (r != ncclSuccess) throw Error(failure_message("NCCL", call, file, line, describe(r)));
}

}  // namespace tessel::runtime::cuda
