#pragma once
// CPU block kernels shared by the reference evaluator and the executors.

#include <vector>

#include "core/einsum.h"
#include "core/graph.h"
#include "core/tensor.h"

namespace tessel::runtime {

// Evaluates `e` on operands whose shapes are e.input_shape(i). The result has
// e.out_shape() and is rounded to e.dtype. In doubles, every output element's terms
// combined in join order; `threads` > 1 splits a large join space (2^20 elements and
// up) over that many threads by an output index, with the same result bit for bit.
[[nodiscard]] Tensor einsum_kernel(const Einsum& e, const std::vector<const Tensor*>& operands, int threads = 1);

// Values of a fill node over `block` (coordinates of the whole tensor).
[[nodiscard]] Tensor fill_kernel(const Fill& fill, const Rect& block, DType dtype);

}  // namespace tessel::runtime
