#include "runtime/cuda/cuda_executor.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

#include "core/collective_rewrite.h"
#include "core/error.h"
#include "core/memory_plan.h"
#include "core/ready_order.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/cuda_codegen.h"

namespace tessel::runtime {

MoveMethod parse_move_method(std::string_view s) {
  if (s == "copy") return MoveMethod::copy;
  if (s == "nccl") return MoveMethod::nccl;
  fail("unknown move method '", s, "' (expected copy or nccl)");
}

LaunchMode parse_launch_mode(std::string_view s) {
  if (s == "graph") return LaunchMode::graph;
  if (s == "stream") return LaunchMode::stream;
  fail("unknown launch mode '", s, "' (expected graph or stream)");
}

std::string_view to_string(LaunchMode m) { return m == LaunchMode::graph ? "graph" : "stream"; }

CommPriority parse_comm_priority(std::string_view s) {
  if (s == "normal") return CommPriority::normal;
  if (s == "high") return CommPriority::high;
  fail("unknown communication priority '", s, "' (expected normal or high)");
}

std::vector<CudaDeviceInfo> cuda_devices() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error state
    const std::string driver = cuda_driver_version();
    fail("--backend cuda: no usable GPU: cudaGetDeviceCount returned ", cuda::describe(e),
         driver == "none" ? " (no CUDA driver is loaded on this machine)" : " (the driver supports CUDA " + driver + ")");
  }
  if (count == 0) fail("--backend cuda: no usable GPU: cudaGetDeviceCount found 0 devices");
  std::vector<CudaDeviceInfo> out;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    TESSEL_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
    CudaDeviceInfo info;
    info.gpu = d;
    info.name = p.name;
    info.major = p.major;
    info.minor = p.minor;
    info.sm_count = p.multiProcessorCount;
    info.memory_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
    info.memory_bus_bits = p.memoryBusWidth;
    info.l2_bytes = p.l2CacheSize;
    int clock = 0;
    if (cudaDeviceGetAttribute(&clock, cudaDevAttrMemoryClockRate, d) == cudaSuccess) info.memory_clock_khz = clock;
    (void)cudaGetLastError();
    out.push_back(std::move(info));
  }
  return out;
}

std::string cuda_driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) {
    (void)cudaGetLastError();
    return "none";
  }
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string cuda_runtime_version() {
  int v = 0;
  TESSEL_CUDA_CHECK(cudaRuntimeGetVersion(&v));
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

namespace {

using cuda::CopyParams;
using cuda::FillParams;
using cuda::KernelSource;

constexpr std::int64_t kAlign = 256;
constexpr std::int64_t kCublasWorkspaceBytes = std::int64_t{32} << 20;  // NVIDIA's advice for Hopper
constexpr int kCopyThreads = 256;

std::int64_t align_up(std::int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

std::vector<std::int64_t> row_major(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d)
    st[static_cast<std::size_t>(d)] = st[static_cast<std::size_t>(d) + 1] * s[static_cast<std::size_t>(d) + 1];
  return st;
}

// Region `src` of an array of shape `from` into region `dst` of an array of shape `to`.
CopyParams region_copy(const Shape& from, const Rect& src, const Shape& to, const Rect& dst) {
  CopyParams p;
  p.rank = src.rank;
  p.elements = src.elements();
  auto fs = row_major(from), ts = row_major(to);
  for (int d = 0; d < src.rank; ++d) {
    p.size[d] = src.size[static_cast<std::size_t>(d)];
    p.src_stride[d] = fs[static_cast<std::size_t>(d)];
    p.dst_stride[d] = ts[static_cast<std::size_t>(d)];
  }
  return p;
}

std::int64_t region_offset(const Shape& shape, const Rect& r) {
  auto st = row_major(shape);
  std::int64_t off = 0;
  for (int d = 0; d < r.rank; ++d) off += r.offset[static_cast<std::size_t>(d)] * st[static_cast<std::size_t>(d)];
  return off;
}

// An operand with join indices `idx` permuted into row-major order `order`.
CopyParams permute_copy(const std::vector<int>& idx, const std::vector<int>& order, const Shape& join_shape) {
  Shape src_shape;
  for (int j : idx) src_shape.push_back(join_shape[static_cast<std::size_t>(j)]);
  auto sst = row_major(src_shape);
  Shape dst_shape;
  for (int j : order) dst_shape.push_back(join_shape[static_cast<std::size_t>(j)]);
  auto dst = row_major(dst_shape);
  CopyParams p;
  p.rank = static_cast<int>(order.size());
  p.elements = elements(dst_shape);
  for (std::size_t d = 0; d < order.size(); ++d) {
    p.size[d] = dst_shape[d];
    for (std::size_t k = 0; k < idx.size(); ++k)
      if (idx[k] == order[d]) p.src_stride[d] += sst[k];
    p.dst_stride[d] = dst[d];
  }
  return p;
}

// How a contraction block maps onto one strided-batched GEMM.
struct GemmPlan {
  std::int64_t nb = 1, m = 1, n = 1, k = 1;
  bool a_permute = false, a_trans = false;
  bool b_permute = false, b_trans = false;
  bool c_permute = false;
  CopyParams a_copy, b_copy, c_copy;  // the permutations, where needed
};

GemmPlan plan_gemm(const Einsum& e) {
  const auto& i0 = e.inputs[0];
  const auto& i1 = e.inputs[1];
  const GemmDims dims = gemm_dims(e);
  const std::vector<int>&B = dims.batch, &M = dims.m, &N = dims.n, &K = dims.k;
  auto cat = [](std::vector<int> a, const std::vector<int>& b, const std::vector<int>& c) {
    a.insert(a.end(), b.begin(), b.end());
    a.insert(a.end(), c.begin(), c.end());
    return a;
  };
  GemmPlan p;
  p.nb = dims.batch_size;
  p.m = dims.m_size;
  p.n = dims.n_size;
  p.k = dims.k_size;
  const std::vector<int> a_n = cat(B, M, K), a_t = cat(B, K, M), b_n = cat(B, K, N), b_t = cat(B, N, K);
  const std::vector<int> c_order = cat(B, M, N);
  if (i0 == a_t && i0 != a_n) {
    p.a_trans = true;
  } else if (i0 != a_n) {
    p.a_permute = true;
    p.a_copy = permute_copy(i0, a_n, e.join_shape);
  }
  if (i1 == b_t && i1 != b_n) {
    p.b_trans = true;
  } else if (i1 != b_n) {
    p.b_permute = true;
    p.b_copy = permute_copy(i1, b_n, e.join_shape);
  }
  std::vector<int> out_idx(static_cast<std::size_t>(e.out_rank));
  for (int j = 0; j < e.out_rank; ++j) out_idx[static_cast<std::size_t>(j)] = j;
  if (c_order != out_idx) {
    p.c_permute = true;
    // From scratch laid out in c_order to the output in join order.
    Shape c_shape;
    for (int j : c_order) c_shape.push_back(e.join_shape[static_cast<std::size_t>(j)]);
    auto cs = row_major(c_shape);
    auto os = row_major(e.out_shape());
    CopyParams& c = p.c_copy;
    c.rank = static_cast<int>(c_order.size());
    c.elements = elements(c_shape);
    for (std::size_t d = 0; d < c_order.size(); ++d) {
      c.size[d] = c_shape[d];
      c.src_stride[d] = cs[d];
      c.dst_stride[d] = os[static_cast<std::size_t>(c_order[d])];
    }
  }
  return p;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
  }
  return CUDA_R_32F;
}

// Host conversions between the Tensor's doubles and device storage.
std::vector<unsigned char> to_device_bytes(const std::vector<double>& v, DType t) {
  std::vector<unsigned char> out(v.size() * static_cast<std::size_t>(dtype_bytes(t)));
  for (std::size_t i = 0; i < v.size(); ++i) {
    switch (t) {
      case DType::f16: {
        __half h = __float2half_rn(static_cast<float>(v[i]));
        std::memcpy(out.data() + 2 * i, &h, 2);
        break;
      }
      case DType::bf16: {
        __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(v[i]));
        std::memcpy(out.data() + 2 * i, &h, 2);
        break;
      }
      case DType::f32: {
        float f = static_cast<float>(v[i]);
        std::memcpy(out.data() + 4 * i, &f, 4);
        break;
      }
      case DType::f64: std::memcpy(out.data() + 8 * i, &v[i], 8); break;
    }
  }
  return out;
}

std::vector<double> from_device_bytes(const std::vector<unsigned char>& b, DType t) {
  const std::size_t n = b.size() / static_cast<std::size_t>(dtype_bytes(t));
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::f16: {
        __half h;
        std::memcpy(&h, b.data() + 2 * i, 2);
        out[i] = __half2float(h);
        break;
      }
      case DType::bf16: {
        __nv_bfloat16 h;
        std::memcpy(&h, b.data() + 2 * i, 2);
        out[i] = __bfloat162float(h);
        break;
      }
      case DType::f32: {
        float f;
        std::memcpy(&f, b.data() + 4 * i, 4);
        out[i] = f;
        break;
      }
      case DType::f64: std::memcpy(&out[i], b.data() + 8 * i, 8); break;
    }
  }
  return out;
}

struct DeviceContext {
  int gpu = 0;
  cudaStream_t compute = nullptr, copy = nullptr, comm = nullptr;
  // Loads and evicts, one stream per direction of the host link (PCIe is full duplex and
  // the GPU's copy engines serve each direction), apart from the touches on `copy`.
  cudaStream_t host_in = nullptr, host_out = nullptr;
  cublasHandle_t blas = nullptr;
};

}  // namespace

struct CudaExecutor::State {
  CudaOptions options;
  std::vector<CudaDeviceInfo> gpus;
  std::map<std::pair<int, int>, DeviceContext> contexts;  // (logical device, gpu)
  std::map<std::string, cudaKernel_t> kernels;            // key@arch
  // Copy and fill kernels by (gpu, src dtype, dst dtype, combine) / (gpu, dtype): looked
  // up per task at issue time without generating their source again.
  std::map<std::tuple<int, DType, DType, Agg>, cudaKernel_t> copy_kernels;
  std::map<std::pair<int, DType>, cudaKernel_t> fill_kernels;
  std::vector<cudaLibrary_t> libraries;
  std::map<std::vector<int>, std::vector<ncclComm_t>> comms;  // by the GPUs of the logical devices
  std::set<std::pair<int, int>> peer_enabled;
  std::set<std::pair<cudaKernel_t, int>> loaded;  // (kernel, gpu): loaded into that GPU's context

  ~State() {
    for (auto& [gpus_key, cs] : comms)
      for (ncclComm_t c : cs) ncclCommDestroy(c);
    for (auto& [key, ctx] : contexts) {
      cudaSetDevice(ctx.gpu);
      if (ctx.blas) cublasDestroy(ctx.blas);
      for (cudaStream_t s : {ctx.compute, ctx.copy, ctx.comm, ctx.host_in, ctx.host_out})
        if (s) cudaStreamDestroy(s);
    }
    for (cudaLibrary_t l : libraries) cudaLibraryUnload(l);
  }

  std::string arch(int gpu) const {
    const CudaDeviceInfo& d = gpus.at(static_cast<std::size_t>(gpu));
    return "sm_" + std::to_string(d.major * 10 + d.minor);
  }

  DeviceContext& context(int logical, int gpu) {
    auto it = contexts.find({logical, gpu});
    if (it != contexts.end()) return it->second;
    DeviceContext ctx;
    ctx.gpu = gpu;
    TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
    int least = 0, greatest = 0;  // numerically: greatest is the highest priority
    TESSEL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    TESSEL_CUDA_CHECK(cudaStreamCreateWithPriority(&ctx.compute, cudaStreamNonBlocking, least));
    TESSEL_CUDA_CHECK(cudaStreamCreateWithPriority(&ctx.copy, cudaStreamNonBlocking, least));
    TESSEL_CUDA_CHECK(cudaStreamCreateWithPriority(&ctx.host_in, cudaStreamNonBlocking, least));
    TESSEL_CUDA_CHECK(cudaStreamCreateWithPriority(&ctx.host_out, cudaStreamNonBlocking, least));
    TESSEL_CUDA_CHECK(cudaStreamCreateWithPriority(
        &ctx.comm, cudaStreamNonBlocking, options.comm_priority == CommPriority::high ? greatest : least));
    TESSEL_CUBLAS_CHECK(cublasCreate(&ctx.blas));
    TESSEL_CUBLAS_CHECK(cublasSetStream(ctx.blas, ctx.compute));
    return contexts.emplace(std::make_pair(logical, gpu), ctx).first->second;
  }

  cudaKernel_t kernel(const KernelSource& ks, int gpu) {
    const std::string a = arch(gpu);
    const std::string key = ks.key + "@" + a;
    auto it = kernels.find(key);
    cudaKernel_t k = nullptr;
    if (it != kernels.end()) {
      k = it->second;
    } else {
      const cuda::CompiledKernel& compiled = cuda::compile_cached(ks, a);
      cudaLibrary_t lib = nullptr;
      TESSEL_CUDA_CHECK(cudaLibraryLoadData(&lib, compiled.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
      libraries.push_back(lib);
      TESSEL_CUDA_CHECK(cudaLibraryGetKernel(&k, lib, ks.name.c_str()));
      kernels.emplace(key, k);
    }
    // Loaded into this GPU's context now, not lazily at its first launch inside the timed
    // run (CUDA_MODULE_LOADING=LAZY is the default), and checked to launch with the block
    // size the executor uses.
    if (loaded.insert({k, gpu}).second) {
      TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
      cudaFuncAttributes attr{};
      TESSEL_CUDA_CHECK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(k)));
      if (attr.maxThreadsPerBlock < ks.block_threads)
        fail("cuda executor: generated kernel ", ks.name, " launches with ", ks.block_threads,
             " threads per block but GPU ", gpu, " allows ", attr.maxThreadsPerBlock, " (", attr.numRegs,
             " registers per thread)");
    }
    return k;
  }

  cudaKernel_t copy(DType src, DType dst, Agg combine, int gpu) {
    const auto key = std::make_tuple(gpu, src, dst, combine);
    auto it = copy_kernels.find(key);
    if (it != copy_kernels.end()) return it->second;
    return copy_kernels.emplace(key, kernel(cuda::copy_kernel(src, dst, combine), gpu)).first->second;
  }

  cudaKernel_t fill(DType t, int gpu) {
    auto it = fill_kernels.find({gpu, t});
    if (it != fill_kernels.end()) return it->second;
    return fill_kernels.emplace(std::make_pair(gpu, t), kernel(cuda::fill_kernel(t), gpu)).first->second;
  }

  void enable_peer(int a, int b) {
    if (a == b || peer_enabled.contains({a, b})) return;
    int can = 0;
    TESSEL_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
    if (can) {
      TESSEL_CUDA_CHECK(cudaSetDevice(a));
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else {
        TESSEL_CUDA_CHECK(e);
      }
    }
    peer_enabled.insert({a, b});
  }
};

namespace {

// Ends a stream capture that failed part-way (the stream would otherwise stay in capture
// mode) and drops what it captured; errors are expected here and cleared.
void abandon_capture(int gpu, cudaStream_t origin) {
  cudaGraph_t broken = nullptr;
  (void)cudaSetDevice(gpu);
  (void)cudaStreamEndCapture(origin, &broken);  // fails harmlessly where the capture already ended
  if (broken) (void)cudaGraphDestroy(broken);
  (void)cudaGetLastError();
}

// Everything one run allocates, released (after the GPUs have finished) however the run
// ends: nothing is left running or allocated after an error.
struct RunResources {
  std::vector<int> gpus_used;
  std::map<int, void*> arena;  // per GPU
  std::vector<void*> pinned;   // page-locked host memory (cudaMallocHost): host buffers, outputs
  std::vector<std::pair<int, cudaEvent_t>> events;
  cudaGraph_t graph = nullptr;          // LaunchMode::graph: the captured run
  cudaGraphExec_t graph_exec = nullptr;
  cudaGraph_t plain = nullptr;          // the same without per-task marks (CudaOptions::unmarked_run)
  cudaGraphExec_t plain_exec = nullptr;

  RunResources() = default;
  RunResources(const RunResources&) = delete;
  RunResources& operator=(const RunResources&) = delete;
  ~RunResources() {
    for (int g : gpus_used) {
      cudaSetDevice(g);
      cudaDeviceSynchronize();
    }
    if (graph_exec) cudaGraphExecDestroy(graph_exec);
    if (graph) cudaGraphDestroy(graph);
    if (plain_exec) cudaGraphExecDestroy(plain_exec);
    if (plain) cudaGraphDestroy(plain);
    for (auto& [g, e] : events) {
      cudaSetDevice(g);
      cudaEventDestroy(e);
    }
    for (auto& [g, p] : arena) {
      cudaSetDevice(g);
      cudaFree(p);
    }
    for (void* p : pinned) cudaFreeHost(p);
    (void)cudaGetLastError();
  }

  // `bytes` of page-locked host memory, freed with the run; the error names `what`.
  void* host(std::int64_t bytes, const std::string& what) {
    void* p = nullptr;
    const cudaError_t e = cudaMallocHost(&p, static_cast<std::size_t>(std::max<std::int64_t>(bytes, kAlign)));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      fail("cuda executor: cannot allocate ", bytes, " bytes of page-locked host memory for ", what,
           " (cudaMallocHost: ", cuda::describe(e), ")");
    }
    pinned.push_back(p);
    return p;
  }

  cudaEvent_t event(int gpu, bool timing = true) {
    TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
    cudaEvent_t e = nullptr;
    TESSEL_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    events.emplace_back(gpu, e);
    return e;
  }
};

class CudaRun {
 public:
  CudaRun(CudaExecutor::State& s, const Graph& g, const TaskGraph& tg, const TensorMap& inputs, bool profiling)
      : s_(s), g_(g), tg_(tg), inputs_(inputs), profiling_(profiling) {}

  // Allocates, compiles, places inputs and initialises buffers; the GPUs are idle after.
  void prepare() {
    const int n = tg_.num_devices;
    const int visible = static_cast<int>(s_.gpus.size());
    int G = s_.options.gpus > 0 ? s_.options.gpus : std::min(visible, n);
    if (G > visible)
      fail("cuda executor: ", G, " GPUs asked for but ", visible, " visible (", s_.gpus.front().name, ")");
    G = std::min(G, n);
    gpu_of_.resize(static_cast<std::size_t>(n));
    for (int d = 0; d < n; ++d) gpu_of_[static_cast<std::size_t>(d)] = static_cast<int>(static_cast<std::int64_t>(d) * G / n);
    for (int d = 0; d < G; ++d) res_.gpus_used.push_back(d);
    ctx_.resize(static_cast<std::size_t>(n));
    for (int d = 0; d < n; ++d) ctx_[static_cast<std::size_t>(d)] = &s_.context(d, gpu_of_[static_cast<std::size_t>(d)]);
    if (s_.options.moves == MoveMethod::nccl) {
      bool distinct = G == n;
      if (!distinct)
        fail("--moves nccl needs one GPU per device (NCCL refuses two ranks on one GPU): this run puts ", n,
             " devices on ", G, " GPU", G == 1 ? "" : "s", "; use --moves copy");
      auto it = s_.comms.find(gpu_of_);
      if (it == s_.comms.end()) {
        std::vector<ncclComm_t> comms(static_cast<std::size_t>(n));
        TESSEL_NCCL_CHECK(ncclCommInitAll(comms.data(), n, gpu_of_.data()));
        it = s_.comms.emplace(gpu_of_, std::move(comms)).first;
      }
      comms_ = &it->second;
    }
    check_dtypes();
    plan_memory();
    compile_kernels();
    place();
  }

  RunResult execute() {
    double unmarked_span_s = -1;
    if (s_.options.launch == LaunchMode::graph) {
      // The issue sequence, as graphs, instantiated and uploaded: before the clock.
      const bool plain = s_.options.unmarked_run && !profiling_;
      if (plain) capture(false, &res_.plain, &res_.plain_exec);
      capture(true, &res_.graph, &res_.graph_exec);
      TESSEL_CUDA_CHECK(cudaSetDevice(origin_gpu_));
      if (plain) {  // unmarked, timed whole; then the buffers as they were before it
        cudaEvent_t a = res_.event(origin_gpu_), b = res_.event(origin_gpu_);
        TESSEL_CUDA_CHECK(cudaEventRecord(a, origin_));
        TESSEL_CUDA_CHECK(cudaGraphLaunch(res_.plain_exec, origin_));
        TESSEL_CUDA_CHECK(cudaEventRecord(b, origin_));
        const cudaError_t e = cudaEventSynchronize(b);
        if (e != cudaSuccess)
          fail("cuda executor: the task graph (unmarked run) failed on GPU ", origin_gpu_, ": ", cuda::describe(e),
               " — an asynchronous error of some task");
        for (int gpu : res_.gpus_used) {
          TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
          TESSEL_CUDA_CHECK(cudaDeviceSynchronize());
        }
        float ms = 0;
        TESSEL_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        unmarked_span_s = ms * 1e-3;
        place();
        TESSEL_CUDA_CHECK(cudaSetDevice(origin_gpu_));
      }
      TESSEL_CUDA_CHECK(cudaGraphLaunch(res_.graph_exec, origin_));
    } else {
      issue();
    }
    for (int gpu : res_.gpus_used) {
      TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
      const cudaError_t e = cudaDeviceSynchronize();
      if (e != cudaSuccess)
        fail("cuda executor: the task graph failed on GPU ", gpu, " (", s_.gpus[static_cast<std::size_t>(gpu)].name,
             "): ", cuda::describe(e), " — an asynchronous error of some task issued to it");
    }
    RunResult result;
    result.unmarked_span_s = unmarked_span_s;
    result.timeline.source = std::string("cuda-") + std::string(to_string(s_.options.policy));
    for (std::size_t i = 0; i < tg_.tasks.size(); ++i) {
      const Task& t = tg_.tasks[i];
      float start_ms = 0, end_ms = 0;
      TESSEL_CUDA_CHECK(cudaEventElapsedTime(&start_ms, t0_.at(start_gpu_[i]), start_[i]));
      TESSEL_CUDA_CHECK(cudaEventElapsedTime(&end_ms, t0_.at(end_gpu_[i]), end_[i]));
      const DeviceId dev = t.kind == TaskKind::move ? t.dst_device : t.device;
      result.timeline.spans.push_back(Span{TaskId(static_cast<std::int32_t>(i)), dev, default_lane(t.kind),
                                           start_ms * 1e-3, std::max(start_ms, end_ms) * 1e-3});
    }
    for (NodeId id : g_.outputs()) {
      const Node& node = g_.node(id);
      result.outputs.emplace(node.name, Tensor(node.shape, node.dtype));
    }
    for (const Task& t : tg_.tasks) {
      if (t.kind != TaskKind::output) continue;
      const Buffer& b = tg_.buffer(t.reads[0]);
      std::vector<unsigned char> bytes(static_cast<std::size_t>(b.bytes()));
      const void* copied = output_ptr_[static_cast<std::size_t>(&t - tg_.tasks.data())];
      if (copied) {  // copied out by its output task (memory-capped graphs)
        std::memcpy(bytes.data(), copied, bytes.size());
      } else {
        TESSEL_CUDA_CHECK(cudaSetDevice(gpu_of(b.device)));
        TESSEL_CUDA_CHECK(cudaMemcpy(bytes.data(), ptr(t.reads[0]), bytes.size(), cudaMemcpyDeviceToHost));
      }
      Tensor block(b.shape, b.dtype);
      block.data = from_device_bytes(bytes, b.dtype);
      Tensor& out = result.outputs.at(g_.node(t.node).name);
      copy_region(block, Rect::whole(b.shape), out, t.src);
    }
    return result;
  }

  // Per task: seconds per call of its compute kernel (-1 for other tasks) and its chip
  // share (see CudaExecutor::profile_kernels).
  KernelProfile profile(int calls) {
    KernelProfile out;
    out.seconds.assign(tg_.tasks.size(), -1.0);
    out.chip_share.assign(tg_.tasks.size(), 1.0);
    // (node, block shape) → (seconds, share)
    std::map<std::pair<std::int32_t, std::string>, std::pair<double, double>> seen;
    for (std::size_t i = 0; i < tg_.tasks.size(); ++i) {
      const Task& t = tg_.tasks[i];
      if (t.kind != TaskKind::compute) continue;
      const auto key = std::make_pair(t.node.value, to_string(t.src));
      auto it = seen.find(key);
      if (it == seen.end()) {
        const int gpu = gpu_of(t.device);
        cudaStream_t stream = ctx(t.device).compute;
        launch_compute(t, stream);  // warm-up
        const double alone = gpu_seconds(gpu, {stream}, [&] {
                               for (int c = 0; c < calls; ++c) launch_compute(t, stream);
                             }) / calls;
        it = seen.emplace(key, std::make_pair(alone, concurrent_share(t, calls, alone))).first;
      }
      out.seconds[i] = it->second.first;
      out.chip_share[i] = it->second.second;
    }
    // The handles go back to their devices' compute streams and workspaces.
    for (std::size_t d = 0; d < ctx_.size(); ++d) {
      void* ws = extra_ptr_[5 * d + 4];
      if (!ws) continue;
      TESSEL_CUDA_CHECK(cudaSetDevice(ctx_[d]->gpu));
      TESSEL_CUBLAS_CHECK(cublasSetStream(ctx_[d]->blas, ctx_[d]->compute));
      TESSEL_CUBLAS_CHECK(cublasSetWorkspace(ctx_[d]->blas, ws, static_cast<std::size_t>(kCublasWorkspaceBytes)));
    }
    return out;
  }

  // Task t's kernel issued `calls` times on each compute stream of the K logical devices
  // on its GPU at once (the same buffers: the values written race, the time does not
  // depend on them; a contraction on each device's own cuBLAS handle and workspace, so
  // only devices that have one take part): (time of K at once) / (K × alone), in
  // [1/K, 1]; 1 where K = 1.
  double concurrent_share(const Task& t, int calls, double alone) {
    const int gpu = gpu_of(t.device);
    std::vector<int> devices;
    std::vector<cudaStream_t> streams;
    for (std::size_t d = 0; d < ctx_.size(); ++d)
      if (gpu_of_[d] == gpu && (!t.contraction || extra_ptr_[5 * d + 4])) {
        devices.push_back(static_cast<int>(d));
        streams.push_back(ctx_[d]->compute);
      }
    const int k = static_cast<int>(streams.size());
    if (k < 2 || !(alone > 0)) return 1.0;
    const double together = gpu_seconds(gpu, streams, [&] {
                              for (int c = 0; c < calls; ++c)
                                for (std::size_t s = 0; s < streams.size(); ++s) launch_compute(t, streams[s], devices[s]);
                            }) / calls;
    return std::clamp(together / (k * alone), 1.0 / k, 1.0);
  }

  // The GPU's seconds for the work `body` issues to `streams` (all of GPU `gpu`), captured
  // into a graph first so that the host's rate of launches is not what is timed (small
  // kernels launch faster from a graph than the host issues them); timed from an event
  // before the graph's launch to one after it. Where the capture fails, the work issued
  // directly and timed the same way (the host's issue rate then bounds small kernels).
  double gpu_seconds(int gpu, const std::vector<cudaStream_t>& streams, const std::function<void()>& body) {
    TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
    cudaStream_t s0 = streams.front();
    std::vector<std::pair<int, cudaStream_t>> on_gpu;
    for (cudaStream_t st : streams) on_gpu.emplace_back(gpu, st);
    auto fork_join = [&](const std::function<void()>& work) {
      cudaEvent_t fork = res_.event(gpu, false);
      TESSEL_CUDA_CHECK(cudaEventRecord(fork, s0));
      for (std::size_t s = 1; s < streams.size(); ++s) TESSEL_CUDA_CHECK(cudaStreamWaitEvent(streams[s], fork, 0));
      work();
      join_into(gpu, s0, on_gpu);
    };
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    bool captured = false;
    if (cudaStreamBeginCapture(s0, cudaStreamCaptureModeRelaxed) == cudaSuccess) {
      try {
        fork_join(body);
        TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
        TESSEL_CUDA_CHECK(cudaStreamEndCapture(s0, &graph));
        TESSEL_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        captured = true;
      } catch (const Error&) {
        abandon_capture(gpu, s0);
      }
    }
    (void)cudaGetLastError();
    cudaEvent_t a = res_.event(gpu), b = res_.event(gpu);
    float ms = 0;
    if (captured) {
      TESSEL_CUDA_CHECK(cudaGraphLaunch(exec, s0));  // warm-up (uploads the graph)
      TESSEL_CUDA_CHECK(cudaEventRecord(a, s0));
      TESSEL_CUDA_CHECK(cudaGraphLaunch(exec, s0));
      TESSEL_CUDA_CHECK(cudaEventRecord(b, s0));
      const cudaError_t e = cudaEventSynchronize(b);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      TESSEL_CUDA_CHECK(e);
    } else {
      TESSEL_CUDA_CHECK(cudaEventRecord(a, s0));
      fork_join(body);
      TESSEL_CUDA_CHECK(cudaEventRecord(b, s0));
      TESSEL_CUDA_CHECK(cudaEventSynchronize(b));
    }
    TESSEL_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3;
  }

 private:
  int gpu_of(DeviceId d) const { return gpu_of_[d.index()]; }
  DeviceContext& ctx(DeviceId d) { return *ctx_[d.index()]; }
  void* ptr(BufferId b) const { return buffer_ptr_[b.index()]; }
  const std::string& gpu_name(int gpu) const { return s_.gpus[static_cast<std::size_t>(gpu)].name; }

  void check_dtypes() {
    for (const Task& t : tg_.tasks) {
      if (t.kind != TaskKind::compute || !t.contraction) continue;
      const Node& n = g_.node(t.node);
      const DType out = tg_.buffer(t.writes).dtype;
      for (BufferId r : t.reads)
        if (tg_.buffer(r).dtype != out)
          fail("cuda executor: contraction '", n.name, "' reads ", to_string(tg_.buffer(r).dtype), " and writes ",
               to_string(out), ": cuBLAS is called with one dtype for operands and result (unsupported mix)");
    }
  }

  // Buffers, GEMM scratch, move staging and cuBLAS workspace: offsets in one allocation
  // per GPU, each logical device's in a contiguous range of its own.
  void plan_memory() {
    const int n = tg_.num_devices;
    std::vector<std::vector<std::int32_t>> by_device(static_cast<std::size_t>(n));
    for (std::size_t b = 0; b < tg_.buffers.size(); ++b)
      by_device[tg_.buffers[b].device.index()].push_back(static_cast<std::int32_t>(b));
    std::vector<std::int64_t> scratch(static_cast<std::size_t>(n) * 3, 0), staging(static_cast<std::size_t>(n), 0);
    std::vector<bool> has_gemm(static_cast<std::size_t>(n), false);
    for (const Task& t : tg_.tasks) {
      if (t.kind == TaskKind::compute && t.contraction) {
        const Einsum e = g_.node(t.node).einsum.with_join_shape(t.src.shape());
        const GemmPlan p = plan_gemm(e);
        const std::int64_t eb = dtype_bytes(tg_.buffer(t.writes).dtype);
        const std::size_t d = t.device.index();
        has_gemm[d] = true;
        if (p.a_permute) scratch[3 * d] = std::max(scratch[3 * d], p.a_copy.elements * eb);
        if (p.b_permute) scratch[3 * d + 1] = std::max(scratch[3 * d + 1], p.b_copy.elements * eb);
        if (p.c_permute) scratch[3 * d + 2] = std::max(scratch[3 * d + 2], p.c_copy.elements * eb);
      } else if (t.kind == TaskKind::move && needs_staging(t)) {
        const std::size_t d = t.device.index();
        staging[d] = std::max(staging[d], t.src.elements() * dtype_bytes(tg_.buffer(t.reads[0]).dtype));
      }
    }
    buffer_ptr_.assign(tg_.buffers.size(), nullptr);
    std::map<int, std::int64_t> total;  // per GPU
    std::vector<std::int64_t> buffer_offset(tg_.buffers.size(), 0);
    std::vector<std::int64_t> extra_offset(static_cast<std::size_t>(n) * 5, -1);  // A, B, C, staging, workspace
    std::map<int, std::vector<int>> devices_on;
    // A memory-capped graph (core/memory_plan.h): each device's buffers at the offsets
    // plan_memory() gave them, in a range of the planned size (buffers whose ranges
    // overlap are never live at once); host buffers in page-locked host memory.
    planned_ = memory_planned(tg_);
    std::vector<std::int64_t> host_offset(tg_.buffers.size(), -1), host_bytes(static_cast<std::size_t>(n), 0);
    for (int d = 0; d < n; ++d) {
      const int gpu = gpu_of_[static_cast<std::size_t>(d)];
      devices_on[gpu].push_back(d);
      std::int64_t& off = total[gpu];
      if (planned_) {
        const std::int64_t base = off;
        for (std::int32_t b : by_device[static_cast<std::size_t>(d)]) {
          const Buffer& buf = tg_.buffers[static_cast<std::size_t>(b)];
          if (buf.host) {
            host_offset[static_cast<std::size_t>(b)] = host_bytes[static_cast<std::size_t>(d)];
            host_bytes[static_cast<std::size_t>(d)] += align_up(buf.bytes());
          } else if (buf.offset_bytes >= 0) {
            buffer_offset[static_cast<std::size_t>(b)] = base + buf.offset_bytes;
            off = std::max(off, base + buf.offset_bytes + buf.bytes());
          }
        }
        off = align_up(off);
        for (std::int32_t b : by_device[static_cast<std::size_t>(d)]) {  // unplaced (unused) buffers: apart
          const Buffer& buf = tg_.buffers[static_cast<std::size_t>(b)];
          if (buf.host || buf.offset_bytes >= 0) continue;
          buffer_offset[static_cast<std::size_t>(b)] = off;
          off += align_up(buf.bytes());
        }
      }
      for (std::int32_t b : planned_ ? std::vector<std::int32_t>{} : by_device[static_cast<std::size_t>(d)]) {
        buffer_offset[static_cast<std::size_t>(b)] = off;
        off += align_up(tg_.buffers[static_cast<std::size_t>(b)].bytes());
      }
      const std::int64_t extras[5] = {scratch[3 * d], scratch[3 * d + 1], scratch[3 * d + 2],
                                      staging[static_cast<std::size_t>(d)],
                                      has_gemm[static_cast<std::size_t>(d)] ? kCublasWorkspaceBytes : 0};
      for (int x = 0; x < 5; ++x) {
        if (extras[x] == 0) continue;
        extra_offset[static_cast<std::size_t>(5 * d + x)] = off;
        off += align_up(extras[x]);
      }
    }
    for (auto& [gpu, bytes] : total) {
      TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
      std::size_t free_bytes = 0, total_bytes = 0;
      TESSEL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
      auto oom = [&](const std::string& how) {
        std::string devs;
        for (int d : devices_on[gpu]) devs += (devs.empty() ? "" : ", ") + std::to_string(d);
        fail("cuda executor: out of device memory on GPU ", gpu, " (", gpu_name(gpu), ", device", 
             devices_on[gpu].size() > 1 ? "s " : " ", devs, "): the task graph's buffers need ", bytes, " bytes, ",
             free_bytes, " of ", total_bytes, " bytes are free", how);
      };
      if (static_cast<std::size_t>(bytes) > free_bytes) oom("");
      void* p = nullptr;
      const cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(bytes, kAlign)));
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        oom(" (cudaMalloc: " + cuda::describe(e) + ")");
      }
      res_.arena[gpu] = p;
    }
    std::vector<char*> host_arena(static_cast<std::size_t>(n), nullptr);
    for (int d = 0; d < n; ++d)
      if (host_bytes[static_cast<std::size_t>(d)] > 0)
        host_arena[static_cast<std::size_t>(d)] = static_cast<char*>(
            res_.host(host_bytes[static_cast<std::size_t>(d)], "device " + std::to_string(d) + "'s evicted buffers"));
    for (std::size_t b = 0; b < tg_.buffers.size(); ++b)
      buffer_ptr_[b] = tg_.buffers[b].host
                           ? host_arena[tg_.buffers[b].device.index()] + host_offset[b]
                           : static_cast<char*>(res_.arena.at(gpu_of(tg_.buffers[b].device))) + buffer_offset[b];
    // Output blocks leave device memory when their output task runs (the range is
    // reused after it): each gets page-locked room of its own.
    output_ptr_.assign(tg_.tasks.size(), nullptr);
    if (planned_) {
      std::int64_t out_bytes = 0;
      for (const Task& t : tg_.tasks)
        if (t.kind == TaskKind::output) out_bytes += align_up(tg_.buffer(t.reads[0]).bytes());
      char* out = out_bytes > 0 ? static_cast<char*>(res_.host(out_bytes, "the output blocks")) : nullptr;
      for (std::size_t i = 0; i < tg_.tasks.size(); ++i) {
        if (tg_.tasks[i].kind != TaskKind::output) continue;
        output_ptr_[i] = out;
        out += align_up(tg_.buffer(tg_.tasks[i].reads[0]).bytes());
      }
    }
    extra_ptr_.assign(static_cast<std::size_t>(n) * 5, nullptr);
    for (int d = 0; d < n; ++d)
      for (int x = 0; x < 5; ++x)
        if (extra_offset[static_cast<std::size_t>(5 * d + x)] >= 0)
          extra_ptr_[static_cast<std::size_t>(5 * d + x)] =
              static_cast<char*>(res_.arena.at(gpu_of_[static_cast<std::size_t>(d)])) +
              extra_offset[static_cast<std::size_t>(5 * d + x)];
    for (int d = 0; d < n; ++d) {
      void* ws = extra_ptr_[static_cast<std::size_t>(5 * d + 4)];
      if (!ws) continue;
      DeviceContext& c = *ctx_[static_cast<std::size_t>(d)];
      TESSEL_CUDA_CHECK(cudaSetDevice(c.gpu));
      // Stream first: cublasSetStream resets the handle to cuBLAS's default workspace pool
      // (cuBLAS documentation, cublasSetStream), which would drop the one set here.
      TESSEL_CUBLAS_CHECK(cublasSetStream(c.blas, c.compute));
      TESSEL_CUBLAS_CHECK(cublasSetWorkspace(c.blas, ws, static_cast<std::size_t>(kCublasWorkspaceBytes)));
    }
  }

  // A move whose region is neither one contiguous run nor a 2-D pitched copy between GPUs,
  // or any non-contiguous region under NCCL: packed into the source's staging first.
  bool needs_staging(const Task& t) const {
    const Buffer& src = tg_.buffer(t.reads[0]);
    const Buffer& dst = tg_.buffer(t.writes);
    const CopyParams c = cuda::collapse_copy(region_copy(src.shape, t.src, dst.shape, Rect::whole(dst.shape)));
    const bool contiguous = c.rank == 0 || (c.rank == 1 && c.src_stride[0] == 1 && c.dst_stride[0] == 1);
    if (s_.options.moves == MoveMethod::nccl) return !contiguous;
    const bool pitched = c.rank == 2 && c.src_stride[1] == 1 && c.dst_stride[1] == 1;
    return gpu_of(t.device) != gpu_of(t.dst_device) && !contiguous && !pitched;
  }

  KernelSource einsum_source(const Task& t) const {
    const Einsum e = g_.node(t.node).einsum.with_join_shape(t.src.shape());
    std::vector<DType> dts;
    for (BufferId r : t.reads) dts.push_back(tg_.buffer(r).dtype);
    Einsum out = e;
    out.dtype = tg_.buffer(t.writes).dtype;
    return cuda::einsum_kernel(out, dts);
  }

  // Every kernel compiled, and per compute task what its launch needs (kernel and grid,
  // or GEMM plan), before the clock: issuing a task generates no source.
  void compile_kernels() {
    task_kernel_.assign(tg_.tasks.size(), TaskKernel{});
    gemm_.clear();
    gemm_.resize(tg_.tasks.size());
    for (const Task& t : tg_.tasks) {
      const int gpu = gpu_of(t.device);
      if (t.kind == TaskKind::compute) {
        const Node& n = g_.node(t.node);
        const DType out = tg_.buffer(t.writes).dtype;
        if (n.kind == NodeKind::fill) {
          (void)s_.fill(out, gpu);
        } else if (t.contraction) {
          gemm_[static_cast<std::size_t>(&t - tg_.tasks.data())] =
              std::make_unique<GemmPlan>(plan_gemm(n.einsum.with_join_shape(t.src.shape())));
          (void)s_.copy(out, out, Agg::none, gpu);
        } else {
          const KernelSource ks = einsum_source(t);
          TaskKernel& k = task_kernel_[static_cast<std::size_t>(&t - tg_.tasks.data())];
          k.kernel = s_.kernel(ks, gpu);
          k.grid = static_cast<unsigned>(ks.grid_blocks);
          k.block = static_cast<unsigned>(ks.block_threads);
        }
      } else if (t.kind == TaskKind::touch) {
        (void)s_.copy(tg_.buffer(t.reads[0]).dtype, tg_.buffer(t.writes).dtype,
                      t.op == TouchOp::accumulate ? t.agg : Agg::none, gpu);
      } else if (t.kind == TaskKind::move) {
        const DType dt = tg_.buffer(t.reads[0]).dtype;
        (void)s_.copy(dt, tg_.buffer(t.writes).dtype, Agg::none, gpu);
        if (gpu_of(t.dst_device) != gpu && s_.options.moves == MoveMethod::copy) s_.enable_peer(gpu, gpu_of(t.dst_device));
      }
    }
    for (const Buffer& b : tg_.buffers) (void)s_.fill(b.dtype, gpu_of(b.device));
  }

  void launch_copy(const CopyParams& params, DType src_t, DType dst_t, Agg combine, const void* src, void* dst,
                   int gpu, cudaStream_t stream) {
    CopyParams p = cuda::collapse_copy(params);
    if (p.elements == 0) return;
    cudaKernel_t k = s_.copy(src_t, dst_t, combine, gpu);
    const std::int64_t blocks = std::min<std::int64_t>((p.elements + kCopyThreads - 1) / kCopyThreads, 1 << 20);
    void* args[] = {&src, &dst, &p};
    TESSEL_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(blocks)),
                                       dim3(kCopyThreads), args, 0, stream));
  }

  void launch_fill(const Buffer& b, void* out, const Fill& fill, const Rect& block, int gpu, cudaStream_t stream) {
    FillParams p;
    p.elements = elements(b.shape);
    p.rank = block.rank;
    p.lower_triangular = fill.kind == Fill::Kind::lower_triangular ? 1 : 0;
    for (int d = 0; d < block.rank; ++d) {
      p.size[d] = block.size[static_cast<std::size_t>(d)];
      p.offset[d] = block.offset[static_cast<std::size_t>(d)];
    }
    p.value = fill.value;
    p.value_off = fill.value_off;
    if (p.elements == 0) return;
    cudaKernel_t k = s_.fill(b.dtype, gpu);
    const std::int64_t blocks = std::min<std::int64_t>((p.elements + kCopyThreads - 1) / kCopyThreads, 1 << 20);
    void* args[] = {&out, &p};
    TESSEL_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(blocks)),
                                       dim3(kCopyThreads), args, 0, stream));
  }

  // The value a buffer starts with, when it is set: the aggregation's identity, 0.5 when
  // profiling, NaN when poisoning; false when left as it is.
  bool initial_fill(const Buffer& buf, Fill& f) const {
    if (buf.init != Agg::none) {
      f.value = agg_identity(buf.init);
    } else if (profiling_) {
      f.value = 0.5;  // kernels are profiled on finite data, never on NaN or zeros
    } else if (s_.options.poison) {
      f.value = std::numeric_limits<double>::quiet_NaN();
    } else {
      return false;
    }
    return true;
  }

  // Inputs copied in, buffers initialised, the GPUs idle afterwards. In a memory-capped
  // graph a device buffer is initialised right before its first writer instead (its
  // range holds other buffers before), and host buffers are never filled.
  void place() {
    for (std::size_t b = 0; b < tg_.buffers.size(); ++b) {
      const Buffer& buf = tg_.buffers[b];
      if (planned_ && (buf.host || !profiling_)) continue;
      Fill f;
      if (!initial_fill(buf, f)) continue;
      DeviceContext& c = ctx(buf.device);
      TESSEL_CUDA_CHECK(cudaSetDevice(c.gpu));
      launch_fill(buf, buffer_ptr_[b], f, Rect::whole(buf.shape), c.gpu, c.compute);
    }
    for (const Task& t : tg_.tasks) {
      if (t.kind != TaskKind::input) continue;
      const Buffer& b = tg_.buffer(t.writes);
      const Tensor& whole = inputs_.at(g_.node(t.node).name);
      Tensor block(b.shape, b.dtype);
      copy_region(whole, t.src, block, Rect::whole(b.shape));
      const std::vector<unsigned char> bytes = to_device_bytes(block.data, b.dtype);
      if (b.host) {  // an input block that starts in host memory (memory-capped graphs)
        std::memcpy(ptr(t.writes), bytes.data(), bytes.size());
        continue;
      }
      DeviceContext& c = ctx(b.device);
      TESSEL_CUDA_CHECK(cudaSetDevice(c.gpu));
      TESSEL_CUDA_CHECK(cudaMemcpyAsync(ptr(t.writes), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, c.compute));
      TESSEL_CUDA_CHECK(cudaStreamSynchronize(c.compute));  // `bytes` is freed next
    }
    for (int gpu : res_.gpus_used) {
      TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
      TESSEL_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }

  // `handle_device` >= 0: on that logical device's cuBLAS handle and workspace (the kernel
  // profile runs one kernel on several devices' streams at once; one workspace each).
  void launch_gemm(const Task& t, cudaStream_t stream, int handle_device = -1) {
    const Node& node = g_.node(t.node);
    const GemmPlan& p = *gemm_[static_cast<std::size_t>(&t - tg_.tasks.data())];
    const DType dt = tg_.buffer(t.writes).dtype;
    const std::size_t d = t.device.index();
    const int gpu = gpu_of(t.device);
    const void* a = ptr(t.reads[0]);
    const void* b = ptr(t.reads[1]);
    void* c = ptr(t.writes);
    if (p.a_permute) {
      launch_copy(p.a_copy, dt, dt, Agg::none, a, extra_ptr_[5 * d], gpu, stream);
      a = extra_ptr_[5 * d];
    }
    if (p.b_permute) {
      launch_copy(p.b_copy, dt, dt, Agg::none, b, extra_ptr_[5 * d + 1], gpu, stream);
      b = extra_ptr_[5 * d + 1];
    }
    void* c_gemm = p.c_permute ? extra_ptr_[5 * d + 2] : c;
    for (std::int64_t v : {p.m, p.n, p.k, p.nb})
      if (v > INT_MAX)
        fail("cuda executor: contraction '", node.name, "' block ", to_string(t.src), ": a GEMM dimension of ", v,
             " exceeds cuBLAS's int range");
    // Row-major C[m,n] = A[m,k] B[k,n] is column-major C^T = B^T A^T: cuBLAS's A is our
    // B and its B our A (a transposed operand flips its op and leading dimension).
    const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
    const cublasOperation_t op_b = p.b_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = p.a_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int ld_b = p.b_trans ? k : n;
    const int ld_a = p.a_trans ? m : k;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (dt == DType::f64) compute = CUBLAS_COMPUTE_64F;
    else if (dt == DType::f32 && s_.options.tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    const float one_f = 1, zero_f = 0;
    const double one_d = 1, zero_d = 0;
    const void* alpha = dt == DType::f64 ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
    const void* beta = dt == DType::f64 ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
    const std::size_t hd = handle_device >= 0 ? static_cast<std::size_t>(handle_device) : d;
    cublasHandle_t h = ctx_[hd]->blas;
    // The handle stays on the compute stream that plan_memory() set with the workspace:
    // setting a stream again would reset the workspace to cuBLAS's default pool, which
    // allocates on first use, inside the timed run.
    cudaStream_t current = nullptr;
    TESSEL_CUBLAS_CHECK(cublasGetStream(h, &current));
    if (current != stream) {
      TESSEL_CUBLAS_CHECK(cublasSetStream(h, stream));
      TESSEL_CUBLAS_CHECK(cublasSetWorkspace(h, extra_ptr_[5 * hd + 4], static_cast<std::size_t>(kCublasWorkspaceBytes)));
    }
    TESSEL_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, op_b, op_a, n, m, k, alpha, b, cuda_type(dt), ld_b,
                                                   static_cast<long long>(p.k) * p.n, a, cuda_type(dt), ld_a,
                                                   static_cast<long long>(p.m) * p.k, beta, c_gemm, cuda_type(dt), n,
                                                   static_cast<long long>(p.m) * p.n, static_cast<int>(p.nb), compute,
                                                   CUBLAS_GEMM_DEFAULT));
    if (p.c_permute) launch_copy(p.c_copy, dt, dt, Agg::none, c_gemm, c, gpu, stream);
  }

  void launch_compute(const Task& t, cudaStream_t stream, int handle_device = -1) {
    const Node& n = g_.node(t.node);
    const int gpu = gpu_of(t.device);
    TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
    if (n.kind == NodeKind::fill) {
      launch_fill(tg_.buffer(t.writes), ptr(t.writes), n.fill, t.src, gpu, stream);
      return;
    }
    if (t.contraction) {
      launch_gemm(t, stream, handle_device);
      return;
    }
    const TaskKernel& k = task_kernel_[static_cast<std::size_t>(&t - tg_.tasks.data())];
    std::vector<void*> ptrs;
    for (BufferId r : t.reads) ptrs.push_back(ptr(r));
    ptrs.push_back(ptr(t.writes));
    std::vector<void*> args;
    for (void*& p : ptrs) args.push_back(&p);
    TESSEL_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(k.kernel), dim3(k.grid), dim3(k.block),
                                       args.data(), 0, stream));
  }

  void launch_touch(const Task& t, cudaStream_t stream) {
    const Buffer& src = tg_.buffer(t.reads[0]);
    const Buffer& dst = tg_.buffer(t.writes);
    const int gpu = gpu_of(t.device);
    TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
    const std::int64_t src_off = region_offset(src.shape, t.src) * dtype_bytes(src.dtype);
    const std::int64_t dst_off = region_offset(dst.shape, t.dst) * dtype_bytes(dst.dtype);
    const char* from = static_cast<const char*>(ptr(t.reads[0])) + src_off;
    char* to = static_cast<char*>(ptr(t.writes)) + dst_off;
    const Agg combine = t.op == TouchOp::accumulate ? t.agg : Agg::none;
    const CopyParams p = region_copy(src.shape, t.src, dst.shape, t.dst);
    if (combine == Agg::none && src.dtype == dst.dtype && memcpy_region(p, src.dtype, from, to, stream)) return;
    launch_copy(p, src.dtype, dst.dtype, combine, from, to, gpu, stream);
  }

  // A copy that is one contiguous run or a 2-D pitched copy, as cudaMemcpy(2D)Async
  // (cudaMemcpyDefault: unified addressing finds the devices); false when it is neither.
  bool memcpy_region(const CopyParams& params, DType dt, const void* from, void* to, cudaStream_t stream) {
    const CopyParams c = cuda::collapse_copy(params);
    const std::size_t eb = static_cast<std::size_t>(dtype_bytes(dt));
    if (c.rank == 0 || (c.rank == 1 && c.src_stride[0] == 1 && c.dst_stride[0] == 1)) {
      TESSEL_CUDA_CHECK(cudaMemcpyAsync(to, from, static_cast<std::size_t>(c.elements) * eb, cudaMemcpyDefault, stream));
      return true;
    }
    if (c.rank == 2 && c.src_stride[1] == 1 && c.dst_stride[1] == 1) {
      TESSEL_CUDA_CHECK(cudaMemcpy2DAsync(to, static_cast<std::size_t>(c.dst_stride[0]) * eb, from,
                                          static_cast<std::size_t>(c.src_stride[0]) * eb,
                                          static_cast<std::size_t>(c.size[1]) * eb, static_cast<std::size_t>(c.size[0]),
                                          cudaMemcpyDefault, stream));
      return true;
    }
    return false;
  }

  // Issues a move; returns the stream its end event is recorded on.
  cudaStream_t launch_move(const Task& t, cudaStream_t stream) {
    const Buffer& src = tg_.buffer(t.reads[0]);
    const Buffer& dst = tg_.buffer(t.writes);
    const int gs = gpu_of(t.device), gd = gpu_of(t.dst_device);
    TESSEL_CUDA_CHECK(cudaSetDevice(gs));
    const char* from = static_cast<const char*>(ptr(t.reads[0])) + region_offset(src.shape, t.src) * dtype_bytes(src.dtype);
    void* to = ptr(t.writes);
    const CopyParams p = region_copy(src.shape, t.src, dst.shape, Rect::whole(dst.shape));
    const std::size_t bytes = static_cast<std::size_t>(t.src.elements() * dtype_bytes(src.dtype));
    const bool staged = needs_staging(t);
    const void* send = from;
    if (staged) {  // pack the region contiguously on the source device
      void* stage = extra_ptr_[5 * t.device.index() + 3];
      CopyParams pack = p;
      auto packed = row_major(dst.shape);
      for (int d = 0; d < pack.rank; ++d) pack.dst_stride[d] = packed[static_cast<std::size_t>(d)];
      launch_copy(pack, src.dtype, src.dtype, Agg::none, from, stage, gs, stream);
      send = stage;
    }
    if (s_.options.moves == MoveMethod::nccl) {
      cudaStream_t recv_stream = ctx(t.dst_device).comm;
      TESSEL_NCCL_CHECK(ncclGroupStart());
      TESSEL_NCCL_CHECK(ncclSend(send, bytes, ncclUint8, t.dst_device.value, (*comms_)[t.device.index()], stream));
      TESSEL_NCCL_CHECK(ncclRecv(to, bytes, ncclUint8, t.device.value, (*comms_)[t.dst_device.index()], recv_stream));
      TESSEL_NCCL_CHECK(ncclGroupEnd());
      return recv_stream;
    }
    if (staged) {
      TESSEL_CUDA_CHECK(cudaMemcpyPeerAsync(to, gd, send, gs, bytes, stream));
      return stream;
    }
    if (src.dtype == dst.dtype && memcpy_region(p, src.dtype, from, to, stream)) return stream;
    launch_copy(p, src.dtype, dst.dtype, Agg::none, from, to, gs, stream);  // same GPU (or peer access)
    return stream;
  }

  cudaStream_t stream_of(const Task& t) {
    switch (t.kind) {
      case TaskKind::touch: return ctx(t.device).copy;
      case TaskKind::evict: return ctx(t.device).host_out;  // as the simulator runs them (sim/offload.h)
      // A capped graph's output block leaves the device when its output task runs: a copy
      // to the host, beside the evicts (the simulator times it so); otherwise nothing runs.
      case TaskKind::output: return planned_ ? ctx(t.device).host_out : ctx(t.device).compute;
      case TaskKind::load: return ctx(t.device).host_in;
      case TaskKind::move: return ctx(t.device).comm;
      default: return ctx(t.device).compute;
    }
  }

  // Issue order: list scheduling by the CPU executor's priority (the longest estimated
  // path to the end first, ties by core's ready_tie: a move's stagger step, then the id,
  // core/ready_order.h, one level as on a machine of one host); under bsp by phase first.
  std::vector<std::int32_t> issue_order(bool bsp) const {
    const std::size_t n = tg_.tasks.size();
    auto succs = successors(tg_);
    std::vector<double> rank(n, 0.0);
    for (std::size_t i = n; i-- > 0;) {
      const Task& t = tg_.tasks[i];
      // Rough H100-class rates: only the order matters.
      const double cost = t.flops / (t.contraction ? 5e14 : 5e12) + static_cast<double>(t.bytes) / 2e12;
      double best = 0;
      for (TaskId s : succs[i]) best = std::max(best, rank[s.index()]);
      rank[i] = best + cost;
    }
    const std::vector<std::uint64_t> tie = ready_ties(tg_, StaggerLayout{tg_.num_devices});
    auto later = [&](std::int32_t a, std::int32_t b) {  // true when a is issued after b
      if (bsp) {
        const std::int32_t pa = bsp_phase(tg_.tasks[static_cast<std::size_t>(a)]);
        const std::int32_t pb = bsp_phase(tg_.tasks[static_cast<std::size_t>(b)]);
        if (pa != pb) return pa > pb;
      }
      if (rank[static_cast<std::size_t>(a)] != rank[static_cast<std::size_t>(b)])
        return rank[static_cast<std::size_t>(a)] < rank[static_cast<std::size_t>(b)];
      return tie[static_cast<std::size_t>(a)] > tie[static_cast<std::size_t>(b)];
    };
    std::priority_queue<std::int32_t, std::vector<std::int32_t>, decltype(later)> ready(later);
    std::vector<std::int32_t> left(n);
    for (std::size_t i = 0; i < n; ++i) {
      left[i] = static_cast<std::int32_t>(tg_.tasks[i].deps.size());
      if (left[i] == 0) ready.push(static_cast<std::int32_t>(i));
    }
    std::vector<std::int32_t> order;
    order.reserve(n);
    while (!ready.empty()) {
      const std::int32_t i = ready.top();
      ready.pop();
      order.push_back(i);
      for (TaskId s : succs[static_cast<std::size_t>(i)])
        if (--left[s.index()] == 0) ready.push(s.value);
    }
    return order;
  }

  // Memory-capped graphs: a device buffer that starts at a value (an accumulator's
  // identity, or NaN under poison) gets it on the stream of its first writer in issue
  // order, after that writer's dependencies (which include whatever used its range
  // before). The other writers of an accumulator are touches on the same copy stream,
  // issued after it.
  void fill_before_first_write(const Task& t, cudaStream_t stream, std::vector<char>& initialised) {
    if (!planned_ || profiling_ || !t.writes.valid() || initialised[t.writes.index()]) return;
    initialised[t.writes.index()] = 1;
    const Buffer& b = tg_.buffer(t.writes);
    Fill f;
    if (b.host || !initial_fill(b, f)) return;
    launch_fill(b, ptr(t.writes), f, Rect::whole(b.shape), gpu_of(t.device), stream);
  }

  // LaunchMode::graph: issue() under stream capture (relaxed mode: the run's events are
  // created during it), begun on GPU 0's first compute stream, which every other stream
  // joins through the clock's fork and rejoins at the end; then instantiated and
  // uploaded, all before the clock. A failure while capturing ends the capture (the
  // stream would otherwise stay in capture mode) and reports the failure.
  void capture(bool marks, cudaGraph_t* graph, cudaGraphExec_t* exec) {
    graph_ = true;
    marks_ = marks;
    origin_gpu_ = res_.gpus_used.front();
    origin_ = nullptr;
    for (DeviceContext* c : ctx_)
      if (c->gpu == origin_gpu_) {
        origin_ = c->compute;
        break;
      }
    TESSEL_CUDA_CHECK(cudaSetDevice(origin_gpu_));
    TESSEL_CUDA_CHECK(cudaStreamBeginCapture(origin_, cudaStreamCaptureModeRelaxed));
    try {
      issue();
      join_into(origin_gpu_, origin_, run_streams_);  // every stream rejoins the origin: the capture ends on it
    } catch (...) {
      abandon_capture(origin_gpu_, origin_);
      throw;
    }
    TESSEL_CUDA_CHECK(cudaSetDevice(origin_gpu_));
    TESSEL_CUDA_CHECK(cudaStreamEndCapture(origin_, graph));
    TESSEL_CUDA_CHECK(cudaGraphInstantiate(exec, *graph, 0));
    TESSEL_CUDA_CHECK(cudaGraphUpload(*exec, origin_));
    TESSEL_CUDA_CHECK(cudaStreamSynchronize(origin_));
  }

  // `hub` waits for everything issued so far to every other stream of `streams` (one
  // event each): the capture's rejoin, a bsp barrier's first half, the profile's join.
  void join_into(int hub_gpu, cudaStream_t hub, const std::vector<std::pair<int, cudaStream_t>>& streams) {
    for (const auto& [gpu, st] : streams) {
      if (st == hub) continue;
      cudaEvent_t e = res_.event(gpu, false);
      TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
      TESSEL_CUDA_CHECK(cudaEventRecord(e, st));
      TESSEL_CUDA_CHECK(cudaSetDevice(hub_gpu));
      TESSEL_CUDA_CHECK(cudaStreamWaitEvent(hub, e, 0));
    }
  }

  // A task's start and end marks: plain records when issued to streams; during a capture,
  // event record nodes (external events, readable after the graph ran).
  void record_mark(cudaEvent_t e, cudaStream_t st) {
    if (!marks_) return;  // an unmarked capture (CudaOptions::unmarked_run)
    if (graph_) {
      TESSEL_CUDA_CHECK(cudaEventRecordWithFlags(e, st, cudaEventRecordExternal));
    } else {
      TESSEL_CUDA_CHECK(cudaEventRecord(e, st));
    }
  }

  void issue() {
    const std::size_t n = tg_.tasks.size();
    const bool bsp = s_.options.policy == Policy::bsp;
    const std::vector<std::int32_t> order = issue_order(bsp);
    start_.assign(n, nullptr);
    end_.assign(n, nullptr);
    start_gpu_.assign(n, 0);
    end_gpu_.assign(n, 0);
    std::vector<cudaStream_t> end_stream(n, nullptr);
    std::vector<char> initialised(tg_.buffers.size(), 0);  // memory-capped graphs: filled before its first writer
    // Events are created before the clock: creating one is not part of a task. Under a
    // capture, each task also gets a plain event that its dependants wait for (an
    // external event node marks time; the capture's edges come from plain records).
    if (graph_) dep_.assign(n, nullptr);
    for (std::size_t i = 0; i < n; ++i) {
      const Task& t = tg_.tasks[i];
      start_gpu_[i] = gpu_of(t.device);
      end_gpu_[i] = t.kind == TaskKind::move && s_.options.moves == MoveMethod::nccl ? gpu_of(t.dst_device) : start_gpu_[i];
      start_[i] = res_.event(start_gpu_[i]);
      end_[i] = res_.event(end_gpu_[i]);
      if (graph_) dep_[i] = res_.event(end_gpu_[i], false);
    }
    const std::vector<cudaEvent_t>& done = graph_ ? dep_ : end_;  // what dependants wait for
    // Every stream of the run, for bsp barriers (and the capture's fork and join).
    std::vector<std::pair<int, cudaStream_t>>& streams = run_streams_;
    streams.clear();
    {
      std::set<cudaStream_t> seen;
      for (DeviceContext* c : ctx_)
        for (cudaStream_t s : {c->compute, c->copy, c->comm, c->host_in, c->host_out})
          if (seen.insert(s).second) streams.emplace_back(c->gpu, s);
    }
    // The clock: an event per GPU, recorded while every GPU is idle (under a capture: the
    // first node of the graph on each GPU, after the origin's fork).
    cudaEvent_t fork = nullptr;
    if (graph_) {
      fork = res_.event(origin_gpu_, false);
      TESSEL_CUDA_CHECK(cudaSetDevice(origin_gpu_));
      TESSEL_CUDA_CHECK(cudaEventRecord(fork, origin_));
    }
    std::map<int, cudaEvent_t> clock_dep;  // per GPU: what its streams wait for to start after the clock
    for (int gpu : res_.gpus_used) {
      cudaEvent_t e = res_.event(gpu);
      DeviceContext* first = nullptr;
      for (DeviceContext* c : ctx_)
        if (c->gpu == gpu) {
          first = c;
          break;
        }
      TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
      if (graph_ && first->compute != origin_) TESSEL_CUDA_CHECK(cudaStreamWaitEvent(first->compute, fork, 0));
      record_mark(e, first->compute);
      t0_[gpu] = e;
      clock_dep[gpu] = e;
      if (graph_) {
        cudaEvent_t d = res_.event(gpu, false);
        TESSEL_CUDA_CHECK(cudaEventRecord(d, first->compute));
        clock_dep[gpu] = d;
      }
    }
    // Every other stream starts after the clock: streams run independently, so a task on
    // another stream of the GPU could otherwise be timestamped before t0 (a negative start).
    for (auto& [gpu, s] : streams) {
      TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
      TESSEL_CUDA_CHECK(cudaStreamWaitEvent(s, clock_dep.at(gpu), 0));
    }
    std::int32_t phase = order.empty() ? 0 : bsp_phase(tg_.tasks[static_cast<std::size_t>(order.front())]);
    for (std::int32_t i : order) {
      const Task& t = tg_.tasks[static_cast<std::size_t>(i)];
      if (bsp && bsp_phase(t) != phase) {
        // A barrier: every stream waits for everything issued to every stream so far,
        // through one hub stream (the first) rather than every pair: 3k calls (or graph
        // edges) for k streams, not k^2.
        auto& [hub_gpu, hub] = streams.front();
        join_into(hub_gpu, hub, streams);
        cudaEvent_t all = res_.event(hub_gpu, false);
        TESSEL_CUDA_CHECK(cudaEventRecord(all, hub));
        for (auto& [gpu, s] : streams) {
          if (s == hub) continue;
          TESSEL_CUDA_CHECK(cudaSetDevice(gpu));
          TESSEL_CUDA_CHECK(cudaStreamWaitEvent(s, all, 0));
        }
        phase = bsp_phase(t);
      }
      cudaStream_t stream = stream_of(t);
      TESSEL_CUDA_CHECK(cudaSetDevice(start_gpu_[static_cast<std::size_t>(i)]));
      for (TaskId dep : t.deps)
        if (end_stream[dep.index()] != stream) TESSEL_CUDA_CHECK(cudaStreamWaitEvent(stream, done[dep.index()], 0));
      record_mark(start_[static_cast<std::size_t>(i)], stream);
      cudaStream_t last = stream;
      try {
        switch (t.kind) {
          case TaskKind::input:  // placed before the clock
            break;
          case TaskKind::output:  // copied out after the run; in a capped graph now (its range is reused)
            if (planned_)
              TESSEL_CUDA_CHECK(cudaMemcpyAsync(output_ptr_[static_cast<std::size_t>(i)], ptr(t.reads[0]),
                                                static_cast<std::size_t>(tg_.buffer(t.reads[0]).bytes()),
                                                cudaMemcpyDefault, stream));
            break;
          case TaskKind::compute:
            fill_before_first_write(t, stream, initialised);
            launch_compute(t, stream);
            break;
          case TaskKind::touch:
            fill_before_first_write(t, stream, initialised);
            launch_touch(t, stream);
            break;
          case TaskKind::move: last = launch_move(t, stream); break;
          case TaskKind::evict:  // whole buffers between the device and page-locked host memory
          case TaskKind::load:
            TESSEL_CUDA_CHECK(cudaMemcpyAsync(ptr(t.writes), ptr(t.reads[0]),
                                              static_cast<std::size_t>(tg_.buffer(t.reads[0]).bytes()),
                                              t.kind == TaskKind::evict ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
                                              stream));
            break;
          case TaskKind::collective: fail("a collective node; executors run the expanded form (moves and touches) only");
        }
      } catch (const Error& e) {
        fail("cuda executor: task ", i, " (", to_string(t.kind), " of node '", g_.node(t.node).name, "', block ",
             to_string(t.src), ") could not be issued: ", e.what());
      }
      TESSEL_CUDA_CHECK(cudaSetDevice(end_gpu_[static_cast<std::size_t>(i)]));
      record_mark(end_[static_cast<std::size_t>(i)], last);
      if (graph_) TESSEL_CUDA_CHECK(cudaEventRecord(dep_[static_cast<std::size_t>(i)], last));
      end_stream[static_cast<std::size_t>(i)] = last;
    }
  }

  CudaExecutor::State& s_;
  const Graph& g_;
  const TaskGraph& tg_;
  const TensorMap& inputs_;
  const bool profiling_;
  RunResources res_;
  std::vector<int> gpu_of_;
  std::vector<DeviceContext*> ctx_;
  std::vector<ncclComm_t>* comms_ = nullptr;
  struct TaskKernel {
    cudaKernel_t kernel = nullptr;
    unsigned grid = 1, block = 256;
  };
  std::vector<TaskKernel> task_kernel_;             // generic compute tasks
  std::vector<std::unique_ptr<GemmPlan>> gemm_;     // contraction tasks
  std::vector<void*> buffer_ptr_;
  bool planned_ = false;            // a memory-capped graph: buffers at planned offsets, host buffers
  std::vector<void*> output_ptr_;   // per output task of a capped graph: its block in page-locked memory
  std::vector<void*> extra_ptr_;  // per device: GEMM scratch A, B, C, move staging, cuBLAS workspace
  std::vector<cudaEvent_t> start_, end_;
  std::vector<cudaEvent_t> dep_;  // under a capture: per task, the plain event its dependants wait for
  std::vector<int> start_gpu_, end_gpu_;
  std::map<int, cudaEvent_t> t0_;
  bool graph_ = false;  // issue() runs under a stream capture (LaunchMode::graph)
  bool marks_ = true;   // per-task start and end marks recorded (false: CudaOptions::unmarked_run's capture)
  int origin_gpu_ = 0;
  cudaStream_t origin_ = nullptr;  // the capture's origin: GPU 0's first compute stream
  std::vector<std::pair<int, cudaStream_t>> run_streams_;  // every stream of the run
};

}  // namespace

CudaExecutor::CudaExecutor(CudaOptions options) : options_(options), state_(std::make_unique<State>()) {
  state_->options = options_;
  state_->gpus = cuda_devices();
  if (options_.gpus > static_cast<int>(state_->gpus.size()))
    fail("--gpus ", options_.gpus, ": only ", state_->gpus.size(), " GPU", state_->gpus.size() == 1 ? "" : "s",
         " visible (", state_->gpus.front().name, ")");
}

CudaExecutor::~CudaExecutor() = default;

RunResult CudaExecutor::run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) {
  check_inputs(g, inputs);
  tg.validate();
  // Collective nodes (LowerOptions::collectives) run as the moves and touches they stand
  // for (no NCCL collective call yet).
  if (has_lowered_collectives(tg)) return run(g, collectives_as_moves(tg), inputs);
  // Under bsp tasks are issued in phase order: a dependency on a later phase would wait
  // on an event not yet recorded (a no-op) and race.
  if (state_->options.policy == Policy::bsp) refuse_backward_bsp_dependencies(g, tg, "cuda executor");
  CudaRun run(*state_, g, tg, inputs, false);
  run.prepare();
  return run.execute();
}

KernelProfile CudaExecutor::profile_kernels(const Graph& g, const TaskGraph& tg, const TensorMap& inputs,
                                            int calls) {
  check_inputs(g, inputs);
  tg.validate();
  CudaRun run(*state_, g, tg, inputs, true);
  run.prepare();
  return run.profile(std::max(1, calls));
}

}  // namespace tessel::runtime
