#pragma once
// CudaExecutor: runs a TaskGraph on NVIDIA GPUs (library tessel_runtime_cuda, built when
// the CUDA toolkit is found). Validated on one H200 (2026-11-28, scripts/gpu-validate.sh:
// every built-in workload against the reference on 1, 2 and 4 virtual devices under both
// policies); several physical GPUs and NCCL moves have not run (see runtime/README.md).
//
// Logical devices. The task graph's n devices are spread over G physical GPUs (all
// visible ones by default, at most n): logical device d runs on GPU d·G/n. With G < n
// several *virtual devices* share one GPU — each with its own streams and its own range
// of that GPU's memory, but all sharing its SMs, memory bandwidth and copy engines, so a
// decomposition for 4 devices runs (and is timed) on one GPU without being 4x faster.
//
// Per logical device: a compute stream (input, compute and, uncapped, output tasks), a copy stream
// (touches), two host streams (evicts on host_out, loads on host_in: one per direction of
// the host link) and a communication stream (moves), the latter created with the priority
// CudaOptions::comm_priority asks for (cudaStreamCreateWithPriority), and a cuBLAS handle.
// Streams, handles, compiled kernels and NCCL communicators live as long as the executor.
//
// A run: one cudaMalloc per GPU for every buffer of its logical devices (plus GEMM
// scratch, move staging and cuBLAS workspace), freed at its end; the GPUs' memory is
// checked first (cudaMemGetInfo) and a run that does not fit fails naming the device,
// the bytes asked and the bytes free. Input blocks are copied in, accumulating buffers
// filled with their aggregation's identity and write-once buffers with NaN (an element no
// task writes shows up as NaN in the result), every generated kernel is compiled, and the
// GPUs are synchronised — all before the clock starts. Then every task is issued from
// one host thread without any host synchronisation: a dependency on another stream is a
// cudaStreamWaitEvent on the producer's end event, so the GPU runs whatever is ready
// (policy async). Tasks are issued in the order of the CPU executor's priority (longest
// estimated path to the end first); a stream runs its tasks in issue order. Under bsp the
// barriers of core::bsp_phase are events recorded on every stream at the end of a phase
// that every stream waits for before the next; a graph with a dependency on a later
// phase (a memory-capped graph typically has one) is refused, since waiting on an event
// not yet recorded is a no-op: it would race.
//
// Kernels: contractions through cuBLAS (cublasGemmStridedBatchedEx; an operand whose
// indices are not in [batch, M, K] / [batch, K, N] order, or transposed, is permuted into
// scratch first, as is an output not in [batch, M, N] order), f16 and bf16 with f32
// accumulation, f32 (or tf32 with CudaOptions::tf32), f64; every other einsum block one
// NVRTC-compiled kernel from runtime/cuda_codegen.h, cached by its source's key and the
// GPU's architecture; fills and touches generated kernels too (touches that are one or
// two contiguous runs as cudaMemcpyAsync / cudaMemcpy2DAsync). Moves: device-to-device
// copies between virtual devices of one GPU, cudaMemcpyPeerAsync between GPUs (regions
// that are not one or two contiguous runs are packed into staging first), or NCCL
// send/recv between GPUs of this process (MoveMethod::nccl: one GPU per logical device,
// since NCCL refuses two ranks on one GPU).
//
// Memory-capped graphs (core/memory_plan.h, --memory-cap; run on an H200 against the reference):
// each logical device's buffers sit at the offsets plan_memory() gave them in a range of
// the planned size (buffers whose ranges overlap are never live at once), host buffers
// in page-locked host memory (cudaMallocHost, one block per device, freed with the run);
// evicts and loads are whole-buffer cudaMemcpyAsync between the two, evicts on the
// device's host_out stream and loads on its host_in stream (one per direction of the host
// link, as the simulator runs them: sim/offload.h); an accumulator (or, under poison, any buffer a
// compute or touch writes) is filled on its first writer's stream right before it in
// issue order, not before the clock, since its range holds other buffers before; input
// blocks that start in host memory are copied into it before the clock; output tasks copy
// their block to page-locked memory when they run (the range is reused after), on the
// host_out stream beside the evicts, as the simulator times them (since 2026-11-29; on the
// compute stream when the H200 ran these graphs).
//
// Timing: a CUDA event pair around every task, read after the run and turned into the
// Timeline schema (seconds from an event recorded on each GPU when the clock starts).
// Under LaunchMode::graph (the default) the issue sequence is captured into a CUDA graph
// before the clock and the run is one graph launch: the per-task events become event
// record nodes (cudaEventRecordExternal), and dependencies between streams edges of the
// graph (plain events recorded and waited for during the capture).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/machine.h"
#include "runtime/cpu_executor.h"
#include "runtime/executor.h"

namespace tessel::runtime {

enum class MoveMethod : std::uint8_t { copy, nccl };
[[nodiscard]] MoveMethod parse_move_method(std::string_view s);
// How a run's tasks reach the GPU. graph (the default): the whole issue sequence below is
// captured into one CUDA graph before the clock (cudaStreamBeginCapture over every stream
// of the run, instantiated and uploaded), and the timed run is one cudaGraphLaunch, so
// that what is measured is the GPU working through the task graph, not the host calling
// the CUDA API task by task. stream: every task is issued to its stream while the clock
// runs, as a runtime without graphs would; on small kernels the span then measures the
// host's issue rate (measured on an H200, 2026-11-28: chain:size=1024 on 4 virtual
// devices, 36 tasks, 0.42 ms async and 1.3 ms bsp against about 0.1 ms of kernels).
enum class LaunchMode : std::uint8_t { graph, stream };
[[nodiscard]] LaunchMode parse_launch_mode(std::string_view s);
[[nodiscard]] std::string_view to_string(LaunchMode m);
[[nodiscard]] CommPriority parse_comm_priority(std::string_view s);

struct CudaOptions {
  Policy policy = Policy::async;
  // Physical GPUs to spread the logical devices over: 0 = every visible one (at most the
  // task graph's device count); 1 = all logical devices as virtual devices of GPU 0.
  int gpus = 0;
  MoveMethod moves = MoveMethod::copy;
  CommPriority comm_priority = CommPriority::normal;
  LaunchMode launch = LaunchMode::graph;
  // Under LaunchMode::graph: before the timed, marked run, run the graph once without the
  // per-task event nodes and time it whole (RunResult::unmarked_span_s; the buffers are
  // reset between the two). The marks cost: each task is two event record nodes besides
  // its kernels. Added after the first GPU validation: NOT YET RUN ON A GPU, hence off by
  // default (`--unmarked`; scripts/gpu-validate.sh turns it on).
  bool unmarked_run = false;
  bool tf32 = false;   // f32 contractions on tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)
  bool poison = true;  // fill write-once buffers with NaN before a run
};

struct CudaDeviceInfo {
  int gpu = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int sm_count = 0;
  std::int64_t memory_bytes = 0;
  double memory_clock_khz = 0;
  int memory_bus_bits = 0;
  std::int64_t l2_bytes = 0;
};

// The GPUs this process sees. Throws Error saying what was found when there is none
// (cudaGetDeviceCount's error, e.g. cudaErrorNoDevice or cudaErrorInsufficientDriver).
[[nodiscard]] std::vector<CudaDeviceInfo> cuda_devices();
// "13.0" (the driver's CUDA version; "none" without a driver) and the runtime's.
[[nodiscard]] std::string cuda_driver_version();
[[nodiscard]] std::string cuda_runtime_version();

class CudaExecutor final : public Executor {
 public:
  // Throws Error when no GPU is usable (see cuda_devices()).
  explicit CudaExecutor(CudaOptions options = {});
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;
  [[nodiscard]] std::string name() const override { return "cuda"; }
  [[nodiscard]] RunResult run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) override;

  // Kernel profile (the compute model `compare --compute-model profiled` uses): every
  // distinct compute kernel of `tg` (graph node × block shape) is issued `calls` times in
  // a row on its device's compute stream, after the run's inputs are placed, timed with
  // one event pair; per task the seconds per call of its kernel, -1 for other tasks.
  // Where K > 1 logical devices share the kernel's GPU (virtual devices), the kernel is
  // also issued on the K devices' compute streams at once (a contraction on each device's
  // own cuBLAS handle and workspace): its chip share is (time of K at once) / (K × time
  // alone), clamped to [1/K, 1] — 1 for a kernel that fills the GPU alone, 1/K for one
  // that K copies of run as fast as one. Both times are taken on the work captured into a
  // CUDA graph (so that small kernels are not timed at the host's launch rate), falling back
  // to direct issue where the capture fails. The graph timing and the per-device handles
  // were added after the H200 run of 2026-11-28, which issued directly on one handle:
  // not yet run on a GPU.
  [[nodiscard]] KernelProfile profile_kernels(const Graph& g, const TaskGraph& tg, const TensorMap& inputs,
                                              int calls = 20);

  [[nodiscard]] const CudaOptions& options() const { return options_; }

  struct State;

 private:
  CudaOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace tessel::runtime
