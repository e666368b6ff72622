// The ScalarOp → CUDA C++ generator (runtime/cuda_codegen.h): golden sources for a few
// joins, and the properties every generated kernel must have. Pure host code: runs on
// every machine. That NVRTC accepts the sources is tests/runtime/cuda/nvrtc_test.cc.
#include "runtime/cuda_codegen.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/einsum.h"
#include "core/error.h"
#include "core/scalar_op.h"

namespace tessel::runtime::cuda {
namespace {

std::string lines_of(std::string_view op, DType t = DType::f32) { return expr_source(ScalarOp::parse(op), t).lines; }

TEST(CudaCodegen, SiluGateJoinIsOneLinePerFunctionNode) {
  ExprSource e = expr_source(ScalarOp::parse("mul(silu(x0),x1)"), DType::f32);
  EXPECT_EQ(e.lines,
            "const float v0 = x0 / (((float)1.0) + expf(-x0));\n"
            "const float v1 = v0 * x1;\n");
  EXPECT_EQ(e.result, "v1");
}

TEST(CudaCodegen, SoftmaxExpStepUsesPreciseExpf) {
  EXPECT_EQ(lines_of("exp(sub(x0,x1))"),
            "const float v0 = x0 - x1;\n"
            "const float v1 = expf(v0);\n");
}

TEST(CudaCodegen, RmsNormScaleKeepsTheConstantAsTheCpuRoundsIt) {
  EXPECT_EQ(lines_of("mul(x0,rsqrt(add(x1,1e-06)))"),
            "const float v0 = x1 + ((float)1e-06);\n"
            "const float v1 = ((float)1.0) / sqrtf(v0);\n"
            "const float v2 = x0 * v1;\n");
}

TEST(CudaCodegen, SelectAndComparisonsGiveOneOrZero) {
  EXPECT_EQ(lines_of("select(gt(x0,0),x0,mul(x0,0.01))"),
            "const float v0 = x0 > ((float)0.0) ? ((float)1.0) : ((float)0.0);\n"
            "const float v1 = x0 * ((float)0.01);\n"
            "const float v2 = v0 != ((float)0.0) ? x0 : v1;\n");
}

TEST(CudaCodegen, F64UsesDoubleFunctionsAndLiterals) {
  EXPECT_EQ(lines_of("silu(x0)", DType::f64), "const double v0 = x0 / ((1.0) + exp(-x0));\n");
}

TEST(CudaCodegen, BareHoleIsStillANamedValue) {
  ExprSource e = expr_source(ScalarOp::parse("x0"), DType::f32);
  EXPECT_EQ(e.lines, "const float v0 = x0;\n");
  EXPECT_EQ(e.result, "v0");
}

TEST(CudaCodegen, InfiniteConstantsAreBitPatternsNotMacros) {
  // No header is included, so INFINITY does not exist in generated code.
  const ScalarOp op = ScalarOp::apply(ScalarFn::max, {ScalarOp::hole(0), ScalarOp::constant(-std::numeric_limits<double>::infinity())});
  EXPECT_EQ(expr_source(op, DType::f32).lines, "const float v0 = x0 > (-__int_as_float(0x7f800000)) ? x0 : (-__int_as_float(0x7f800000));\n");
}

TEST(CudaCodegen, ElementwiseKernelGolden) {
  Einsum e = Einsum::from_subscripts("ij,ij->ij", {{4, 8}, {4, 8}}, ScalarOp::parse("mul(silu(x0),x1)"));
  KernelSource k = einsum_kernel(e);
  EXPECT_EQ(k.mapping, ReduceMapping::none);
  EXPECT_EQ(k.grid_blocks, 1);
  EXPECT_EQ(k.block_threads, 256);
  const std::string body =
      "extern \"C\" __global__ void __launch_bounds__(256) " + k.name +
      "(const float* __restrict__ in0, const float* __restrict__ in1, float* __restrict__ out) {\n"
      "  const long long n = 32LL;\n"
      "  for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += (long long)gridDim.x * blockDim.x) {\n"
      "    long long r_o = o;\n"
      "    const long long j1 = r_o % 8LL; r_o /= 8LL;\n"
      "    const long long j0 = r_o;\n"
      "    (void)r_o;\n"
      "    const long long b0 = j0 * 8LL + j1;\n"
      "    const long long b1 = j0 * 8LL + j1;\n"
      "    const acc_t x0 = tsl_ld_f32(in0, b0);\n"
      "    const acc_t x1 = tsl_ld_f32(in1, b1);\n"
      "    const float v0 = x0 / (((float)1.0) + expf(-x0));\n"
      "    const float v1 = v0 * x1;\n"
      "    tsl_st_f32(out, o, v1);\n"
      "  }\n"
      "}\n";
  ASSERT_GE(k.source.size(), body.size());
  EXPECT_EQ(k.source.substr(k.source.size() - body.size()), body);
  EXPECT_EQ(k.source.find("#include"), std::string::npos);
}

TEST(CudaCodegen, RowReductionOverTheContiguousIndexIsOneWarpPerRow) {
  Einsum e = Einsum::from_subscripts("ij->i", {{4, 64}}, std::nullopt, Agg::max, DType::bf16);
  KernelSource k = einsum_kernel(e);
  EXPECT_EQ(k.mapping, ReduceMapping::warp);
  EXPECT_EQ(k.grid_blocks, 1);  // 4 rows, 8 warps per block
  EXPECT_NE(k.source.find("tsl_combine(acc_t acc, acc_t v) { return v > acc ? v : acc; }"), std::string::npos);
  EXPECT_NE(k.source.find("acc_t acc = (-__int_as_float(0x7f800000));"), std::string::npos);
  EXPECT_NE(k.source.find("const acc_t x0 = tsl_ld_bf16(in0, b0 + j1);"), std::string::npos);
  EXPECT_NE(k.source.find("__shfl_down_sync"), std::string::npos);
  EXPECT_NE(k.source.find("tsl_st_bf16(out, o, acc)"), std::string::npos);
}

TEST(CudaCodegen, ColumnReductionIsOneThreadPerOutputReadingNeighbours) {
  Einsum e = Einsum::from_subscripts("ij->j", {{64, 128}}, std::nullopt, Agg::sum);
  KernelSource k = einsum_kernel(e);
  EXPECT_EQ(k.mapping, ReduceMapping::thread);
  EXPECT_NE(k.source.find("for (long long a = 0; a < 64LL; ++a)"), std::string::npos);
  EXPECT_NE(k.source.find("tsl_ld_f32(in0, b0 + j1 * 128LL)"), std::string::npos);
}

TEST(CudaCodegen, LongReductionToFewOutputsIsOneBlockPerOutput) {
  Einsum e = Einsum::from_subscripts("ij->i", {{2, 1 << 16}}, std::nullopt, Agg::sum);
  KernelSource k = einsum_kernel(e);
  EXPECT_EQ(k.mapping, ReduceMapping::block);
  EXPECT_EQ(k.grid_blocks, 2);
  EXPECT_NE(k.source.find("__syncthreads()"), std::string::npos);
}

TEST(CudaCodegen, DiagonalReadsAddTheStrides) {
  Einsum e = Einsum::from_subscripts("ii->i", {{16, 16}});
  KernelSource k = einsum_kernel(e);
  EXPECT_NE(k.source.find("const long long b0 = j0 * 17LL;"), std::string::npos);
}

TEST(CudaCodegen, KeyAndNameDependOnShapeDtypeAndExpression) {
  Einsum a = Einsum::from_subscripts("ij->ij", {{4, 8}}, ScalarOp::parse("exp(x0)"));
  Einsum b = a.with_join_shape({4, 16});
  Einsum c = a;
  c.dtype = DType::f16;
  Einsum d = Einsum::from_subscripts("ij->ij", {{4, 8}}, ScalarOp::parse("log(x0)"));
  EXPECT_EQ(einsum_kernel(a).key, einsum_kernel(a).key);
  EXPECT_NE(einsum_kernel(a).key, einsum_kernel(b).key);
  EXPECT_NE(einsum_kernel(a).key, einsum_kernel(c).key);
  EXPECT_NE(einsum_kernel(a).key, einsum_kernel(d).key);
  EXPECT_NE(einsum_kernel(a).name, einsum_kernel(b).name);
  EXPECT_EQ(einsum_kernel(a).source, einsum_kernel(a).source);  // deterministic
}

TEST(CudaCodegen, OperandDtypesMustMatchTheOperands) {
  Einsum e = Einsum::from_subscripts("ij,ij->ij", {{4, 8}, {4, 8}});
  EXPECT_THROW((void)einsum_kernel(e, {DType::f32}), Error);
  KernelSource k = einsum_kernel(e, {DType::f16, DType::f64});
  EXPECT_NE(k.source.find("typedef double acc_t;"), std::string::npos);  // any f64 operand: double arithmetic
  EXPECT_NE(k.source.find("const unsigned short* __restrict__ in0"), std::string::npos);
}

TEST(CudaCodegen, CopyKernelAccumulatesWithTheAggregation) {
  KernelSource k = copy_kernel(DType::bf16, DType::bf16, Agg::sum);
  EXPECT_EQ(k.name, "tessel_copy_bf16_bf16_sum");
  EXPECT_NE(k.source.find("tsl_st_bf16(dst, dof, tsl_combine(tsl_ld_bf16(dst, dof), v));"), std::string::npos);
  KernelSource c = copy_kernel(DType::f32, DType::f32, Agg::none);
  EXPECT_EQ(c.source.find("tsl_combine"), std::string::npos);
}

TEST(CudaCodegen, CollapseMergesRunsContiguousInBothArrays) {
  // Rows 1..2 (all 8 columns) of a [4, 8] array into a [2, 8] array: one run of 16.
  CopyParams p;
  p.rank = 2;
  p.elements = 16;
  p.size[0] = 2, p.size[1] = 8;
  p.src_stride[0] = 8, p.src_stride[1] = 1;
  p.dst_stride[0] = 8, p.dst_stride[1] = 1;
  CopyParams c = collapse_copy(p);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.size[0], 16);
  EXPECT_EQ(c.src_stride[0], 1);
  // Columns 0..3 of the same array: two dims remain (a pitched 2-D copy).
  p.elements = 8;
  p.size[1] = 4;
  p.dst_stride[0] = 4;
  c = collapse_copy(p);
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.src_stride[0], 8);
  EXPECT_EQ(c.dst_stride[0], 4);
  // A column of one element per row: the size-1 dim is dropped, the rest is strided.
  p.elements = 2;
  p.size[1] = 1;
  c = collapse_copy(p);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.src_stride[0], 8);
}

TEST(CudaCodegen, NumberedLinesForErrorMessages) {
  EXPECT_EQ(numbered_lines("a\nb\n"), "   1  a\n   2  b\n");
}

}  // namespace
}  // namespace tessel::runtime::cuda
