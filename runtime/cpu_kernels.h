#pragma once
// Fast CPU block kernels over raw arrays (float or double), used by the CPU executor.
//
// einsum_block recognises contractions (two operands, join x0*x1, sum) and runs them as
// batched GEMMs through Eigen after permuting operands to [batch, M, K] x [batch, K, N];
// everything else runs through a generic loop that evaluates the join function a chunk
// of elements at a time (one pass per instruction of its postfix program, so the
// compiler vectorises each pass).

#include <cstdint>
#include <vector>

#include "core/einsum.h"
#include "core/graph.h"
#include "core/types.h"

namespace tessel::runtime::cpu {

// Reusable scratch memory of one worker.
template <class T>
struct Scratch {
  std::vector<T> a, b, c;
  std::vector<T> stack;
  std::vector<const T*> base;       // per operand (any count): its pointer in the current chunk
  std::vector<std::int64_t> step;   // per operand: its stride along the inner loop
};

// Which path einsum_block takes for `e`.
enum class KernelPath : std::uint8_t { gemm, generic };
[[nodiscard]] KernelPath kernel_path(const Einsum& e);

// out has e.out_shape(), operands e.input_shape(i), all row-major.
template <class T>
void einsum_block(const Einsum& e, const std::vector<const T*>& operands, T* out, Scratch<T>& scratch);

template <class T>
void fill_block(const Fill& fill, const Rect& block, T* out);

// Copies (or combines with `combine`) region `src` of an array of shape `from_shape`
// into region `dst` of an array of shape `to_shape`.
template <class T>
void copy_region(const T* from, const Shape& from_shape, const Rect& src, T* to, const Shape& to_shape,
                 const Rect& dst, Agg combine);
// The same into an array of doubles (a result tensor), converting as it copies.
template <class T>
void copy_region_to_double(const T* from, const Shape& from_shape, const Rect& src, double* to,
                           const Shape& to_shape, const Rect& dst);

}  // namespace tessel::runtime::cpu
