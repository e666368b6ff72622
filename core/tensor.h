#pragma once
// Tensor: a dense row-major array with a shape and an element type. Values are held
// as double; an f32 tensor holds values rounded to float (round_to_dtype), so the
// CPU reference computes in f32 or f64 as the graph asks.

#include <cstdint>
#include <random>
#include <vector>

#include "core/types.h"

namespace tessel {

struct Tensor {
  Shape shape;
  DType dtype = DType::f32;
  std::vector<double> data;

  Tensor() = default;
  // Throws Error when the shape's element count overflows, ResourceError (naming the
  // shape and its bytes) when the memory cannot be had.
  Tensor(Shape s, DType t, double fill = 0.0);

  [[nodiscard]] std::int64_t size() const { return static_cast<std::int64_t>(data.size()); }
  // Row-major strides in elements.
  [[nodiscard]] std::vector<std::int64_t> strides() const;
  void round_to_dtype();
  // As round_to_dtype, but f16 and bf16 values to their own precision (11 and 8
  // significant bits, round to nearest even), as a backend that stores them holds them.
  void round_to_storage();
};

// The binary16 value nearest to f (ties to even; beyond 65504 rounds to infinity),
// as a float. NaN, infinities and zeros pass through.
[[nodiscard]] float round_to_f16(float f);

// Uniform values in [-1, 1), reproducible from the seed.
[[nodiscard]] Tensor random_tensor(const Shape& shape, DType dtype, std::uint64_t seed);

// Copies region `src` of `from` into region `dst` of `to` (same sizes); with an
// aggregation other than none, combines into what is there instead.
void copy_region(const Tensor& from, const Rect& src, Tensor& to, const Rect& dst, Agg combine = Agg::none);

// Largest absolute difference and where; tolerance checks use it. NaN in the same place
// in both counts as equal (numpy's allclose(equal_nan=True)); NaN against a number is an
// infinite difference.
struct Difference {
  double max_abs = 0;
  double max_rel = 0;       // elementwise: |a-b| / max(1, |a|, |b|)
  double normwise_rel = 0;  // max_abs / max(1, max |b|): robust to cancellation in long sums
  std::int64_t index = -1;  // flat index of the largest absolute difference
};
[[nodiscard]] Difference compare(const Tensor& a, const Tensor& b);

}  // namespace tessel
