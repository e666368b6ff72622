#pragma once
// ScalarOp → CUDA C++: the source of every kernel the CUDA executor compiles at run time
// with NVRTC. Pure host code (no CUDA header), so that it is unit-tested on any machine.
//
//   einsum_kernel     one kernel per non-contraction einsum block: the join function
//                     evaluated once per join element, fused with the aggregation
//                     (softmax steps, SiLU gates, RMSNorm pieces each run as one kernel).
//                     Shapes and strides are compile-time constants, so a kernel is cached
//                     by its key (expression, dtypes, block shape).
//   copy_kernel       strided copy or accumulation of a sub-rectangle (touches, packing a
//                     move's region, permuting GEMM operands), shapes as run-time parameters
//   fill_kernel       a fill node's block (constant or causal mask), run-time parameters
//
// Generated code includes no header: f16 and bf16 are stored as 16-bit integers and
// converted with PTX instructions (cvt.f32.f16, cvt.rn.f16.f32, cvt.rn.bf16.f32; sm_80 or
// newer), arithmetic runs in float (double for f64), transcendentals through CUDA's
// precise math functions (expf, logf, ...).

#include <cstdint>
#include <string>
#include <vector>

#include "core/einsum.h"
#include "core/types.h"

namespace tessel::runtime::cuda {

// How a generated reduction maps onto threads (chosen from the block's shape).
enum class ReduceMapping : std::uint8_t {
  none,     // no aggregation: one thread per output element
  thread,   // one thread per output element loops over the aggregated indices (the
            // contiguous index is an output index: neighbouring threads read neighbours)
  warp,     // one warp per output element (the contiguous index is aggregated)
  block,    // one thread block per output element (few outputs, long reductions)
};

struct KernelSource {
  std::string name;    // the extern "C" kernel's name
  std::string source;  // CUDA C++
  std::string key;     // what the kernel cache is keyed on
  int block_threads = 256;
  std::int64_t grid_blocks = 1;  // for einsum kernels; run-time sized kernels: 0
  ReduceMapping mapping = ReduceMapping::none;
};

// The body of a join function: one `const T vK = ...;` line per function node of the
// postfix program, reading holes x0, x1, ... (variables of type `T`); the result is in
// the returned variable's name. `T` is "float" or "double".
struct ExprSource {
  std::string lines;
  std::string result;
};
[[nodiscard]] ExprSource expr_source(const ScalarOp& op, DType compute);

// The type arithmetic runs in: double for f64, float otherwise.
[[nodiscard]] DType compute_dtype(DType storage);

// A non-contraction einsum block `e` (e.join_shape is the block's shape) reading operands
// stored as `operand_dtypes` (one per input; empty: all e.dtype) and writing e.dtype.
[[nodiscard]] KernelSource einsum_kernel(const Einsum& e, const std::vector<DType>& operand_dtypes = {});

// Parameters of copy_kernel, laid out identically on host and device.
struct CopyParams {
  std::int64_t elements = 0;
  std::int32_t rank = 0;
  std::int32_t pad = 0;
  std::int64_t size[kMaxRank] = {};
  std::int64_t src_stride[kMaxRank] = {};
  std::int64_t dst_stride[kMaxRank] = {};
};
// dst[region] = src[region] (combine none) or combine(dst, src). Pointers are passed
// already offset to the regions' first elements.
[[nodiscard]] KernelSource copy_kernel(DType src, DType dst, Agg combine);

struct FillParams {
  std::int64_t elements = 0;
  std::int32_t rank = 0;
  std::int32_t lower_triangular = 0;
  std::int64_t size[kMaxRank] = {};
  std::int64_t offset[kMaxRank] = {};  // the block's offset in the whole tensor (for the mask)
  double value = 0;
  double value_off = 0;
};
[[nodiscard]] KernelSource fill_kernel(DType dtype);

// A copy of `size` elements between two row-major arrays with the given strides, with
// dimensions of size 1 dropped and neighbours that are contiguous in both merged. Used
// to pick cudaMemcpy / cudaMemcpy2D where a region allows it.
[[nodiscard]] CopyParams collapse_copy(const CopyParams& p);

// Source text with line numbers, for error messages.
[[nodiscard]] std::string numbered_lines(const std::string& source);

}  // namespace tessel::runtime::cuda
