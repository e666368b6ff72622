#include "runtime/cpu_kernels.h"

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>
#include <cassert>
#include <cmath>

#include <Eigen/Core>

#include "core/error.h"

namespace tessel::runtime::cpu {
namespace {

constexpr int kChunk = 256;

std::vector<std::int64_t> strides_of(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

// dst[.. in order `order` ..] = src with index list `idx` (join ids of src's dims).
// `order` is a permutation of idx; copies src into that order.
template <class T>
const T* permuted(const T* src, const std::vector<int>& idx, const std::vector<int>& order, const Shape& join_shape,
                  std::vector<T>& buf) {
  if (idx == order) return src;
  const int r = static_cast<int>(idx.size());
  Shape src_shape(r);
  for (int k = 0; k < r; ++k) src_shape[k] = join_shape[idx[k]];
  auto sst = strides_of(src_shape);
  // stride in src of each dst dim
  std::array<std::int64_t, kMaxRank> st{}, sz{};
  for (int d = 0; d < r; ++d) {
    int pos = static_cast<int>(std::find(idx.begin(), idx.end(), order[d]) - idx.begin());
    st[d] = sst[pos];
    sz[d] = src_shape[pos];
  }
  std::int64_t n = elements(src_shape);
  buf.resize(static_cast<std::size_t>(n));
  std::array<std::int64_t, kMaxRank> c{};
  std::int64_t off = 0;
  const std::int64_t inner = sz[r - 1], inner_st = st[r - 1];
  for (std::int64_t i = 0; i < n; i += inner) {
    T* o = buf.data() + i;
    for (std::int64_t x = 0; x < inner; ++x) o[x] = src[off + x * inner_st];
    int d = r - 2;
    for (; d >= 0; --d) {
      ++c[d];
      off += st[d];
      if (c[d] < sz[d]) break;
      off -= st[d] * c[d];
      c[d] = 0;
    }
  }
  return buf.data();
}

template <class T>
void gemm_path(const Einsum& e, const std::vector<const T*>& ops, T* out, Scratch<T>& s) {
  const auto& i0 = e.inputs[0];
  const auto& i1 = e.inputs[1];
  const GemmDims dims = gemm_dims(e);
  const std::vector<int>&B = dims.batch, &M = dims.m, &N = dims.n, &K = dims.k;
  const std::int64_t nb = dims.batch_size, m = dims.m_size, n = dims.n_size, k = dims.k_size;
  std::vector<int> a_order = B, b_order = B, c_order = B;
  a_order.insert(a_order.end(), M.begin(), M.end());
  a_order.insert(a_order.end(), K.begin(), K.end());
  b_order.insert(b_order.end(), K.begin(), K.end());
  b_order.insert(b_order.end(), N.begin(), N.end());
  c_order.insert(c_order.end(), M.begin(), M.end());
  c_order.insert(c_order.end(), N.begin(), N.end());
  const T* a = permuted(ops[0], i0, a_order, e.join_shape, s.a);
  const T* b = permuted(ops[1], i1, b_order, e.join_shape, s.b);
  std::vector<int> out_idx(e.out_rank);
  for (int j = 0; j < e.out_rank; ++j) out_idx[j] = j;
  const bool direct = c_order == out_idx;
  T* c = out;
  if (!direct) {
    s.c.resize(static_cast<std::size_t>(nb * m * n));
    c = s.c.data();
  }
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (std::int64_t i = 0; i < nb; ++i) {
    Eigen::Map<const Mat> A(a + i * m * k, m, k);
    Eigen::Map<const Mat> Bm(b + i * k * n, k, n);
    Eigen::Map<Mat> C(c + i * m * n, m, n);
    C.noalias() = A * Bm;
  }
  if (!direct) {
    // c is laid out in c_order; write it out in join order 0..out_rank-1.
    std::vector<T> tmp;
    const T* p = permuted<T>(c, c_order, out_idx, e.join_shape, tmp);
    std::copy(p, p + nb * m * n, out);
  }
}

template <class T>
T apply(ScalarFn fn, T x, T y, T z) {
  switch (fn) {
    case ScalarFn::add: return x + y;
    case ScalarFn::sub: return x - y;
    case ScalarFn::mul: return x * y;
    case ScalarFn::div: return x / y;
    case ScalarFn::max: return x > y ? x : y;
    case ScalarFn::min: return x < y ? x : y;
    case ScalarFn::pow: return std::pow(x, y);
    case ScalarFn::lt: return x < y ? T(1) : T(0);
    case ScalarFn::le: return x <= y ? T(1) : T(0);
    case ScalarFn::gt: return x > y ? T(1) : T(0);
    case ScalarFn::ge: return x >= y ? T(1) : T(0);
    case ScalarFn::eq: return x == y ? T(1) : T(0);
    case ScalarFn::neg: return -x;
    case ScalarFn::exp: return std::exp(x);
    case ScalarFn::log: return std::log(x);
    case ScalarFn::sqrt: return std::sqrt(x);
    case ScalarFn::rsqrt: return T(1) / std::sqrt(x);
    case ScalarFn::relu: return x > T(0) ? x : T(0);
    case ScalarFn::silu: return x / (T(1) + std::exp(-x));
    case ScalarFn::gelu: return T(0.5) * x * (T(1) + std::erf(x / std::sqrt(T(2))));
    case ScalarFn::sigmoid: return T(1) / (T(1) + std::exp(-x));
    case ScalarFn::tanh: return std::tanh(x);
    case ScalarFn::abs: return std::fabs(x);
    case ScalarFn::select: return x != T(0) ? y : z;
    default: return T(0);
  }
}

template <class T>
Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> arr(T* p, int n) {
  return Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(p, n);
}

// acc combined with v[0..n) under `agg`, in kLanes independent partial results so that
// the loop vectorises (a single running sum cannot be reordered by the compiler). The
// order of combination is fixed, so results stay bit-for-bit repeatable.
template <class T>
T reduce_chunk(Agg agg, T acc, const T* v, int n) {
  constexpr int kLanes = 16;
  if (n < kLanes || agg == Agg::none) {
    for (int x = 0; x < n; ++x) acc = agg_combine_as<T>(agg, acc, v[x]);
    return acc;
  }
  // max and min propagate NaN (numpy's max / min): one vectorised pass looks for a NaN
  // first; without one, the lanes take plain comparisons (which vectorise), and an acc
  // that is already NaN (from an earlier chunk) stays NaN, the comparison with it false.
  if (agg == Agg::max || agg == Agg::min) {
    using Mark = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
    Mark seen = 0;
    for (int x = 0; x < n; ++x) seen |= static_cast<Mark>(v[x] != v[x]);
    if (seen) return std::numeric_limits<T>::quiet_NaN();
  }
  // Every lane starts at the identity.
  std::array<T, kLanes> part;
  part.fill(static_cast<T>(agg_identity(agg)));
  int x = 0;
  for (; x + kLanes <= n; x += kLanes)
    switch (agg) {
      case Agg::sum: for (int l = 0; l < kLanes; ++l) part[l] += v[x + l]; break;
      case Agg::prod: for (int l = 0; l < kLanes; ++l) part[l] *= v[x + l]; break;
      case Agg::max: for (int l = 0; l < kLanes; ++l) part[l] = v[x + l] > part[l] ? v[x + l] : part[l]; break;
      case Agg::min: for (int l = 0; l < kLanes; ++l) part[l] = v[x + l] < part[l] ? v[x + l] : part[l]; break;
      case Agg::none: break;
    }
  for (; x < n; ++x) part[x % kLanes] = agg_combine_as<T>(agg, part[x % kLanes], v[x]);
  switch (agg) {  // part[] holds no NaN here: plain comparisons, a NaN acc stays
    case Agg::max: for (int l = 0; l < kLanes; ++l) acc = part[l] > acc ? part[l] : acc; break;
    case Agg::min: for (int l = 0; l < kLanes; ++l) acc = part[l] < acc ? part[l] : acc; break;
    default: for (int l = 0; l < kLanes; ++l) acc = agg_combine_as<T>(agg, acc, part[l]);
  }
  return acc;
}

// Evaluates the join program on n <= kChunk elements; operand i is read at
// base[i] + x * step[i]. Result in the top stack slot, returned.
template <class T>
const T* eval_chunk(const ScalarOp& op, const T* const* base, const std::int64_t* step, int n, std::vector<T>& stack) {
  const auto& prog = op.program();
  // One chunk per value the program can hold at once (at most ScalarOp::kMaxStack), not
  // per instruction: an einsum of many operands has a long program but a shallow stack.
  const std::size_t slots = std::min<std::size_t>(prog.size(), ScalarOp::kMaxStack) + 1;
  if (stack.size() < slots * kChunk) stack.resize(slots * kChunk);
  int top = 0;
  for (const auto& in : prog) {
    T* dst = stack.data() + static_cast<std::size_t>(top) * kChunk;
    if (in.fn == ScalarFn::hole) {
      const T* p = base[in.hole];
      const std::int64_t st = step[in.hole];
      if (st == 1) {
        std::copy(p, p + n, dst);
      } else if (st == 0) {  // broadcast along the inner loop
        std::fill(dst, dst + n, *p);
      } else {
        for (int x = 0; x < n; ++x) dst[x] = p[x * st];
      }
      ++top;
      continue;
    }
    if (in.fn == ScalarFn::constant) {
      std::fill(dst, dst + n, static_cast<T>(in.value));
      ++top;
      continue;
    }
    const int a = arity(in.fn);
    T* x0 = stack.data() + static_cast<std::size_t>(top - a) * kChunk;
    const T* x1 = a > 1 ? x0 + kChunk : x0;
    const T* x2 = a > 2 ? x0 + 2 * kChunk : x0;
    switch (in.fn) {  // the common ones as plain loops the compiler vectorises
      case ScalarFn::add: for (int x = 0; x < n; ++x) x0[x] = x0[x] + x1[x]; break;
      case ScalarFn::sub: for (int x = 0; x < n; ++x) x0[x] = x0[x] - x1[x]; break;
      case ScalarFn::mul: for (int x = 0; x < n; ++x) x0[x] = x0[x] * x1[x]; break;
      case ScalarFn::div: for (int x = 0; x < n; ++x) x0[x] = x0[x] / x1[x]; break;
      // NaN in either argument gives NaN (numpy's maximum / minimum), as apply_fn.
      case ScalarFn::max: for (int x = 0; x < n; ++x) x0[x] = ((x1[x] > x0[x]) | (x1[x] != x1[x])) ? x1[x] : x0[x]; break;
      case ScalarFn::min: for (int x = 0; x < n; ++x) x0[x] = ((x1[x] < x0[x]) | (x1[x] != x1[x])) ? x1[x] : x0[x]; break;
      case ScalarFn::neg: for (int x = 0; x < n; ++x) x0[x] = -x0[x]; break;
      case ScalarFn::relu: for (int x = 0; x < n; ++x) x0[x] = x0[x] > T(0) ? x0[x] : T(0); break;
      // Transcendentals through Eigen's SIMD implementations (exp, log, tanh, sqrt).
      case ScalarFn::exp: arr(x0, n) = arr(x0, n).exp(); break;
      case ScalarFn::log: arr(x0, n) = arr(x0, n).log(); break;
      case ScalarFn::sqrt: arr(x0, n) = arr(x0, n).sqrt(); break;
      case ScalarFn::rsqrt: arr(x0, n) = arr(x0, n).rsqrt(); break;
      case ScalarFn::tanh: arr(x0, n) = arr(x0, n).tanh(); break;
      case ScalarFn::silu: arr(x0, n) = arr(x0, n) / (T(1) + (-arr(x0, n)).exp()); break;
      case ScalarFn::sigmoid: arr(x0, n) = T(1) / (T(1) + (-arr(x0, n)).exp()); break;
      default:
        for (int x = 0; x < n; ++x) x0[x] = apply<T>(in.fn, x0[x], x1[x], x2[x]);
    }
    top -= a - 1;
  }
  return stack.data();
}

template <class T>
void generic_path(const Einsum& e, const std::vector<const T*>& ops, T* out, Scratch<T>& s) {
  const int rank = e.rank();
  const int nin = static_cast<int>(e.inputs.size());
  const std::int64_t out_n = elements(e.out_shape());
  const bool agg = e.aggregates();
  std::fill(out, out + out_n, static_cast<T>(agg ? agg_identity(e.agg) : 0.0));
  if (rank == 0) {
    std::vector<double> v(nin);  // per operand: any count, not bounded by kMaxRank
    for (int i = 0; i < nin; ++i) v[i] = ops[i][0];
    out[0] = static_cast<T>(e.join.eval(v.data()));
    return;
  }
  std::vector<std::array<std::int64_t, kMaxRank>> stride(nin);
  for (int i = 0; i < nin; ++i) {
    stride[i].fill(0);
    auto st = strides_of(e.input_shape(i));
    for (std::size_t k = 0; k < e.inputs[i].size(); ++k) stride[i][e.inputs[i][k]] += st[k];
  }
  std::array<std::int64_t, kMaxRank> out_stride{};
  {
    auto st = strides_of(e.out_shape());
    for (int j = 0; j < e.out_rank; ++j) out_stride[j] = st[j];
  }
  // The inner loop runs over the join index that the most arrays (operands and the
  // output) walk contiguously, so that a reduction over rows ("ij->j") streams along
  // rows and accumulates elementwise instead of gathering columns; ties keep the last
  // join index (the aggregated one, for reductions). The other indices form an
  // odometer in join order.
  auto unit_strides = [&](int j) {
    int k = out_stride[j] == 1;
    for (int i = 0; i < nin; ++i) k += stride[i][j] == 1;
    return k;
  };
  int last = rank - 1;
  for (int j = rank - 2; j >= 0; --j)
    if (e.join_shape[j] >= 16 && unit_strides(j) > unit_strides(last)) last = j;
  std::array<int, kMaxRank> outer{};  // the odometer's indices, slowest first
  int n_outer = 0;
  for (int j = 0; j < rank; ++j)
    if (j != last) outer[n_outer++] = j;
  const std::int64_t inner = e.join_shape[last];
  const std::int64_t os = out_stride[last];  // 0 when the inner index is aggregated
  // Per-operand pointers and steps, sized by the operand count (kMaxRank bounds the join
  // rank, not the number of operands); kept in the worker's scratch across calls.
  std::vector<const T*>& base = s.base;
  std::vector<std::int64_t>& step = s.step;
  base.assign(static_cast<std::size_t>(nin), nullptr);
  step.assign(static_cast<std::size_t>(nin), 0);
  for (int i = 0; i < nin; ++i) step[i] = stride[i][last];
  std::array<std::int64_t, kMaxRank> c{};
  std::vector<std::int64_t> off(nin, 0);
  std::int64_t out_off = 0;
  for (;;) {
    for (std::int64_t x0 = 0; x0 < inner; x0 += kChunk) {
      int n = static_cast<int>(std::min<std::int64_t>(kChunk, inner - x0));
      for (int i = 0; i < nin; ++i) base[i] = ops[i] + off[i] + x0 * step[i];
      const T* v = eval_chunk<T>(e.join, base.data(), step.data(), n, s.stack);
      T* o = out + out_off + x0 * os;
      if (!agg) {
        if (os == 1) {
          std::copy(v, v + n, o);
        } else {
          for (int x = 0; x < n; ++x) o[x * os] = v[x];
        }
      } else if (os == 0) {
        *o = reduce_chunk<T>(e.agg, *o, v, n);
      } else if (os == 1 && e.agg == Agg::sum) {
        for (int x = 0; x < n; ++x) o[x] += v[x];
      } else if (os == 1 && e.agg == Agg::max) {
        for (int x = 0; x < n; ++x) o[x] = agg_combine_as<T>(Agg::max, o[x], v[x]);
      } else {
        for (int x = 0; x < n; ++x) o[x * os] = agg_combine_as<T>(e.agg, o[x * os], v[x]);
      }
    }
    int k = n_outer - 1;
    for (; k >= 0; --k) {
      const int d = outer[k];
      ++c[d];
      for (int i = 0; i < nin; ++i) off[i] += stride[i][d];
      out_off += out_stride[d];
      if (c[d] < e.join_shape[d]) break;
      for (int i = 0; i < nin; ++i) off[i] -= stride[i][d] * c[d];
      out_off -= out_stride[d] * c[d];
      c[d] = 0;
    }
    if (k < 0) break;
  }
}

}  // namespace

KernelPath kernel_path(const Einsum& e) {
  return e.is_contraction() ? KernelPath::gemm : KernelPath::generic;
}

template <class T>
void einsum_block(const Einsum& e, const std::vector<const T*>& operands, T* out, Scratch<T>& scratch) {
  if (kernel_path(e) == KernelPath::gemm) {
    gemm_path<T>(e, operands, out, scratch);
  } else {
    generic_path<T>(e, operands, out, scratch);
  }
}

template <class T>
void fill_block(const Fill& fill, const Rect& block, T* out) {
  const std::int64_t n = block.elements();
  std::fill(out, out + n, static_cast<T>(fill.value));
  if (fill.kind != Fill::Kind::lower_triangular) return;
  const int r = block.rank;
  const std::int64_t rows = block.size[r - 2], cols = block.size[r - 1];
  for (std::int64_t mat = 0; mat < n / (rows * cols); ++mat)
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j)
        if (block.offset[r - 1] + j > block.offset[r - 2] + i)
          out[(mat * rows + i) * cols + j] = static_cast<T>(fill.value_off);
}

namespace {
// copy_region() from an array of F into one of T (the same type, or float into double).
template <class F, class T>
void copy_region_as(const F* from, const Shape& from_shape, const Rect& src, T* to, const Shape& to_shape,
                    const Rect& dst, Agg combine) {
  const int rank = src.rank;
  if (rank == 0) {
    to[0] = agg_combine_as<T>(combine, to[0], static_cast<T>(from[0]));
    return;
  }
  auto fs = strides_of(from_shape);
  auto ts = strides_of(to_shape);
  const std::int64_t inner = src.size[rank - 1];
  std::array<std::int64_t, kMaxRank> c{};
  for (;;) {
    std::int64_t fo = src.offset[rank - 1], tofs = dst.offset[rank - 1];
    for (int d = 0; d < rank - 1; ++d) {
      fo += (src.offset[d] + c[d]) * fs[d];
      tofs += (dst.offset[d] + c[d]) * ts[d];
    }
    const F* f = from + fo;
    T* t = to + tofs;
    switch (combine) {
      case Agg::none: std::copy(f, f + inner, t); break;
      case Agg::sum: for (std::int64_t i = 0; i < inner; ++i) t[i] += static_cast<T>(f[i]); break;
      default:
        for (std::int64_t i = 0; i < inner; ++i) t[i] = agg_combine_as<T>(combine, t[i], static_cast<T>(f[i]));
    }
    int d = rank - 2;
    while (d >= 0 && ++c[d] == src.size[d]) {
      c[d] = 0;
      --d;
    }
    if (d < 0) return;
  }
}
}  // namespace

template <class T>
void copy_region(const T* from, const Shape& from_shape, const Rect& src, T* to, const Shape& to_shape,
                 const Rect& dst, Agg combine) {
  copy_region_as(from, from_shape, src, to, to_shape, dst, combine);
}

template <class T>
void copy_region_to_double(const T* from, const Shape& from_shape, const Rect& src, double* to,
                           const Shape& to_shape, const Rect& dst) {
  copy_region_as(from, from_shape, src, to, to_shape, dst, Agg::none);
}

#define TESSEL_INSTANTIATE(T)                                                                                   \
  template void einsum_block<T>(const Einsum&, const std::vector<const T*>&, T*, Scratch<T>&);                \
  template void fill_block<T>(const Fill&, const Rect&, T*);                                                   \
  template void copy_region<T>(const T*, const Shape&, const Rect&, T*, const Shape&, const Rect&, Agg);         \
  template void copy_region_to_double<T>(const T*, const Shape&, const Rect&, double*, const Shape&, const Rect&);
TESSEL_INSTANTIATE(float)
TESSEL_INSTANTIATE(double)
#undef TESSEL_INSTANTIATE

}  // namespace tessel::runtime::cpu
