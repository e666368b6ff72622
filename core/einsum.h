#pragma once
// Einsum: EinDecomp's extended Einstein summation.
//
//   join_shape  size of every join index; output indices come first (out_rank of them),
//               the rest are aggregated
//   inputs      for each input, the join indices it reads, one per input dimension
//               (repeated ids read a diagonal: "ii->i" is inputs = {{0,0}})
//   join        scalar function of one hole per input
//   agg         how values along aggregated indices combine (required iff any index
//               is aggregated)
//
// "ij,jk->ik" with shapes {M,K},{K,N} is join_shape {M,N,K}, inputs {{0,2},{2,1}},
// out_rank 2, join mul(x0,x1), agg sum.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/scalar_op.h"
#include "core/types.h"

namespace tessel {

// The letters of a subscript string after numpy's rules (implicit output = letters
// that appear exactly once, in alphabetical order).
struct Subscripts {
  std::vector<std::string> inputs;
  std::string output;
  bool explicit_output = false;
};
[[nodiscard]] Subscripts parse_subscripts(std::string_view text);

struct Einsum {
  Shape join_shape;
  std::vector<std::vector<int>> inputs;
  int out_rank = 0;
  ScalarOp join;
  Agg agg = Agg::none;
  DType dtype = DType::f32;

  // numpy.einsum semantics. `join` defaults to the product of all inputs (x0 for one
  // input), `agg` to sum when any index is aggregated.
  [[nodiscard]] static Einsum from_subscripts(std::string_view subscripts, const std::vector<Shape>& input_shapes,
                                              std::optional<ScalarOp> join = std::nullopt,
                                              std::optional<Agg> agg = std::nullopt, DType dtype = DType::f32);

  // Throws Error when inconsistent (hole count, index ids, missing aggregation...).
  void validate() const;

  [[nodiscard]] int rank() const { return static_cast<int>(join_shape.size()); }
  [[nodiscard]] bool aggregates() const { return rank() > out_rank; }
  [[nodiscard]] Shape out_shape() const { return Shape(join_shape.begin(), join_shape.begin() + out_rank); }
  [[nodiscard]] Shape input_shape(int i) const;
  [[nodiscard]] std::int64_t join_elements() const { return elements(join_shape); }
  // One flop per join function node per join element, plus one per aggregation.
  [[nodiscard]] double flops_per_join_element() const { return join.flops() + (aggregates() ? 1 : 0); }
  [[nodiscard]] double flops() const { return flops_per_join_element() * static_cast<double>(join_elements()); }
  // Bytes read (every input once) plus bytes written (the output).
  [[nodiscard]] std::int64_t bytes() const;
  // A plain contraction: two operands, join x0*x1, sum over indices that both operands
  // read, no diagonals. Such blocks run as (batched) GEMMs; everything else is
  // elementwise or reduction work.
  [[nodiscard]] bool is_contraction() const;
  // The same operation on a block of the join space.
  [[nodiscard]] Einsum with_join_shape(const Shape& block) const;
  // Letters form, output indices a, b, c, ... in join order: "ac,cb->ab".
  [[nodiscard]] std::string subscripts() const;
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const Einsum&, const Einsum&) = default;
};

// The join indices of a contraction (is_contraction()) by the role they play in one
// batched GEMM, each list in join order: batch (both operands and the output), m (the
// first operand and the output), n (the second operand and the output), k (aggregated);
// and the product of each list's sizes. Every backend maps contractions through this.
struct GemmDims {
  std::vector<int> batch, m, n, k;
  std::int64_t batch_size = 1, m_size = 1, n_size = 1, k_size = 1;
};
[[nodiscard]] GemmDims gemm_dims(const Einsum& e);

}  // namespace tessel
