#include "runtime/kernels.h"

#include <array>
#include <algorithm>
#include <cassert>
#include <string>
#include <system_error>
#include <thread>

#include "core/error.h"

namespace tessel::runtime {

namespace {

// One thread's share of an einsum: the join space with dimension `split` limited to
// [lo, hi), every dimension walked in `order` (innermost last).
struct EinsumWalk {
  const Einsum* e;
  int nin;
  std::array<int, kMaxRank> order;                         // loop position -> join index
  std::vector<std::array<std::int64_t, kMaxRank>> stride;  // per operand, by join index
  std::array<std::int64_t, kMaxRank> out_stride;           // by join index (0 if aggregated)
  std::vector<const double*> data;
  double* out;

  void run(int split, std::int64_t lo, std::int64_t hi) const {
    const int rank = e->rank();
    std::array<std::int64_t, kMaxRank> size{};
    for (int d = 0; d < rank; ++d) size[d] = e->join_shape[d];
    std::vector<std::int64_t> off(nin, 0);
    std::int64_t out_off = 0;
    if (rank > 0) {
      size[split] = hi - lo;
      if (size[split] <= 0) return;
      for (int i = 0; i < nin; ++i) off[i] = lo * stride[i][split];
      out_off = lo * out_stride[split];
    }
    std::vector<double> vals(std::max(nin, e->join.num_holes()), 0.0);
    const bool agg = e->aggregates();
    const bool product2 = e->join.is_product_of_two_holes() && nin == 2;
    const int in_d = rank > 0 ? order[rank - 1] : 0;
    const std::int64_t inner = rank > 0 ? size[in_d] : 1;
    const std::int64_t os = rank > 0 ? out_stride[in_d] : 0;
    std::vector<std::int64_t> is(nin, 0);
    for (int i = 0; i < nin; ++i) is[i] = rank > 0 ? stride[i][in_d] : 0;
    std::array<std::int64_t, kMaxRank> c{};
    for (;;) {
      // Innermost loop index in a tight loop.
      if (product2) {
        const double* a = data[0] + off[0];
        const double* b = data[1] + off[1];
        double* o = out + out_off;
        const std::int64_t sa = is[0], sb = is[1];
        if (agg) {
          for (std::int64_t x = 0; x < inner; ++x) o[x * os] = agg_combine(e->agg, o[x * os], a[x * sa] * b[x * sb]);
        } else {
          for (std::int64_t x = 0; x < inner; ++x) o[x * os] = a[x * sa] * b[x * sb];
        }
      } else {
        for (std::int64_t x = 0; x < inner; ++x) {
          for (int i = 0; i < nin; ++i) vals[i] = data[i][off[i] + x * is[i]];
          const double v = e->join.eval(vals.data());
          double& o = out[out_off + x * os];
          o = agg ? agg_combine(e->agg, o, v) : v;
        }
      }
      // Advance the odometer over the other loop positions.
      int p = rank - 2;
      for (; p >= 0; --p) {
        const int d = order[p];
        ++c[d];
        for (int i = 0; i < nin; ++i) off[i] += stride[i][d];
        out_off += out_stride[d];
        if (c[d] < size[d]) break;
        for (int i = 0; i < nin; ++i) off[i] -= stride[i][d] * c[d];
        out_off -= out_stride[d] * c[d];
        c[d] = 0;
      }
      if (p < 0) break;
    }
  }
};

// Join elements below which one thread does the whole einsum (a thread costs ~10 us).
constexpr std::int64_t kParallelJoinElements = std::int64_t{1} << 20;

}  // namespace

Tensor einsum_kernel(const Einsum& e, const std::vector<const Tensor*>& operands, int threads) {
  const int rank = e.rank();
  const int nin = static_cast<int>(e.inputs.size());
  if (static_cast<int>(operands.size()) != nin) fail("einsum kernel: ", operands.size(), " operands for ", e.subscripts());
  for (int i = 0; i < nin; ++i)
    if (operands[i]->shape != e.input_shape(i))
      fail("einsum kernel ", e.subscripts(), ": operand ", i, " has shape ", to_string(operands[i]->shape),
           ", expected ", to_string(e.input_shape(i)));
  Tensor out(e.out_shape(), e.dtype, e.aggregates() ? agg_identity(e.agg) : 0.0);
  if (e.join_elements() == 0) return out;
  EinsumWalk w;
  w.e = &e;
  w.nin = nin;
  // Stride of every operand along every join index (repeated indices add up: diagonals).
  w.stride.resize(nin);
  for (int i = 0; i < nin; ++i) {
    w.stride[i].fill(0);
    auto s = operands[i]->strides();
    for (std::size_t k = 0; k < e.inputs[i].size(); ++k) w.stride[i][e.inputs[i][k]] += s[k];
  }
  w.out_stride.fill(0);
  {
    auto s = out.strides();
    for (int j = 0; j < e.out_rank; ++j) w.out_stride[j] = s[j];
  }
  // Per-operand state is sized by the operand count: an einsum may have any number of
  // operands, independent of kMaxRank (which bounds the join rank).
  w.data.resize(nin);
  for (int i = 0; i < nin; ++i) w.data[i] = operands[i]->data.data();
  w.out = out.data.data();
  // Loop order: join order, except that an output index whose walk touches memory more
  // contiguously (unit or zero strides in more operands and the output) may become the
  // innermost loop ("ij,jk->ik": k, not the contracted j, so that the second operand and
  // the output are read along rows). Only an output index moves, and the aggregated
  // indices keep their order among themselves, so every output element combines its
  // terms in the same sequence as the join order would: the result is the same, bit for
  // bit, whatever the order, and whatever the thread count below.
  for (int d = 0; d < rank; ++d) w.order[d] = d;
  if (rank > 1) {
    auto contiguous = [&](int d) {
      int n = (w.out_stride[d] <= 1) ? 1 : 0;
      for (int i = 0; i < nin; ++i) n += (w.stride[i][d] <= 1) ? 1 : 0;
      return n;
    };
    int best = rank - 1;
    for (int d = 0; d < e.out_rank; ++d)
      if (d != best && contiguous(d) > contiguous(best)) best = d;
    if (best != rank - 1) {
      int p = 0;
      for (int d = 0; d < rank; ++d)
        if (d != best) w.order[p++] = d;
      w.order[rank - 1] = best;
    }
  }
  // Threads split the outermost output index in loop order: each writes its own output
  // elements, in the order one thread would.
  int split = -1;
  for (int p = 0; p < rank; ++p)
    if (w.order[p] < e.out_rank) {
      split = w.order[p];
      break;
    }
  const std::int64_t parts =
      (split < 0 || e.join_elements() < kParallelJoinElements) ? 1 : std::min<std::int64_t>(threads, e.join_shape[split]);
  if (parts <= 1) {
    w.run(split < 0 ? 0 : split, 0, rank > 0 ? e.join_shape[split < 0 ? 0 : split] : 1);
  } else {
    std::vector<std::thread> pool;
    const std::int64_t n = e.join_shape[split];
    try {
      for (std::int64_t t = 0; t < parts; ++t)
        pool.emplace_back([&w, split, lo = n * t / parts, hi = n * (t + 1) / parts] { w.run(split, lo, hi); });
    } catch (const std::system_error& err) {  // no thread to be had: the ones started finish first
      for (auto& th : pool) th.join();
      throw ResourceError(std::string("einsum kernel: cannot start a thread (") + err.what() + ")");
    }
    for (auto& th : pool) th.join();
  }
  out.round_to_dtype();
  return out;
}

Tensor fill_kernel(const Fill& fill, const Rect& block, DType dtype) {
  Tensor out(block.shape(), dtype, fill.value);
  if (fill.kind == Fill::Kind::lower_triangular) {
    assert(block.rank >= 2);
    const int r = block.rank;
    const std::int64_t rows = block.size[r - 2], cols = block.size[r - 1];
    const std::int64_t mats = out.size() / (rows * cols);
    for (std::int64_t m = 0; m < mats; ++m)
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
          if (block.offset[r - 1] + j > block.offset[r - 2] + i) out.data[(m * rows + i) * cols + j] = fill.value_off;
  }
  out.round_to_dtype();
  return out;
}

}  // namespace tessel::runtime
