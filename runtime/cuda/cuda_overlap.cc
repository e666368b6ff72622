// Compute/communication overlap micro-benchmark (runtime/cuda/cuda_overlap.h). NOT YET
// RUN ON A GPU.
#include "runtime/cuda/cuda_overlap.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/cuda/nvrtc.h"

namespace tessel::runtime {

OverlapPoint overlap_point(std::string mechanism, std::string priority, int comm_sms, double C, double M, double Tc,
                           double Tm) {
  OverlapPoint p;
  p.mechanism = std::move(mechanism);
  p.priority = std::move(priority);
  p.comm_sms = comm_sms;
  p.compute_alone_s = C;
  p.comm_alone_s = M;
  p.compute_together_s = Tc;
  p.comm_together_s = Tm;
  double a = 1, b = 1;
  if (Tm <= Tc) {
    b = Tm / M;
    const double rest = C - Tc + Tm;  // compute work done while communication ran
    a = rest > 0 ? Tm / rest : 1e9;
  } else {
    a = Tc / C;
    const double rest = M - Tm + Tc;
    b = rest > 0 ? Tc / rest : 1e9;
  }
  p.compute_slowdown = std::max(1.0, a);
  p.comm_slowdown = std::max(1.0, b);
  p.total_s = std::max(Tc, Tm);
  p.serial_s = C + M;
  p.perfect_s = std::max(C, M);
  p.overlap_captured = p.serial_s > p.perfect_s ? (p.serial_s - p.total_s) / (p.serial_s - p.perfect_s) : 0.0;
  return p;
}

using cuda::DeviceBuffer;

namespace {

struct Stream {
  cudaStream_t s = nullptr;
  explicit Stream(int priority) { TESSEL_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority)); }
  ~Stream() { cudaStreamDestroy(s); }
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { TESSEL_CUDA_CHECK(cudaEventCreate(&e)); }
  ~Event() { cudaEventDestroy(e); }
};

const char* const kKernels = R"(
extern "C" __global__ void tessel_sm_copy(const int4* __restrict__ src, int4* __restrict__ dst, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = src[i];
}
// Compute-bound; its dynamic shared memory request (the launch's) caps it at one block per SM.
extern "C" __global__ void tessel_capped_compute(float* out, int iters) {
  extern __shared__ float pad[];
  float a = threadIdx.x * 1e-3f, b = 1.0000001f, c = 0.5f, d = 0.9999999f;
  for (int i = 0; i < iters; ++i) {
    a = fmaf(a, b, c);
    c = fmaf(c, d, a);
    a = fmaf(a, d, -c);
    c = fmaf(c, b, 1e-7f);
  }
  if (threadIdx.x == 0) pad[0] = a;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + c + pad[0];
}
)";

double elapsed_s(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  TESSEL_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms * 1e-3;
}

double median3(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::string overlap_kernel_source() { return kKernels; }

OverlapCalibration calibrate_cuda_overlap(const OverlapCalibrationOptions& o) {
  const std::vector<CudaDeviceInfo> gpus = cuda_devices();  // Error without a GPU
  const CudaDeviceInfo& gpu = gpus.front();
  OverlapCalibration c;
  c.device_name = gpu.name;
  c.driver_version = cuda_driver_version();
  c.sm_count = gpu.sm_count;
  if (o.reserved_sms <= 0 || o.reserved_sms >= gpu.sm_count)
    fail("calibrate --overlap: ", o.reserved_sms, " reserved SMs do not fit the GPU's ", gpu.sm_count);
  TESSEL_CUDA_CHECK(cudaSetDevice(0));
  int least = 0, greatest = 0;
  TESSEL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  Stream compute(least), comm_normal(least), comm_high(greatest);

  cublasHandle_t blas = nullptr;
  TESSEL_CUBLAS_CHECK(cublasCreate(&blas));
  struct BlasGuard {
    cublasHandle_t h;
    ~BlasGuard() { cublasDestroy(h); }
  } blas_guard{blas};
  TESSEL_CUBLAS_CHECK(cublasSetStream(blas, compute.s));
  const std::size_t n = static_cast<std::size_t>(o.gemm_n);
  DeviceBuffer A(n * n * 2), B(n * n * 2), Cm(n * n * 2), workspace(32u << 20);
  TESSEL_CUBLAS_CHECK(cublasSetWorkspace(blas, workspace.p, 32u << 20));
  TESSEL_CUDA_CHECK(cudaMemset(A.p, 0x3c, n * n * 2));  // bf16 ≈ 0.0115: non-zero data
  TESSEL_CUDA_CHECK(cudaMemset(B.p, 0x3c, n * n * 2));
  const auto copy_bytes = static_cast<std::size_t>(o.copy_bytes);
  DeviceBuffer src(copy_bytes), dst(copy_bytes);
  TESSEL_CUDA_CHECK(cudaMemset(src.p, 1, copy_bytes));

  cuda::KernelSource ks;
  ks.name = "tessel_overlap";
  ks.key = "overlap-kernels";
  ks.source = overlap_kernel_source();
  const cuda::CompiledKernel k = cuda::compile(ks, "sm_" + std::to_string(gpu.major * 10 + gpu.minor));
  cudaLibrary_t lib = nullptr;
  TESSEL_CUDA_CHECK(cudaLibraryLoadData(&lib, k.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  struct Unload {
    cudaLibrary_t l;
    ~Unload() { cudaLibraryUnload(l); }
  } unload{lib};
  cudaKernel_t sm_copy = nullptr, capped = nullptr;
  TESSEL_CUDA_CHECK(cudaLibraryGetKernel(&sm_copy, lib, "tessel_sm_copy"));
  TESSEL_CUDA_CHECK(cudaLibraryGetKernel(&capped, lib, "tessel_capped_compute"));
  int smem_optin = 0;
  TESSEL_CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  TESSEL_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(capped),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem_optin));
  DeviceBuffer out(static_cast<std::size_t>(gpu.sm_count) * 1024 * 4);

  const float one = 1, zero = 0;
  auto gemm = [&](int count) {
    for (int i = 0; i < count; ++i)
      TESSEL_CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, o.gemm_n, o.gemm_n, o.gemm_n, &one, B.p,
                                       CUDA_R_16BF, o.gemm_n, A.p, CUDA_R_16BF, o.gemm_n, &zero, Cm.p, CUDA_R_16BF,
                                       o.gemm_n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  // Iterations per block: the same total work on however many blocks (one per SM) run it.
  auto capped_compute = [&](int blocks, int count) {
    int iters = static_cast<int>((std::int64_t{1} << 16) * gpu.sm_count / blocks);
    void* args[] = {&out.p, &iters};
    for (int i = 0; i < count; ++i)
      TESSEL_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(capped), dim3(blocks), dim3(1024), args,
                                         static_cast<std::size_t>(smem_optin), compute.s));
  };
  auto ce_copy = [&](cudaStream_t s, int count) {
    for (int i = 0; i < count; ++i)
      TESSEL_CUDA_CHECK(cudaMemcpyAsync(dst.p, src.p, copy_bytes, cudaMemcpyDeviceToDevice, s));
  };
  long long vectors = static_cast<long long>(copy_bytes / 16);
  auto sm_copy_kernel = [&](cudaStream_t s, int blocks, int count) {
    void* args[] = {&src.p, &dst.p, &vectors};
    for (int i = 0; i < count; ++i)
      TESSEL_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(sm_copy), dim3(blocks), dim3(512), args, 0, s));
  };

  // Seconds of `work` alone on `s` (median of 3, after a warm-up).
  auto alone = [&](cudaStream_t s, const std::function<void()>& work) {
    Event a, b;
    work();
    std::vector<double> t;
    for (int r = 0; r < 3; ++r) {
      TESSEL_CUDA_CHECK(cudaEventRecord(a.e, s));
      work();
      TESSEL_CUDA_CHECK(cudaEventRecord(b.e, s));
      TESSEL_CUDA_CHECK(cudaEventSynchronize(b.e));
      t.push_back(elapsed_s(a.e, b.e));
    }
    return median3(t);
  };
  // Both from one start event: {compute seconds, communication seconds}, medians of 3.
  auto together = [&](cudaStream_t cs, const std::function<void()>& cwork, const std::function<void()>& mwork) {
    Event start, ce, me;
    std::vector<double> tc, tm;
    for (int r = 0; r < 3; ++r) {
      TESSEL_CUDA_CHECK(cudaDeviceSynchronize());
      TESSEL_CUDA_CHECK(cudaEventRecord(start.e, compute.s));
      TESSEL_CUDA_CHECK(cudaStreamWaitEvent(cs, start.e, 0));
      cwork();
      mwork();
      TESSEL_CUDA_CHECK(cudaEventRecord(ce.e, compute.s));
      TESSEL_CUDA_CHECK(cudaEventRecord(me.e, cs));
      TESSEL_CUDA_CHECK(cudaEventSynchronize(ce.e));
      TESSEL_CUDA_CHECK(cudaEventSynchronize(me.e));
      tc.push_back(elapsed_s(start.e, ce.e));
      tm.push_back(elapsed_s(start.e, me.e));
    }
    return std::pair{median3(tc), median3(tm)};
  };
  // Repetitions so that one side alone takes about `target` seconds.
  auto reps = [](double one, double target) { return static_cast<int>(std::clamp(target / std::max(one, 1e-7), 1.0, 100000.0)); };
  const double target = std::max(0.005, o.seconds_per_point);

  // Whole-GPU rows: cuBLAS against copy engines and copy kernels.
  const int g = reps(alone(compute.s, [&] { gemm(1); }), target);
  const double C = alone(compute.s, [&] { gemm(g); });
  for (const char* mech : {"copy_engine", "sm_kernels"}) {
    const bool ce = std::string(mech) == "copy_engine";
    for (const char* prio : {"normal", "high"}) {
      cudaStream_t cs = std::string(prio) == "high" ? comm_high.s : comm_normal.s;
      auto one_comm = [&](int count) { ce ? ce_copy(cs, count) : sm_copy_kernel(cs, o.comm_blocks, count); };
      const int m = reps(alone(cs, [&] { one_comm(1); }), C);
      const double M = alone(cs, [&] { one_comm(m); });
      const auto [tc, tm] = together(cs, [&] { gemm(g); }, [&] { one_comm(m); });
      c.points.push_back(overlap_point(mech, prio, 0, C, M, tc, tm));
    }
  }
  // Reserved SMs: the capped compute kernel on sm_count − r SMs, the copy kernel on r. The
  // compute kernel does the same total work as alone on every SM (each of its blocks
  // iterates sm_count / (sm_count − r) times as long), so its slowdown counts the SMs given
  // up as well as the interference.
  {
    const int r = o.reserved_sms, sms = gpu.sm_count;
    const int reps_c = reps(alone(compute.s, [&] { capped_compute(sms, 1); }), target);
    const double Cfull = alone(compute.s, [&] { capped_compute(sms, reps_c); });
    for (const char* prio : {"normal", "high"}) {
      cudaStream_t cs = std::string(prio) == "high" ? comm_high.s : comm_normal.s;
      const int m = reps(alone(cs, [&] { sm_copy_kernel(cs, r, 1); }), Cfull);
      const double M = alone(cs, [&] { sm_copy_kernel(cs, r, m); });
      const auto [tc, tm] = together(cs, [&] { capped_compute(sms - r, reps_c); }, [&] { sm_copy_kernel(cs, r, m); });
      c.points.push_back(overlap_point("sm_kernels", prio, r, Cfull, M, tc, tm));
    }
  }
  TESSEL_CUDA_CHECK(cudaDeviceSynchronize());
  return c;
}

Interference interference_from_overlap(const OverlapCalibration& c, const std::string& date) {
  Interference f;
  f.measured = true;
  const std::string source = "measured: tessel calibrate --backend cuda --overlap on " + c.device_name + " (" + date + ")";
  for (const OverlapPoint& p : c.points) {
    const SlowdownFactors row{p.compute_slowdown, p.comm_slowdown, source};
    const bool high = p.priority == "high";
    if (p.comm_sms > 0) {
      f.reserved.push_back({high ? CommPriority::high : CommPriority::normal, p.comm_sms, row});
    } else if (p.mechanism == "copy_engine") {
      (high ? f.copy_engine_high : f.copy_engine_normal) = row;
    } else {
      (high ? f.high : f.normal) = row;
    }
  }
  return f;
}

nlohmann::json to_json(const OverlapCalibration& c) {
  nlohmann::json pts = nlohmann::json::array();
  for (const OverlapPoint& p : c.points)
    pts.push_back({{"comm_mechanism", p.mechanism},
                   {"comm_priority", p.priority},
                   {"comm_sms", p.comm_sms},
                   {"compute_alone_s", p.compute_alone_s},
                   {"comm_alone_s", p.comm_alone_s},
                   {"compute_together_s", p.compute_together_s},
                   {"comm_together_s", p.comm_together_s},
                   {"compute_slowdown", p.compute_slowdown},
                   {"comm_slowdown", p.comm_slowdown},
                   {"total_s", p.total_s},
                   {"serial_s", p.serial_s},
                   {"perfect_overlap_s", p.perfect_s},
                   {"overlap_captured", p.overlap_captured}});
  return {{"device_name", c.device_name}, {"driver_version", c.driver_version}, {"sm_count", c.sm_count}, {"points", pts}};
}

}  // namespace tessel::runtime
