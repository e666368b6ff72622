#include "runtime/cuda_codegen.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace tessel::runtime::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxGrid = std::int64_t{1} << 20;  // grid-stride loops cover the rest
// A reduction this long over this few outputs gets a whole thread block per output.
constexpr std::int64_t kBlockReduceMin = 2048;
constexpr std::int64_t kBlockReduceMaxOutputs = 256;

std::string_view tag(DType t) { return to_string(t); }

std::string_view storage_type(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return "unsigned short";
    case DType::f32: return "float";
    case DType::f64: return "double";
  }
  return "float";
}

std::string fnv_hex(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// A constant as a literal of the compute type; the CPU kernels round the double to T
// (static_cast), and so does the cast here.
std::string literal(double v, DType compute) {
  const bool dbl = compute == DType::f64;
  if (std::isnan(v)) return dbl ? "__longlong_as_double(0x7ff8000000000000LL)" : "__int_as_float(0x7fc00000)";
  if (std::isinf(v)) {
    std::string inf = dbl ? "__longlong_as_double(0x7ff0000000000000LL)" : "__int_as_float(0x7f800000)";
    return v < 0 ? "(-" + inf + ")" : inf;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return dbl ? "(" + s + ")" : "((float)" + s + ")";
}

std::string identity_literal(Agg a, DType compute) { return literal(agg_identity(a), compute); }

// Loads, stores and the combine function, for a kernel computing in `acc_t`.
std::string preamble(DType compute) {
  std::ostringstream os;
  os << "typedef " << (compute == DType::f64 ? "double" : "float") << " acc_t;\n"
     << "__device__ __forceinline__ acc_t tsl_ld_f32(const float* p, long long i) { return (acc_t)p[i]; }\n"
     << "__device__ __forceinline__ acc_t tsl_ld_f64(const double* p, long long i) { return (acc_t)p[i]; }\n"
     << "__device__ __forceinline__ acc_t tsl_ld_f16(const unsigned short* p, long long i) {\n"
     << "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(p[i])); return (acc_t)f;\n}\n"
     << "__device__ __forceinline__ acc_t tsl_ld_bf16(const unsigned short* p, long long i) {\n"
     << "  return (acc_t)__uint_as_float(((unsigned int)p[i]) << 16);\n}\n"
     << "__device__ __forceinline__ void tsl_st_f32(float* p, long long i, acc_t v) { p[i] = (float)v; }\n"
     << "__device__ __forceinline__ void tsl_st_f64(double* p, long long i, acc_t v) { p[i] = (double)v; }\n"
     << "__device__ __forceinline__ void tsl_st_f16(unsigned short* p, long long i, acc_t v) {\n"
     << "  unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"((float)v)); p[i] = h;\n}\n"
     << "__device__ __forceinline__ void tsl_st_bf16(unsigned short* p, long long i, acc_t v) {\n"
     << "  unsigned short h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"((float)v)); p[i] = h;\n}\n";
  return os.str();
}

// acc combined with v, as core's agg_combine_as: a NaN is passed over by max and min.
std::string combine_function(Agg a) {
  std::string body;
  switch (a) {
    case Agg::sum: body = "acc + v"; break;
    case Agg::prod: body = "acc * v"; break;
    case Agg::max: body = "v > acc ? v : acc"; break;
    case Agg::min: body = "v < acc ? v : acc"; break;
    case Agg::none: body = "v"; break;
  }
  return "__device__ __forceinline__ acc_t tsl_combine(acc_t acc, acc_t v) { return " + body + "; }\n";
}

// `const long long jD = ...;` for the dims `dims` (join ids, slowest first) of sizes
// `sizes` decomposing the linear index `var` (row-major over those dims).
std::string decompose(const std::string& var, const std::vector<int>& dims, const Shape& join_shape,
                      const std::string& indent) {
  std::ostringstream os;
  if (dims.empty()) return "";
  os << indent << "long long r_" << var << " = " << var << ";\n";
  for (std::size_t k = dims.size(); k-- > 0;) {
    const int j = dims[k];
    const std::int64_t s = join_shape[static_cast<std::size_t>(j)];
    if (k == 0) {
      os << indent << "const long long j" << j << " = r_" << var << ";\n";
    } else if (s == 1) {
      os << indent << "const long long j" << j << " = 0;\n";
    } else {
      os << indent << "const long long j" << j << " = r_" << var << " % " << s << "LL; r_" << var << " /= " << s
         << "LL;\n";
    }
  }
  os << indent << "(void)r_" << var << ";\n";
  return os.str();
}

// Σ_j coeff_j · j over the join ids in `dims` with a non-zero coefficient; "0" if none.
std::string linear(const std::vector<int>& dims, const std::array<std::int64_t, kMaxRank>& stride) {
  std::string s;
  for (int j : dims) {
    const std::int64_t st = stride[static_cast<std::size_t>(j)];
    if (st == 0) continue;
    if (!s.empty()) s += " + ";
    s.append("j").append(std::to_string(j));
    if (st != 1) s.append(" * ").append(std::to_string(st)).append("LL");
  }
  return s.empty() ? "0LL" : s;
}

std::vector<std::int64_t> row_major_strides(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d)
    st[static_cast<std::size_t>(d)] = st[static_cast<std::size_t>(d) + 1] * s[static_cast<std::size_t>(d) + 1];
  return st;
}

std::string launch_loop_comment(ReduceMapping m) {
  switch (m) {
    case ReduceMapping::none: return "one thread per output element";
    case ReduceMapping::thread: return "one thread per output element, looping over the aggregated indices";
    case ReduceMapping::warp: return "one warp per output element";
    case ReduceMapping::block: return "one thread block per output element";
  }
  return "";
}

}  // namespace

DType compute_dtype(DType storage) { return storage == DType::f64 ? DType::f64 : DType::f32; }

ExprSource expr_source(const ScalarOp& op, DType compute) {
  const std::string T = compute == DType::f64 ? "double" : "float";
  const bool dbl = compute == DType::f64;
  auto fn = [&](const char* f) { return dbl ? std::string(f) : std::string(f) + "f"; };
  auto lit = [&](double v) { return literal(v, compute); };
  std::ostringstream os;
  std::vector<std::string> stack;
  int next = 0;
  for (const auto& in : op.program()) {
    if (in.fn == ScalarFn::hole) {
      stack.push_back("x" + std::to_string(in.hole));
      continue;
    }
    if (in.fn == ScalarFn::constant) {
      stack.push_back(lit(in.value));
      continue;
    }
    const int a = arity(in.fn);
    if (static_cast<int>(stack.size()) < a) fail("scalar op '", op.to_string(), "': malformed program");
    std::vector<std::string> x(stack.end() - a, stack.end());
    stack.resize(stack.size() - static_cast<std::size_t>(a));
    const std::string zero = lit(0), one = lit(1);
    std::string e;
    switch (in.fn) {
      case ScalarFn::add: e = x[0] + " + " + x[1]; break;
      case ScalarFn::sub: e = x[0] + " - " + x[1]; break;
      case ScalarFn::mul: e = x[0] + " * " + x[1]; break;
      case ScalarFn::div: e = x[0] + " / " + x[1]; break;
      case ScalarFn::max: e = x[0] + " > " + x[1] + " ? " + x[0] + " : " + x[1]; break;
      case ScalarFn::min: e = x[0] + " < " + x[1] + " ? " + x[0] + " : " + x[1]; break;
      case ScalarFn::pow: e = fn("pow") + "(" + x[0] + ", " + x[1] + ")"; break;
      case ScalarFn::lt: e = x[0] + " < " + x[1] + " ? " + one + " : " + zero; break;
      case ScalarFn::le: e = x[0] + " <= " + x[1] + " ? " + one + " : " + zero; break;
      case ScalarFn::gt: e = x[0] + " > " + x[1] + " ? " + one + " : " + zero; break;
      case ScalarFn::ge: e = x[0] + " >= " + x[1] + " ? " + one + " : " + zero; break;
      case ScalarFn::eq: e = x[0] + " == " + x[1] + " ? " + one + " : " + zero; break;
      case ScalarFn::neg: e = "-" + x[0]; break;
      case ScalarFn::exp: e = fn("exp") + "(" + x[0] + ")"; break;
      case ScalarFn::log: e = fn("log") + "(" + x[0] + ")"; break;
      case ScalarFn::sqrt: e = fn("sqrt") + "(" + x[0] + ")"; break;
      case ScalarFn::rsqrt: e = one + " / " + fn("sqrt") + "(" + x[0] + ")"; break;
      case ScalarFn::relu: e = x[0] + " > " + zero + " ? " + x[0] + " : " + zero; break;
      case ScalarFn::silu: e = x[0] + " / (" + one + " + " + fn("exp") + "(-" + x[0] + "))"; break;
      case ScalarFn::gelu:
        e = lit(0.5) + " * " + x[0] + " * (" + one + " + " + fn("erf") + "(" + x[0] + " / " + fn("sqrt") + "(" +
            lit(2) + ")))";
        break;
      case ScalarFn::sigmoid: e = one + " / (" + one + " + " + fn("exp") + "(-" + x[0] + "))"; break;
      case ScalarFn::tanh: e = fn("tanh") + "(" + x[0] + ")"; break;
      case ScalarFn::abs: e = fn("fabs") + "(" + x[0] + ")"; break;
      case ScalarFn::select: e = x[0] + " != " + zero + " ? " + x[1] + " : " + x[2]; break;
      case ScalarFn::hole:
      case ScalarFn::constant: break;
    }
    const std::string v = "v" + std::to_string(next++);
    os << "const " << T << " " << v << " = " << e << ";\n";
    stack.push_back(v);
  }
  if (stack.size() != 1) fail("scalar op '", op.to_string(), "': malformed program");
  // A bare hole or constant as the whole expression: still one named value.
  if (next == 0) {
    os << "const " << T << " v0 = " << stack.back() << ";\n";
    return {os.str(), "v0"};
  }
  return {os.str(), stack.back()};
}

KernelSource einsum_kernel(const Einsum& e, const std::vector<DType>& operand_dtypes_in) {
  const int nin = static_cast<int>(e.inputs.size());
  std::vector<DType> in_dt = operand_dtypes_in;
  if (in_dt.empty()) in_dt.assign(static_cast<std::size_t>(nin), e.dtype);
  if (static_cast<int>(in_dt.size()) != nin)
    fail("einsum kernel for ", e.to_string(), ": ", in_dt.size(), " operand dtypes for ", nin, " operands");
  DType compute = compute_dtype(e.dtype);
  for (DType t : in_dt)
    if (t == DType::f64) compute = DType::f64;

  const int rank = e.rank();
  std::vector<int> out_dims, agg_dims;
  for (int j = 0; j < rank; ++j) (j < e.out_rank ? out_dims : agg_dims).push_back(j);
  std::int64_t out_n = 1, red_n = 1;
  for (int j : out_dims) out_n *= e.join_shape[static_cast<std::size_t>(j)];
  for (int j : agg_dims) red_n *= e.join_shape[static_cast<std::size_t>(j)];
  // Operand strides per join index (a repeated index reads a diagonal: strides add up).
  std::vector<std::array<std::int64_t, kMaxRank>> stride(static_cast<std::size_t>(nin));
  for (int i = 0; i < nin; ++i) {
    stride[static_cast<std::size_t>(i)].fill(0);
    auto st = row_major_strides(e.input_shape(i));
    for (std::size_t k = 0; k < e.inputs[static_cast<std::size_t>(i)].size(); ++k)
      stride[static_cast<std::size_t>(i)][static_cast<std::size_t>(e.inputs[static_cast<std::size_t>(i)][k])] += st[k];
  }
  // The mapping: with an aggregation, where does the index most operands walk
  // contiguously lie? Aggregated: lanes of a warp (or a block) share an output and read
  // neighbours; an output index: one thread per output, neighbouring threads read
  // neighbours.
  ReduceMapping mapping = ReduceMapping::none;
  if (e.aggregates()) {
    auto unit = [&](int j) {
      int k = 0;
      for (int i = 0; i < nin; ++i) k += stride[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] == 1;
      return k;
    };
    int inner = rank - 1;
    for (int j = rank - 2; j >= 0; --j)
      if (unit(j) > unit(inner)) inner = j;
    if (inner < e.out_rank && out_n > 1) {
      mapping = ReduceMapping::thread;
    } else if (red_n >= kBlockReduceMin && out_n <= kBlockReduceMaxOutputs) {
      mapping = ReduceMapping::block;
    } else {
      mapping = ReduceMapping::warp;
    }
  }

  std::ostringstream key;
  key << e.subscripts() << "|" << e.join.to_string() << "|" << to_string(e.agg) << "|" << to_string(e.join_shape)
      << "|" << tag(e.dtype);
  for (DType t : in_dt) key << "," << tag(t);
  KernelSource ks;
  ks.key = key.str();
  ks.name = "tessel_einsum_" + fnv_hex(ks.key);
  ks.mapping = mapping;
  ks.block_threads = kThreads;
  switch (mapping) {
    case ReduceMapping::none:
    case ReduceMapping::thread: ks.grid_blocks = std::min(kMaxGrid, (out_n + kThreads - 1) / kThreads); break;
    case ReduceMapping::warp: ks.grid_blocks = std::min(kMaxGrid, (out_n + kThreads / 32 - 1) / (kThreads / 32)); break;
    case ReduceMapping::block: ks.grid_blocks = std::min(kMaxGrid, out_n); break;
  }
  ks.grid_blocks = std::max<std::int64_t>(1, ks.grid_blocks);

  const ExprSource expr = expr_source(e.join, compute);
  std::ostringstream os;
  os << "// " << e.to_string() << " (" << tag(e.dtype) << "): " << launch_loop_comment(mapping) << "\n";
  os << preamble(compute);
  if (e.aggregates()) os << combine_function(e.agg);
  os << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ") " << ks.name << "(";
  for (int i = 0; i < nin; ++i)
    os << "const " << storage_type(in_dt[static_cast<std::size_t>(i)]) << "* __restrict__ in" << i << ", ";
  os << storage_type(e.dtype) << "* __restrict__ out) {\n";
  os << "  const long long n = " << out_n << "LL;\n";

  // Per operand: the part of its offset that depends on output indices (base) and on
  // aggregated ones; then the join function and the value `v`.
  auto bases = [&](const std::string& indent) {
    std::string s;
    for (int i = 0; i < nin; ++i)
      s += indent + "const long long b" + std::to_string(i) + " = " + linear(out_dims, stride[static_cast<std::size_t>(i)]) + ";\n";
    return s;
  };
  auto evaluate = [&](const std::string& indent) {
    std::string s;
    for (int i = 0; i < nin; ++i) {
      const std::string agg_part = linear(agg_dims, stride[static_cast<std::size_t>(i)]);
      s += indent + "const acc_t x" + std::to_string(i) + " = tsl_ld_" + std::string(tag(in_dt[static_cast<std::size_t>(i)])) +
           "(in" + std::to_string(i) + ", b" + std::to_string(i) + (agg_part == "0LL" ? "" : " + " + agg_part) + ");\n";
    }
    std::istringstream lines(expr.lines);
    std::string line;
    while (std::getline(lines, line)) s += indent + line + "\n";
    return s;
  };
  const std::string store = "tsl_st_" + std::string(tag(e.dtype));
  const std::string ident = e.aggregates() ? identity_literal(e.agg, compute) : "";
  switch (mapping) {
    case ReduceMapping::none:
      os << "  for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += (long long)gridDim.x * blockDim.x) {\n";
      os << decompose("o", out_dims, e.join_shape, "    ") << bases("    ") << evaluate("    ");
      os << "    " << store << "(out, o, " << expr.result << ");\n  }\n";
      break;
    case ReduceMapping::thread:
      os << "  for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += (long long)gridDim.x * blockDim.x) {\n";
      os << decompose("o", out_dims, e.join_shape, "    ") << bases("    ");
      os << "    acc_t acc = " << ident << ";\n";
      os << "    for (long long a = 0; a < " << red_n << "LL; ++a) {\n";
      os << decompose("a", agg_dims, e.join_shape, "      ") << evaluate("      ");
      os << "      acc = tsl_combine(acc, " << expr.result << ");\n    }\n";
      os << "    " << store << "(out, o, acc);\n  }\n";
      break;
    case ReduceMapping::warp:
      os << "  const int lane = threadIdx.x & 31;\n";
      os << "  const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;\n";
      os << "  for (long long o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; o < n; o += warps) {\n";
      os << decompose("o", out_dims, e.join_shape, "    ") << bases("    ");
      os << "    acc_t acc = " << ident << ";\n";
      os << "    for (long long a = lane; a < " << red_n << "LL; a += 32) {\n";
      os << decompose("a", agg_dims, e.join_shape, "      ") << evaluate("      ");
      os << "      acc = tsl_combine(acc, " << expr.result << ");\n    }\n";
      os << "    for (int s = 16; s > 0; s >>= 1) acc = tsl_combine(acc, __shfl_down_sync(0xffffffffu, acc, s));\n";
      os << "    if (lane == 0) " << store << "(out, o, acc);\n  }\n";
      break;
    case ReduceMapping::block:
      os << "  __shared__ acc_t part[" << kThreads / 32 << "];\n";
      os << "  const int lane = threadIdx.x & 31;\n";
      os << "  for (long long o = blockIdx.x; o < n; o += gridDim.x) {\n";
      os << decompose("o", out_dims, e.join_shape, "    ") << bases("    ");
      os << "    acc_t acc = " << ident << ";\n";
      os << "    for (long long a = threadIdx.x; a < " << red_n << "LL; a += blockDim.x) {\n";
      os << decompose("a", agg_dims, e.join_shape, "      ") << evaluate("      ");
      os << "      acc = tsl_combine(acc, " << expr.result << ");\n    }\n";
      os << "    for (int s = 16; s > 0; s >>= 1) acc = tsl_combine(acc, __shfl_down_sync(0xffffffffu, acc, s));\n";
      os << "    if (lane == 0) part[threadIdx.x >> 5] = acc;\n";
      os << "    __syncthreads();\n";
      os << "    if (threadIdx.x < 32) {\n";
      os << "      acc = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : " << ident << ";\n";
      os << "      for (int s = 16; s > 0; s >>= 1) acc = tsl_combine(acc, __shfl_down_sync(0xffffffffu, acc, s));\n";
      os << "      if (threadIdx.x == 0) " << store << "(out, o, acc);\n    }\n";
      os << "    __syncthreads();\n  }\n";
      break;
  }
  os << "}\n";
  ks.source = os.str();
  return ks;
}

namespace {
const char* kCopyParams =
    "struct tsl_copy_params { long long elements; int rank; int pad; long long size[8]; long long src_stride[8]; "
    "long long dst_stride[8]; };\n";
const char* kFillParams =
    "struct tsl_fill_params { long long elements; int rank; int lower_triangular; long long size[8]; "
    "long long offset[8]; double value; double value_off; };\n";
}  // namespace

KernelSource copy_kernel(DType src, DType dst, Agg combine) {
  static_assert(sizeof(CopyParams) == 8 + 8 + 3 * 8 * kMaxRank, "CopyParams must match tsl_copy_params");
  static_assert(kMaxRank == 8, "the generated parameter structs hold 8 dimensions");
  const DType compute = src == DType::f64 || dst == DType::f64 ? DType::f64 : DType::f32;
  KernelSource ks;
  ks.key = "copy|" + std::string(tag(src)) + "|" + std::string(tag(dst)) + "|" + std::string(to_string(combine));
  ks.name = "tessel_copy_" + std::string(tag(src)) + "_" + std::string(tag(dst)) + "_" + std::string(to_string(combine));
  ks.grid_blocks = 0;
  std::ostringstream os;
  os << "// strided " << (combine == Agg::none ? "copy" : "accumulation (" + std::string(to_string(combine)) + ")")
     << " of a sub-rectangle, " << tag(src) << " -> " << tag(dst) << "\n";
  os << preamble(compute);
  if (combine != Agg::none) os << combine_function(combine);
  os << kCopyParams;
  os << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ") " << ks.name << "(const "
     << storage_type(src) << "* __restrict__ src, " << storage_type(dst) << "* __restrict__ dst, tsl_copy_params p) {\n"
     << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.elements; i += (long long)gridDim.x * blockDim.x) {\n"
     << "    long long r = i, so = 0, dof = 0;\n"
     << "    if (p.rank > 0) {\n"
     << "      for (int d = p.rank - 1; d > 0; --d) {\n"
     << "        const long long c = r % p.size[d];\n"
     << "        r /= p.size[d];\n"
     << "        so += c * p.src_stride[d];\n"
     << "        dof += c * p.dst_stride[d];\n"
     << "      }\n"
     << "      so += r * p.src_stride[0];\n"
     << "      dof += r * p.dst_stride[0];\n"
     << "    }\n"
     << "    const acc_t v = tsl_ld_" << tag(src) << "(src, so);\n";
  if (combine == Agg::none) {
    os << "    tsl_st_" << tag(dst) << "(dst, dof, v);\n";
  } else {
    os << "    tsl_st_" << tag(dst) << "(dst, dof, tsl_combine(tsl_ld_" << tag(dst) << "(dst, dof), v));\n";
  }
  os << "  }\n}\n";
  ks.source = os.str();
  return ks;
}

KernelSource fill_kernel(DType dtype) {
  static_assert(sizeof(FillParams) == 8 + 8 + 2 * 8 * kMaxRank + 16, "FillParams must match tsl_fill_params");
  const DType compute = compute_dtype(dtype);
  KernelSource ks;
  ks.key = "fill|" + std::string(tag(dtype));
  ks.name = "tessel_fill_" + std::string(tag(dtype));
  ks.grid_blocks = 0;
  std::ostringstream os;
  os << "// a fill block: a constant, or value on and below the diagonal of the last two dims and value_off above\n";
  os << preamble(compute) << kFillParams;
  os << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ") " << ks.name << "(" << storage_type(dtype)
     << "* __restrict__ out, tsl_fill_params p) {\n"
     << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.elements; i += (long long)gridDim.x * blockDim.x) {\n"
     << "    acc_t v = (acc_t)p.value;\n"
     << "    if (p.lower_triangular && p.rank >= 2) {\n"
     << "      const long long col = i % p.size[p.rank - 1];\n"
     << "      const long long row = (i / p.size[p.rank - 1]) % p.size[p.rank - 2];\n"
     << "      if (p.offset[p.rank - 1] + col > p.offset[p.rank - 2] + row) v = (acc_t)p.value_off;\n"
     << "    }\n"
     << "    tsl_st_" << tag(dtype) << "(out, i, v);\n"
     << "  }\n}\n";
  ks.source = os.str();
  return ks;
}

CopyParams collapse_copy(const CopyParams& p) {
  CopyParams out;
  out.elements = p.elements;
  for (int d = 0; d < p.rank; ++d) {
    if (p.size[d] == 1) continue;
    if (out.rank > 0) {
      const int last = out.rank - 1;
      // The previous kept dim steps exactly over this one in both arrays: merge.
      if (out.src_stride[last] == p.src_stride[d] * p.size[d] && out.dst_stride[last] == p.dst_stride[d] * p.size[d]) {
        out.size[last] *= p.size[d];
        out.src_stride[last] = p.src_stride[d];
        out.dst_stride[last] = p.dst_stride[d];
        continue;
      }
    }
    out.size[out.rank] = p.size[d];
    out.src_stride[out.rank] = p.src_stride[d];
    out.dst_stride[out.rank] = p.dst_stride[d];
    ++out.rank;
  }
  return out;
}

std::string numbered_lines(const std::string& source) {
  std::ostringstream os;
  std::istringstream in(source);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%4d  ", ++n);
    os << buf << line << "\n";
  }
  return os.str();
}

}  // namespace tessel::runtime::cuda
