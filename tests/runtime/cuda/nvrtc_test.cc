// NVRTC compiles every kernel the CUDA executor would generate for the built-in
// workloads — no GPU needed: the target architecture is named (sm_90, the H100/H200 the
// backend is meant for, and compute_90 PTX). Also the checked-call macros' messages.
// Label: cuda (needs the toolkit, not a device).
#include <gtest/gtest.h>

#include <set>

#include "tests/support/cli.h"

#include "core/error.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "planner/strategy.h"
#include "runtime/cuda/check.h"
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
  for (const std::string& spec : specs)
    for (const char* dtype : {"f32", "bf16", "f16", "f64"}) {
      const Graph g = build_workload(spec + (spec.find(':') == std::string::npos ? ":" : ",") + "dtype=" + dtype);
      for (int devices : {1, 2, 4}) {
        collect(g, lower(g, split_largest(g, devices)), sources);
        for (const char* strategy : {"eindecomp", "megatron", "data-parallel"}) {
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
  int reductions = 0;
  for (const auto& [key, k] : sources) {
    SCOPED_TRACE(key);
    CompiledKernel c = compile(k, "sm_90");
    EXPECT_GT(c.image.size(), 100u);
    reductions += k.mapping != ReduceMapping::none;
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
