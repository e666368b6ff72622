#include "runtime/kernels.h"

#include <array>
#include <algorithm>
#include <cassert>

#include "core/error.h"

namespace tessel::runtime {

Tensor einsum_kernel(const Einsum& e, const std::vector<const Tensor*>& operands) {
  const int rank = e.rank();
  const int nin = static_cast<int>(e.inputs.size());
  if (static_cast<int>(operands.size()) != nin) fail("einsum kernel: ", operands.size(), " operands for ", e.subscripts());
  for (int i = 0; i < nin; ++i)
    if (operands[i]->shape != e.input_shape(i))
      fail("einsum kernel ", e.subscripts(), ": operand ", i, " has shape ", to_string(operands[i]->shape),
           ", expected ", to_string(e.input_shape(i)));
  Tensor out(e.out_shape(), e.dtype, e.aggregates() ? agg_identity(e.agg) : 0.0);
  // Stride of every operand along every join index (repeated indices add up: diagonals).
  std::vector<std::array<std::int64_t, kMaxRank>> stride(nin);
  for (int i = 0; i < nin; ++i) {
    stride[i].fill(0);
    auto s = operands[i]->strides();
    for (std::size_t k = 0; k < e.inputs[i].size(); ++k) stride[i][e.inputs[i][k]] += s[k];
  }
  std::array<std::int64_t, kMaxRank> out_stride{};
  {
    auto s = out.strides();
    for (int j = 0; j < e.out_rank; ++j) out_stride[j] = s[j];
  }
  if (e.join_elements() == 0) return out;
  // Per-operand state is sized by the operand count: an einsum may have any number of
  // operands, independent of kMaxRank (which bounds the join rank).
  std::vector<const double*> data(nin);
  for (int i = 0; i < nin; ++i) data[i] = operands[i]->data.data();
  std::array<std::int64_t, kMaxRank> c{};
  std::vector<std::int64_t> off(nin, 0);
  std::int64_t out_off = 0;
  std::vector<double> vals(std::max(nin, e.join.num_holes()), 0.0);
  const bool agg = e.aggregates();
  const bool product2 = e.join.is_product_of_two_holes() && nin == 2;
  const std::int64_t inner = rank > 0 ? e.join_shape[rank - 1] : 1;
  for (;;) {
    // Innermost join index in a tight loop.
    const std::int64_t os = rank > 0 ? out_stride[rank - 1] : 0;
    for (std::int64_t x = 0; x < inner; ++x) {
      double v;
      if (product2) {
        v = data[0][off[0] + x * (rank > 0 ? stride[0][rank - 1] : 0)] *
            data[1][off[1] + x * (rank > 0 ? stride[1][rank - 1] : 0)];
      } else {
        for (int i = 0; i < nin; ++i) vals[i] = data[i][off[i] + x * (rank > 0 ? stride[i][rank - 1] : 0)];
        v = e.join.eval(vals.data());
      }
      double& o = out.data[out_off + x * os];
      o = agg ? agg_combine(e.agg, o, v) : v;
    }
    // Advance the odometer over the other join indices.
    int d = rank - 2;
    for (; d >= 0; --d) {
      ++c[d];
      for (int i = 0; i < nin; ++i) off[i] += stride[i][d];
      out_off += out_stride[d];
      if (c[d] < e.join_shape[d]) break;
      for (int i = 0; i < nin; ++i) off[i] -= stride[i][d] * c[d];
      out_off -= out_stride[d] * c[d];
      c[d] = 0;
    }
    if (d < 0) break;
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
