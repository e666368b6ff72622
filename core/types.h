#pragma once
// Element types, aggregations and the fixed-capacity hyper-rectangle used for blocks.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

// Highest tensor / join rank tessel handles. Blocks are hyper-rectangles stored inline
// (no heap) so that lowering millions of tasks stays cheap.
inline constexpr int kMaxRank = 8;

// Most devices a machine, decomposition or task graph may have: 65,536 (8,192 nodes of
// 8 GPUs). Requests beyond it are refused before any work is done.
inline constexpr int kMaxDevices = 65'536;

using Shape = std::vector<std::int64_t>;

enum class DType : std::uint8_t { f16, bf16, f32, f64 };
enum class Agg : std::uint8_t { none, sum, max, min, prod };

[[nodiscard]] std::int64_t dtype_bytes(DType t);
[[nodiscard]] std::string_view to_string(DType t);
[[nodiscard]] std::string_view to_string(Agg a);
// Throw Error naming `what` (the input being parsed) on an unknown name.
[[nodiscard]] DType parse_dtype(std::string_view s, std::string_view what = "dtype");
[[nodiscard]] Agg parse_agg(std::string_view s, std::string_view what = "aggregation");
// Neutral element of an aggregation (0 for sum, 1 for prod, -inf for max, +inf for min).
[[nodiscard]] double agg_identity(Agg a);
// acc combined with v under `a` (none: v), in T: the reference evaluator's doubles and the
// CPU kernels' floats share it. max and min propagate NaN as numpy's max / min do: once
// either side is NaN the result is NaN.
template <class T>
[[nodiscard]] constexpr T agg_combine_as(Agg a, T acc, T v) {
  switch (a) {
    case Agg::sum: return acc + v;
    case Agg::prod: return acc * v;
    // `|`, not `||`: no branch, so that loops over it vectorise (a blend).
    case Agg::max: return ((v > acc) | (v != v)) ? v : acc;
    case Agg::min: return ((v < acc) | (v != v)) ? v : acc;
    case Agg::none: return v;
  }
  return v;
}
[[nodiscard]] inline double agg_combine(Agg a, double acc, double v) { return agg_combine_as<double>(a, acc, v); }

// Element count; throws Error naming the shape when it overflows int64.
[[nodiscard]] std::int64_t elements(const Shape& shape);
[[nodiscard]] std::string to_string(const Shape& shape);

// A hyper-rectangle [offset, offset + size) in a tensor of rank `rank`.
struct Rect {
  int rank = 0;
  std::array<std::int64_t, kMaxRank> offset{};
  std::array<std::int64_t, kMaxRank> size{};

  [[nodiscard]] static Rect whole(const Shape& shape);
  [[nodiscard]] std::int64_t elements() const;
  [[nodiscard]] Shape shape() const { return Shape(size.begin(), size.begin() + rank); }
  [[nodiscard]] bool contains(const Rect& inner) const;
  friend bool operator==(const Rect& a, const Rect& b);
};

// Intersection of two rects of the same rank; `empty` when they do not overlap.
[[nodiscard]] bool intersect(const Rect& a, const Rect& b, Rect* out);
// `inner` expressed relative to `outer`'s origin.
[[nodiscard]] Rect relative_to(const Rect& inner, const Rect& outer);
[[nodiscard]] std::string to_string(const Rect& r);
[[nodiscard]] std::size_t hash_rect(const Rect& r);

}  // namespace tessel
