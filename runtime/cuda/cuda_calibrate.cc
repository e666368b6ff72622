#include "runtime/cuda/cuda_calibrate.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/partition.h"
#include "core/stats.h"
#include "core/task_graph.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/measure.h"

namespace tessel::runtime {
using cuda::DeviceBuffer;

namespace {

struct Events {
  cudaEvent_t a = nullptr, b = nullptr;
  Events() {
    TESSEL_CUDA_CHECK(cudaEventCreate(&a));
    TESSEL_CUDA_CHECK(cudaEventCreate(&b));
  }
  ~Events() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
};

// Seconds per call of `body` on `stream`: one warm-up call, a single timed call to size
// the batches, then three batches of at least `min_seconds`/3 each; the median batch.
double per_call_seconds(cudaStream_t stream, double min_seconds, const std::function<void()>& body) {
  Events ev;
  body();
  TESSEL_CUDA_CHECK(cudaEventRecord(ev.a, stream));
  body();
  TESSEL_CUDA_CHECK(cudaEventRecord(ev.b, stream));
  TESSEL_CUDA_CHECK(cudaEventSynchronize(ev.b));
  float ms = 0;
  TESSEL_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.a, ev.b));
  const double one = std::max(1e-7, ms * 1e-3);
  const int calls = static_cast<int>(std::clamp(min_seconds / 3 / one, 1.0, 10000.0));
  std::vector<double> batches;
  for (int b = 0; b < 3; ++b) {
    TESSEL_CUDA_CHECK(cudaEventRecord(ev.a, stream));
    for (int c = 0; c < calls; ++c) body();
    TESSEL_CUDA_CHECK(cudaEventRecord(ev.b, stream));
    TESSEL_CUDA_CHECK(cudaEventSynchronize(ev.b));
    TESSEL_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.a, ev.b));
    batches.push_back(ms * 1e-3 / calls);
  }
  std::sort(batches.begin(), batches.end());
  return batches[1];
}

// Uniform values in [-1, 1) in `dtype`, copied to `dst` (never zeros: a GEMM on zeros
// runs faster than on real data).
void fill_random(void* dst, std::int64_t count, DType dtype, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t eb = static_cast<std::size_t>(dtype_bytes(dtype));
  std::vector<unsigned char> host(static_cast<std::size_t>(count) * eb);
  for (std::int64_t i = 0; i < count; ++i) {
    const double v = static_cast<double>(rng() >> 11) * 0x1.0p-52 - 1.0;
    unsigned char* p = host.data() + static_cast<std::size_t>(i) * eb;
    switch (dtype) {
      case DType::f16: {
        __half h = __float2half_rn(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::bf16: {
        __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::f32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::f64: std::memcpy(p, &v, 8); break;
    }
  }
  TESSEL_CUDA_CHECK(cudaMemcpy(dst, host.data(), host.size(), cudaMemcpyHostToDevice));
}

struct GemmCase {
  const char* name;
  DType storage;
  cudaDataType_t type;
  cublasComputeType_t compute;
};

}  // namespace

namespace {
void measure_dispatch(CudaCalibration& c);
}  // namespace

CudaCalibration calibrate_cuda(const CudaCalibrationOptions& o) {
  const std::vector<CudaDeviceInfo> gpus = cuda_devices();
  if (o.devices < 1) fail("calibrate --backend cuda: -d must be at least 1");
  CudaCalibration c;
  c.devices = o.devices;
  c.gpus = std::min(o.gpus > 0 ? o.gpus : static_cast<int>(gpus.size()), o.devices);
  if (c.gpus > static_cast<int>(gpus.size()))
    fail("calibrate --backend cuda: ", c.gpus, " GPUs asked for, ", gpus.size(), " visible");
  const CudaDeviceInfo& gpu = gpus.front();
  c.device_name = gpu.name;
  c.compute_capability = std::to_string(gpu.major) + "." + std::to_string(gpu.minor);
  c.driver_version = cuda_driver_version();
  c.runtime_version = cuda_runtime_version();
  c.sm_count = gpu.sm_count;
  c.memory_capacity_bytes = gpu.memory_bytes;
  const double t = o.seconds_per_point;

  TESSEL_CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  TESSEL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } stream_guard{stream};
  cublasHandle_t blas = nullptr;
  TESSEL_CUBLAS_CHECK(cublasCreate(&blas));
  struct BlasGuard {
    cublasHandle_t h;
    ~BlasGuard() { cublasDestroy(h); }
  } blas_guard{blas};
  TESSEL_CUBLAS_CHECK(cublasSetStream(blas, stream));

  // GEMMs: square sizes and the skinny shapes decompositions produce (a split K, a split
  // M or N), by dtype.
  const std::vector<GemmCase> cases = {
      {"bf16", DType::bf16, CUDA_R_16BF, CUBLAS_COMPUTE_32F},
      {"f16", DType::f16, CUDA_R_16F, CUBLAS_COMPUTE_32F},
      {"f32", DType::f32, CUDA_R_32F, CUBLAS_COMPUTE_32F},
      {"tf32", DType::f32, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32},
      {"f64", DType::f64, CUDA_R_64F, CUBLAS_COMPUTE_64F},
  };
  std::vector<std::array<std::int64_t, 3>> shapes;
  for (std::int64_t s : {256, 512, 1024, 2048, 4096, 8192}) shapes.push_back({s, s, s});
  for (auto s : std::vector<std::array<std::int64_t, 3>>{
           {8192, 8192, 2048}, {8192, 2048, 8192}, {2048, 8192, 8192}, {4096, 4096, 512}, {16384, 128, 4096},
           {1000, 4096, 4096}, {1000, 11008, 4096}, {1000, 4096, 11008}})
    shapes.push_back(s);
  std::int64_t max_elems = 0;
  for (const auto& s : shapes) max_elems = std::max({max_elems, s[0] * s[2], s[2] * s[1], s[0] * s[1]});
  DeviceBuffer A(static_cast<std::size_t>(max_elems) * 8), B(static_cast<std::size_t>(max_elems) * 8),
      C(static_cast<std::size_t>(max_elems) * 8);
  DeviceBuffer workspace(32u << 20);
  TESSEL_CUBLAS_CHECK(cublasSetWorkspace(blas, workspace.p, 32u << 20));
  for (const GemmCase& gc : cases) {
    fill_random(A.p, max_elems, gc.storage, 1);
    fill_random(B.p, max_elems, gc.storage, 2);
    const float one_f = 1, zero_f = 0;
    const double one_d = 1, zero_d = 0;
    const bool dbl = gc.storage == DType::f64;
    for (const auto& s : shapes) {
      const std::int64_t m = s[0], n = s[1], k = s[2];
      if (dbl && m * n * k > std::int64_t{4096} * 4096 * 4096) continue;  // f64 is slow: spare the time
      const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
      const double sec = per_call_seconds(stream, t, [&] {
        // Row-major C[m,n] = A[m,k] B[k,n] as column-major C^T = B^T A^T.
        TESSEL_CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                         static_cast<int>(k), dbl ? static_cast<const void*>(&one_d) : &one_f, B.p,
                                         gc.type, static_cast<int>(n), A.p, gc.type, static_cast<int>(k),
                                         dbl ? static_cast<const void*>(&zero_d) : &zero_f, C.p, gc.type,
                                         static_cast<int>(n), gc.compute, CUBLAS_GEMM_DEFAULT));
      });
      c.gemm.push_back({gc.name, m, n, k, flops, sec, flops / sec});
      double& peak = std::string(gc.name) == "bf16"   ? c.peak_bf16_flops_per_s
                     : std::string(gc.name) == "f16"  ? c.peak_f16_flops_per_s
                     : std::string(gc.name) == "f32"  ? c.peak_f32_flops_per_s
                     : std::string(gc.name) == "tf32" ? c.peak_tf32_flops_per_s
                                                      : c.peak_f64_flops_per_s;
      peak = std::max(peak, flops / sec);
    }
  }

  // HBM: a 1 GiB device-to-device copy reads and writes every byte.
  {
    const std::size_t bytes = std::size_t{1} << 30;
    DeviceBuffer a(bytes), b(bytes);
    TESSEL_CUDA_CHECK(cudaMemsetAsync(a.p, 1, bytes, stream));
    const double sec = per_call_seconds(
        stream, t, [&] { TESSEL_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, stream)); });
    c.memory_bytes_per_s = 2.0 * static_cast<double>(bytes) / sec;
  }
  // A move between virtual devices: 64 MiB between two ranges of one allocation.
  {
    const std::size_t bytes = std::size_t{64} << 20;
    DeviceBuffer a(2 * bytes);
    char* base = static_cast<char*>(a.p);
    const double sec = per_call_seconds(
        stream, t, [&] { TESSEL_CUDA_CHECK(cudaMemcpyAsync(base + bytes, base, bytes, cudaMemcpyDeviceToDevice, stream)); });
    c.same_gpu_copy_bytes_per_s = static_cast<double>(bytes) / sec;
  }
  if (c.gpus >= 2) {
    const std::size_t bytes = std::size_t{256} << 20;
    DeviceBuffer src(bytes);
    TESSEL_CUDA_CHECK(cudaSetDevice(1));
    void* dst = nullptr;
    TESSEL_CUDA_CHECK(cudaMalloc(&dst, bytes));
    struct Free {
      void* p;
      ~Free() { cudaFree(p); }
    } free_dst{dst};
    TESSEL_CUDA_CHECK(cudaSetDevice(0));
    int can = 0;
    TESSEL_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (can) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else TESSEL_CUDA_CHECK(e);
    }
    const double sec =
        per_call_seconds(stream, t, [&] { TESSEL_CUDA_CHECK(cudaMemcpyPeerAsync(dst, 1, src.p, 0, bytes, stream)); });
    c.peer_copy_bytes_per_s = static_cast<double>(bytes) / sec;
  }
  // Launch latency: back-to-back launches of an empty kernel.
  {
    cuda::KernelSource ks;
    ks.name = "tessel_empty";
    ks.key = "empty";
    ks.source = "extern \"C\" __global__ void tessel_empty() {}\n";
    cuda::CompiledKernel k = cuda::compile(ks, "sm_" + std::to_string(gpu.major * 10 + gpu.minor));
    cudaLibrary_t lib = nullptr;
    TESSEL_CUDA_CHECK(cudaLibraryLoadData(&lib, k.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    struct Unload {
      cudaLibrary_t l;
      ~Unload() { cudaLibraryUnload(l); }
    } unload{lib};
    cudaKernel_t kernel = nullptr;
    TESSEL_CUDA_CHECK(cudaLibraryGetKernel(&kernel, lib, "tessel_empty"));
    c.launch_latency_s = per_call_seconds(stream, t, [&] {
      for (int i = 0; i < 100; ++i)
        TESSEL_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(32), nullptr, 0, stream));
    }) / 100;
  }
  // Per-task overhead: a chain of 200 tiny elementwise nodes on one device; the span of the
  // graph less the time its kernels ran, per compute task (median of 5 runs); launched as
  // one CUDA graph (the executor's default, task_overhead_s) and task by task to streams
  // (task_overhead_stream_s).
  for (LaunchMode mode : {LaunchMode::graph, LaunchMode::stream}) {
    const Graph g = overhead_probe_graph();
    const TaskGraph tg = lower(g, split_largest(g, 1));
    const TensorMap inputs = random_inputs(g, 1);
    CudaOptions eo{Policy::async, 1};
    eo.launch = mode;
    CudaExecutor exec(eo);
    std::vector<double> per_task;
    for (int r = 0; r < 6; ++r) {
      const RunResult res = exec.run(g, tg, inputs);
      double lo = 1e30, hi = -1e30, busy = 0;
      int compute = 0;
      for (const Span& s : res.timeline.spans) {
        lo = std::min(lo, s.start_s);
        hi = std::max(hi, s.end_s);
        if (tg.task(s.task).kind == TaskKind::compute) {
          busy += s.end_s - s.start_s;
          ++compute;
        }
      }
      if (r > 0 && compute > 0) per_task.push_back(std::max(0.0, (hi - lo - busy) / compute));
    }
    std::sort(per_task.begin(), per_task.end());
    (mode == LaunchMode::graph ? c.task_overhead_s : c.task_overhead_stream_s) = per_task[per_task.size() / 2];
  }
  measure_dispatch(c);
  return c;
}

// The dispatch and barrier probes (the header's "dispatch" and "barrier"). A front end
// that takes one task at a time spaces their starts by its time per task whatever the
// kernels (these take ~2 us).
namespace {
// The probe run six times under `eo`, the first discarded (warm-up); `each` sees the rest.
void probe_runs(const CudaOptions& eo, const Graph& g, const TaskGraph& tg, const TensorMap& inputs,
                const std::function<void(const RunResult&)>& each) {
  CudaExecutor exec(eo);
  for (int r = 0; r < 6; ++r) {
    const RunResult res = exec.run(g, tg, inputs);
    if (r > 0) each(res);
  }
}

void measure_dispatch(CudaCalibration& c) {
  const Graph g = overhead_probe_graph();
  const TensorMap inputs = random_inputs(g, 1);
  // A probe that never run on a GPU must not cost the figures measured before it.
  auto guarded = [](const char* what, const std::function<void()>& probe) {
    try {
      probe();
    } catch (const Error& e) {
      std::fprintf(stderr, "tessel: warning: the %s probe failed (its figure left 0): %s\n", what, e.what());
    }
  };
  // The gate: at least four chains per GPU (as virtual devices of it), whatever the
  // logical device count, so that the front end always has a task to start.
  const int chains = std::min(256, std::max(c.devices, 4 * c.gpus));
  const TaskGraph chains_tg = lower(g, split_largest(g, chains));
  auto gpu_of = [&](DeviceId d, int devices) {
    return static_cast<int>(static_cast<std::int64_t>(d.value) * c.gpus / devices);
  };
  for (LaunchMode mode : {LaunchMode::graph, LaunchMode::stream}) {
    guarded(mode == LaunchMode::graph ? "dispatch interval (graph)" : "dispatch interval (stream)", [&] {
      CudaOptions eo{Policy::async, c.gpus};
      eo.launch = mode;
      std::vector<double> gaps;
      probe_runs(eo, g, chains_tg, inputs, [&](const RunResult& res) {
        for (int gpu = 0; gpu < c.gpus; ++gpu) {
          std::vector<double> starts;
          for (const Span& s : res.timeline.spans)
            if (gpu_of(s.device, chains) == gpu) starts.push_back(s.start_s);
          std::sort(starts.begin(), starts.end());
          for (std::size_t i = 1; i < starts.size(); ++i) gaps.push_back(starts[i] - starts[i - 1]);
        }
      });
      if (!gaps.empty())
        (mode == LaunchMode::graph ? c.dispatch_interval_s : c.dispatch_interval_stream_s) = stats::median(gaps);
    });
  }
  // The bsp barrier on the calibrated devices, read off the timelines (runtime/measure.h)
  // GPU by GPU (each GPU's marks have a clock of their own): per boundary, the gap from the
  // phase's last compute end to the next phase's first compute start; the median over five
  // runs, less the per-task overhead, which the simulator spends inside each compute span
  // (launch_latency_s) where the executor spends it between them, as the CPU calibration
  // does.
  guarded("bsp barrier", [&] {
    const TaskGraph tg = lower(g, split_largest(g, c.devices));
    std::vector<double> gaps;
    probe_runs(CudaOptions{Policy::bsp, c.gpus}, g, tg, inputs, [&](const RunResult& res) {
      for (int gpu = 0; gpu < c.gpus; ++gpu) {
        Timeline mine;
        for (const Span& s : res.timeline.spans)
          if (gpu_of(s.device, c.devices) == gpu) mine.spans.push_back(s);
        for (double gap : bsp_boundary_gaps(tg, mine)) gaps.push_back(gap);
      }
    });
    if (!gaps.empty()) c.barrier_latency_s = std::max(0.0, stats::median(gaps) - c.task_overhead_s);
  });
  // The unmarked graph's span over the tasks of its busiest GPU that issue work (inputs
  // and outputs add no node without marks).
  guarded("unmarked dispatch", [&] {
    std::vector<double> work(static_cast<std::size_t>(c.gpus), 0);
    for (const Task& t : chains_tg.tasks)
      if (t.kind != TaskKind::input && t.kind != TaskKind::output) ++work[static_cast<std::size_t>(gpu_of(t.device, chains))];
    const double busiest = *std::max_element(work.begin(), work.end());
    CudaOptions eo{Policy::async, c.gpus};
    eo.unmarked_run = true;
    std::vector<double> per_task;
    probe_runs(eo, g, chains_tg, inputs, [&](const RunResult& res) {
      if (res.unmarked_span_s > 0 && busiest > 0) per_task.push_back(res.unmarked_span_s / busiest);
    });
    if (!per_task.empty()) c.dispatch_interval_unmarked_s = stats::median(per_task);
  });
}
}  // namespace

Machine machine_from_cuda_calibration(const CudaCalibration& c) {
  if (c.devices < 1 || c.gpus < 1 || !(c.peak_bf16_flops_per_s > 0)) fail("cuda calibration: nothing measured");
  const double share = static_cast<double>(c.gpus) / static_cast<double>(c.devices);  // of one GPU per device
  const bool virtual_devices = c.devices > c.gpus;
  Machine m;
  m.name = "cuda-calibrated:" + std::to_string(c.devices) + (virtual_devices ? " (virtual devices)" : "");
  DeviceType t;
  t.name = virtual_devices ? c.device_name + " (virtual device: shares the GPU's SMs and memory bandwidth with " +
                                 std::to_string(c.devices / c.gpus - 1) + " more)"
                           : c.device_name;
  // Each device is described with its whole GPU's rates; virtual devices of one GPU carry
  // its index as Device::chip, and the simulator shares the chip among those computing at
  // once (k of them: each k times slower). Memory capacity is split: each has its range.
  t.peak_flops_per_s = {c.peak_f16_flops_per_s, c.peak_bf16_flops_per_s, c.peak_f32_flops_per_s,
                        c.peak_f64_flops_per_s};
  // Efficiency by flops from the square bf16 GEMMs (the efficiency table is by flops; the
  // skinny shapes are in the calibration JSON).
  for (const auto& p : c.gemm)
    if (p.dtype == "bf16" && p.m == p.n && p.n == p.k)
      t.efficiency.push_back({p.flops, std::clamp(p.flops_per_s / c.peak_bf16_flops_per_s, 1e-6, 1.0)});
  std::sort(t.efficiency.begin(), t.efficiency.end(),
            [](const EfficiencyPoint& a, const EfficiencyPoint& b) { return a.flops < b.flops; });
  t.memory_bytes_per_s = c.memory_bytes_per_s;
  t.memory_capacity_bytes = static_cast<std::int64_t>(static_cast<double>(c.memory_capacity_bytes) * share);
  t.launch_latency_s = c.task_overhead_s;
  t.dispatch_interval_s = c.dispatch_interval_s;
  t.sm_count = std::max(1, c.sm_count);
  m.device_types = {t};
  m.hosts = {Host{"host", 0, {}, {}}};
  auto add_link = [&](std::string name, LinkKind kind, double bytes_per_s) {
    m.links.push_back(Link{std::move(name), kind, bytes_per_s, 0.0});
    return LinkId(static_cast<std::int32_t>(m.links.size() - 1));
  };
  // Moves between virtual devices of one GPU are copies through its memory: all of them
  // share one link of the measured same-GPU copy rate.
  std::vector<LinkId> gpu_copy;
  for (int g = 0; g < c.gpus; ++g)
    gpu_copy.push_back(add_link("gpu" + std::to_string(g) + ".copy", LinkKind::memory, c.same_gpu_copy_bytes_per_s));
  std::vector<int> gpu_of(static_cast<std::size_t>(c.devices));
  for (int d = 0; d < c.devices; ++d) {
    gpu_of[static_cast<std::size_t>(d)] = static_cast<int>(static_cast<std::int64_t>(d) * c.gpus / c.devices);
    Device dev;
    if (virtual_devices) dev.chip = gpu_of[static_cast<std::size_t>(d)];
    m.devices.push_back(dev);
  }
  // Explicit routes: within a GPU over its copy link, between GPUs over one directed link
  // per GPU pair at the measured peer rate.
  for (int a = 0; a < c.devices; ++a)
    for (int b = 0; b < c.devices; ++b) {
      const int ga = gpu_of[static_cast<std::size_t>(a)], gb = gpu_of[static_cast<std::size_t>(b)];
      if (a == b) continue;
      if (ga == gb) {
        m.routes.push_back(RouteEntry{DeviceId(a), DeviceId(b), {gpu_copy[static_cast<std::size_t>(ga)]}});
        continue;
      }
      const std::string name = "gpu" + std::to_string(ga) + "->gpu" + std::to_string(gb);
      LinkId l;
      auto it = std::find_if(m.links.begin(), m.links.end(), [&](const Link& x) { return x.name == name; });
      if (it == m.links.end()) l = add_link(name, LinkKind::nvlink, c.peer_copy_bytes_per_s);
      else l = LinkId(static_cast<std::int32_t>(it - m.links.begin()));
      m.routes.push_back(RouteEntry{DeviceId(a), DeviceId(b), {l}});
    }
  m.barrier_latency_s = c.barrier_latency_s;
  m.validate(m.name);
  return m;
}

nlohmann::json to_json(const CudaCalibration& c) {
  nlohmann::json gemm = nlohmann::json::array();
  for (const auto& p : c.gemm)
    gemm.push_back({{"dtype", p.dtype}, {"m", p.m}, {"n", p.n}, {"k", p.k}, {"flops", p.flops},
                    {"seconds", p.seconds}, {"flops_per_s", p.flops_per_s}});
  return {{"devices", c.devices},
          {"gpus", c.gpus},
          {"virtual_devices", c.devices > c.gpus},
          {"virtual_devices_note", c.devices > c.gpus ? "the devices share each GPU's SMs, memory bandwidth and copy "
                                                        "engines; each is described with its GPU's rates and the GPU's "
                                                        "index as its chip: the simulator shares the chip among the "
                                                        "devices computing at once"
                                                      : ""},
          {"device_name", c.device_name},
          {"compute_capability", c.compute_capability},
          {"driver_version", c.driver_version},
          {"runtime_version", c.runtime_version},
          {"sm_count", c.sm_count},
          {"memory_capacity_bytes", c.memory_capacity_bytes},
          {"gemm", gemm},
          {"peak_bf16_flops_per_s", c.peak_bf16_flops_per_s},
          {"peak_f16_flops_per_s", c.peak_f16_flops_per_s},
          {"peak_f32_flops_per_s", c.peak_f32_flops_per_s},
          {"peak_tf32_flops_per_s", c.peak_tf32_flops_per_s},
          {"peak_f64_flops_per_s", c.peak_f64_flops_per_s},
          {"memory_bytes_per_s", c.memory_bytes_per_s},
          {"same_gpu_copy_bytes_per_s", c.same_gpu_copy_bytes_per_s},
          {"peer_copy_bytes_per_s", c.peer_copy_bytes_per_s},
          {"launch_latency_s", c.launch_latency_s},
          {"task_overhead_s", c.task_overhead_s},
          {"task_overhead_stream_s", c.task_overhead_stream_s},
          {"dispatch_interval_s", c.dispatch_interval_s},
          {"dispatch_interval_stream_s", c.dispatch_interval_stream_s},
          {"dispatch_interval_unmarked_s", c.dispatch_interval_unmarked_s},
          {"barrier_latency_s", c.barrier_latency_s}};
}

Graph overhead_probe_graph(int nodes) {
  GraphBuilder b;
  NodeId x = b.input("x", {256});
  for (int i = 0; i < nodes; ++i) x = b.map("add(x0,1)", x);
  b.output(x, "y");
  return b.build();
}

}  // namespace tessel::runtime
