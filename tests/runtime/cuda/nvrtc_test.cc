// NVRTC compiles every kernel the CUDA executor would generate for the built-in
// workloads — no GPU needed: the target architecture is named (sm_90, the H100/H200 the
// backend is meant for, and compute_90 PTX). Also the checked-call macros' messages.
// Label: cuda (needs the toolkit, not a device).
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/cli.h"

#include "core/error.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "planner/strategy.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/cuda_calibrate.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/cuda_codegen.h"

namespace tessel::runtime::cuda {
namespace {

// Every generated source of a task graph: one per distinct non-contraction compute block,
// fill and touch, keyed as the executor's cache keys them.
void collect(const Graph& g, const TaskGraph& tg, std::map<std::string, KernelSource>& out) {
  for (const Task& t : tg.tasks) {
    if (t.kind == TaskKind::compute) {
      const Node& n = g.node(t.node);
      const DType dt = tg.buffer(t.writes).dtype;
      if (n.kind == NodeKind::fill) {
        KernelSource k = fill_kernel(dt);
        out.emplace(k.key, k);
      } else if (t.contraction) {
        KernelSource k = copy_kernel(dt, dt, Agg::none);  // operand permutations
        out.emplace(k.key, k);
      } else {
        Einsum e = n.einsum.with_join_shape(t.src.shape());
        e.dtype = dt;
        std::vector<DType> dts;
        for (BufferId r : t.reads) dts.push_back(tg.buffer(r).dtype);
        KernelSource k = einsum_kernel(e, dts);
        out.emplace(k.key, k);
      }
    } else if (t.kind == TaskKind::touch || t.kind == TaskKind::move) {
      KernelSource k = copy_kernel(tg.buffer(t.reads[0]).dtype, tg.buffer(t.writes).dtype,
                                   t.kind == TaskKind::touch && t.op == TouchOp::accumulate ? t.agg : Agg::none);
      out.emplace(k.key, k);
    }
  }
}

TEST(Nvrtc, CompilesEveryGeneratedKernelOfTheBuiltInWorkloads) {
  std::map<std::string, KernelSource> sources;
  const std::vector<std::string> specs = {"chain", "chain-sum", "chain-sum:skewed=1", "ffn", "llama-block:model=tiny",
                                          "llama-block:model=tiny,seq=64"};
  // f16 differs from bf16 only in its load and store conversions, which
  // EveryScalarFunctionCompilesInEveryDtype covers; the block shapes come from split-largest
  // and EinDecomp on 1, 2 and 4 devices.
  for (const std::string& spec : specs)
    for (const char* dtype : {"f32", "bf16", "f64"}) {
      const Graph g = build_workload(spec + (spec.find(':') == std::string::npos ? ":" : ",") + "dtype=" + dtype);
      for (int devices : {1, 2, 4}) {
        collect(g, lower(g, split_largest(g, devices)), sources);
        for (const char* strategy : {"eindecomp"}) {
          planner::PlanOptions o;
          o.devices = devices;
          collect(g, lower(g, planner::plan(g, strategy, o).decomposition), sources);
        }
      }
    }
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    for (Agg a : {Agg::none, Agg::sum, Agg::max, Agg::min, Agg::prod}) {
      KernelSource k = copy_kernel(t, t, a);
      sources.emplace(k.key, k);
    }
    KernelSource f = fill_kernel(t);
    sources.emplace(f.key, f);
  }
  ASSERT_GT(sources.size(), 50u);
  // NVRTC is thread-safe: compile on every core.
  std::vector<const KernelSource*> all;
  for (const auto& [key, k] : sources) all.push_back(&k);
  std::vector<std::string> failures(all.size());
  std::vector<std::size_t> sizes(all.size(), 0);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < std::max(1u, std::thread::hardware_concurrency()); ++w)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < all.size();) {
        try {
          sizes[i] = compile(*all[i], "sm_90").image.size();
        } catch (const Error& e) {
          failures[i] = e.what();
        }
      }
    });
  for (std::thread& t : pool) t.join();
  int reductions = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(failures[i], "") << all[i]->key;
    EXPECT_GT(sizes[i], 100u) << all[i]->key;
    reductions += all[i]->mapping != ReduceMapping::none;
  }
  EXPECT_GT(reductions, 5);  // softmax max/sum, RMSNorm's mean of squares, ...
  std::printf("compiled %zu generated kernels for sm_90\n", sources.size());
}

TEST(Nvrtc, EmitsPtxForAComputeTarget) {
  KernelSource k = einsum_kernel(Einsum::from_subscripts("ij->i", {{8, 4096}}, std::nullopt, Agg::sum, DType::bf16));
  CompiledKernel c = compile(k, "compute_90");
  const std::string ptx(c.image.data());
  EXPECT_NE(ptx.find(".entry " + k.name), std::string::npos);
  EXPECT_NE(ptx.find("shfl.sync.down"), std::string::npos);
}

TEST(Nvrtc, EveryScalarFunctionCompilesInEveryDtype) {
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    for (const char* op : {"add(x0,x1)", "sub(x0,x1)", "div(x0,x1)", "max(x0,x1)", "min(x0,x1)", "pow(x0,x1)",
                           "lt(x0,x1)", "le(x0,x1)", "ge(x0,x1)", "eq(x0,x1)", "neg(x0)", "log(x0)", "sqrt(x0)",
                           "rsqrt(x0)", "relu(x0)", "gelu(x0)", "sigmoid(x0)", "tanh(x0)", "abs(x0)",
                           "select(x0,x1,2.5)"}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(to_string(t)));
      Einsum e = Einsum::from_subscripts("ij,ij->ij", {{3, 5}, {3, 5}}, ScalarOp::parse(op), std::nullopt, t);
      EXPECT_NO_THROW((void)compile(einsum_kernel(e), "sm_90"));
    }
  }
}

TEST(Nvrtc, CompileErrorPrintsTheGeneratedSourceAndTheLog) {
  KernelSource bad;
  bad.name = "tessel_broken";
  bad.source = "extern \"C\" __global__ void tessel_broken(float* out) {\n  out[0] = undeclared_name;\n}\n";
  try {
    (void)compile(bad, "sm_90");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tessel_broken"), std::string::npos) << m;
    EXPECT_NE(m.find("   2    out[0] = undeclared_name;"), std::string::npos) << m;  // numbered source
    EXPECT_NE(m.find("NVRTC log"), std::string::npos) << m;
    EXPECT_NE(m.find("undeclared_name\" is undefined"), std::string::npos) << m;  // NVRTC's own words
  }
}

TEST(Nvrtc, CachedCompilationCompilesOncePerKeyAndTarget) {
  const KernelSource k = copy_kernel(DType::f32, DType::f32, Agg::max);
  const CompiledKernel& a = compile_cached(k, "sm_90");
  const CompiledKernel& b = compile_cached(k, "sm_90");
  const CompiledKernel& c = compile_cached(k, "compute_90");
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  EXPECT_EQ(a.arch, "sm_90");
  EXPECT_EQ(c.arch, "compute_90");
}

TEST(Nvrtc, UnknownTargetIsAUserError) {
  EXPECT_THROW((void)compile(fill_kernel(DType::f32), "hopper"), Error);
}

TEST(CheckedCalls, FailureNamesTheCallFileLineAndStatus) {
  try {
    TESSEL_CUDA_CHECK(cudaErrorMemoryAllocation);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("CUDA call cudaErrorMemoryAllocation failed at"), std::string::npos) << m;
    EXPECT_NE(m.find("nvrtc_test.cc:"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaErrorMemoryAllocation"), std::string::npos) << m;
  }
  try {
    TESSEL_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuBLAS call CUBLAS_STATUS_NOT_SUPPORTED failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos);
  }
  EXPECT_THROW(TESSEL_NVRTC_CHECK(NVRTC_ERROR_COMPILATION), Error);
  EXPECT_THROW(TESSEL_NCCL_CHECK(ncclInvalidArgument), Error);
  EXPECT_NO_THROW(TESSEL_CUDA_CHECK(cudaSuccess));
  EXPECT_NO_THROW(TESSEL_NCCL_CHECK(ncclSuccess));
}

}  // namespace
}  // namespace tessel::runtime::cuda

namespace tessel::runtime {
namespace {

// Where no GPU is visible (this test's reason to exist: CI and the development
// machines), the executor refuses to start and says what cudaGetDeviceCount found.
TEST(CudaWithoutGpu, ExecutorSaysWhatCudaGetDeviceCountFound) {
  bool gpu = true;
  try {
    (void)cuda_devices();
  } catch (const Error&) {
    gpu = false;
  }
  if (gpu) GTEST_SKIP() << "a GPU is visible: this test covers machines without one";
  try {
    CudaExecutor exec;
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("no usable GPU"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaGetDeviceCount"), std::string::npos) << m;
  }
}

TEST(CudaWithoutGpu, CliBackendCudaFailsCleanly) {
  bool gpu = true;
  try {
    (void)cuda_devices();
  } catch (const Error&) {
    gpu = false;
  }
  if (gpu) GTEST_SKIP() << "a GPU is visible: this test covers machines without one";
  for (const char* cmd : {"run -w chain:size=64 -d 2 --backend cuda", "calibrate --backend cuda -o /dev/null",
                          "compare -w chain:size=64 -d 2 --backend cuda --repeat 1"}) {
    SCOPED_TRACE(cmd);
    const testing::CliResult r = testing::run_tessel(cmd);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("tessel: error:"), std::string::npos) << r.output();
    EXPECT_NE(r.err.find("no usable GPU"), std::string::npos) << r.output();
  }
}

}  // namespace
}  // namespace tessel::runtime

namespace tessel::runtime {
namespace {

CudaCalibration fake_calibration(int devices, int gpus) {
  CudaCalibration c;
  c.devices = devices;
  c.gpus = gpus;
  c.device_name = "test GPU";
  c.sm_count = 132;
  c.memory_capacity_bytes = 80'000'000'000;
  for (std::int64_t s : {1024, 4096, 8192}) {
    const double flops = 2.0 * static_cast<double>(s * s * s);
    c.gemm.push_back({"bf16", s, s, s, flops, flops / (s == 8192 ? 8e14 : 4e14), s == 8192 ? 8e14 : 4e14});
  }
  c.peak_bf16_flops_per_s = 8e14;
  c.peak_f16_flops_per_s = 8e14;
  c.peak_f32_flops_per_s = 5e13;
  c.peak_f64_flops_per_s = 5e13;
  c.memory_bytes_per_s = 3e12;
  c.same_gpu_copy_bytes_per_s = 1.4e12;
  c.peer_copy_bytes_per_s = gpus > 1 ? 3.5e11 : 0;
  c.task_overhead_s = 4e-6;
  c.dispatch_interval_s = 5e-6;
  c.barrier_latency_s = 7e-6;
  return c;
}

// The machine a CUDA calibration turns into (no GPU needed: the figures are made up).
TEST(CudaCalibrationMachine, VirtualDevicesShareTheirGpuAsOneChip) {
  const Machine m = machine_from_cuda_calibration(fake_calibration(4, 1));
  ASSERT_EQ(m.num_devices(), 4);
  const DeviceType& t = m.type_of(DeviceId(0));
  // The whole GPU's rates; the simulator shares the chip among the devices computing.
  EXPECT_DOUBLE_EQ(t.peak(DType::bf16), 8e14);
  EXPECT_DOUBLE_EQ(t.memory_bytes_per_s, 3e12);
  EXPECT_EQ(t.memory_capacity_bytes, 20'000'000'000);  // each its own range
  EXPECT_EQ(t.sm_count, 132);
  for (const Device& d : m.devices) EXPECT_EQ(d.chip, 0);
  EXPECT_DOUBLE_EQ(t.launch_latency_s, 4e-6);
  EXPECT_DOUBLE_EQ(t.dispatch_interval_s, 5e-6);  // the gate is the chip's: one front end
  EXPECT_DOUBLE_EQ(m.barrier_latency_s, 7e-6);
  EXPECT_NE(t.name.find("virtual device"), std::string::npos);
  EXPECT_FALSE(t.single_lane);  // separate compute, copy and comm streams
  // Every move between them crosses the one same-GPU copy link they share.
  const auto route = m.route(DeviceId(0), DeviceId(3));
  ASSERT_EQ(route.size(), 1u);
  EXPECT_DOUBLE_EQ(m.link(route[0]).bytes_per_s, 1.4e12);
  EXPECT_EQ(m.route(DeviceId(1), DeviceId(2)), route);
  EXPECT_EQ(machine_from_json(to_json(m)), m);
}

TEST(CudaCalibrationMachine, DevicesOnDifferentGpusTalkOverThePeerLink) {
  const Machine m = machine_from_cuda_calibration(fake_calibration(4, 2));
  EXPECT_DOUBLE_EQ(m.type_of(DeviceId(0)).peak(DType::bf16), 8e14);
  EXPECT_EQ(m.devices[0].chip, 0);
  EXPECT_EQ(m.devices[1].chip, 0);
  EXPECT_EQ(m.devices[2].chip, 1);
  const auto same = m.route(DeviceId(0), DeviceId(1));
  const auto across = m.route(DeviceId(1), DeviceId(2));
  ASSERT_EQ(across.size(), 1u);
  EXPECT_DOUBLE_EQ(m.link(across[0]).bytes_per_s, 3.5e11);
  EXPECT_NE(same, across);
  EXPECT_EQ(machine_from_json(to_json(m)), m);
}

TEST(CudaCalibrationMachine, TheSimulatorAcceptsIt) {
  const auto path = std::filesystem::temp_directory_path() / ("tessel_cuda_machine_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream f(path);
    f << to_json(machine_from_cuda_calibration(fake_calibration(4, 1))).dump(2);
  }
  const testing::CliResult r = testing::run_tessel("simulate -w ffn -d 4 -m " + path.string() + " --json");
  std::filesystem::remove(path);
  EXPECT_EQ(r.status, 0) << r.output();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["makespan_s"].get<double>(), 0);
}

TEST(CudaCalibrationMachine, NothingMeasuredIsAnError) {
  EXPECT_THROW((void)machine_from_cuda_calibration(CudaCalibration{}), Error);
}

}  // namespace
}  // namespace tessel::runtime
