#include "core/types.h"

#include <cassert>
#include <limits>
#include <sstream>

#include "core/checked.h"
#include "core/error.h"

namespace tessel {

std::int64_t dtype_bytes(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f32: return 4;
    case DType::f64: return 8;
  }
  return 4;
}

std::string_view to_string(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
  }
  return "?";
}

std::string_view to_string(Agg a) {
  switch (a) {
    case Agg::none: return "none";
    case Agg::sum: return "sum";
    case Agg::max: return "max";
    case Agg::min: return "min";
    case Agg::prod: return "prod";
  }
  return "?";
}

DType parse_dtype(std::string_view s, std::string_view what) {
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64})
    if (to_string(t) == s) return t;
  fail(what, ": unknown dtype '", s, "' (expected f16, bf16, f32 or f64)");
}

Agg parse_agg(std::string_view s, std::string_view what) {
  for (Agg a : {Agg::none, Agg::sum, Agg::max, Agg::min, Agg::prod})
    if (to_string(a) == s) return a;
  if (s == "add") return Agg::sum;
  if (s == "mul") return Agg::prod;
  fail(what, ": unknown aggregation '", s, "' (expected sum, max, min, prod or none)");
}

double agg_identity(Agg a) {
  switch (a) {
    case Agg::sum: return 0.0;
    case Agg::prod: return 1.0;
    case Agg::max: return -std::numeric_limits<double>::infinity();
    case Agg::min: return std::numeric_limits<double>::infinity();
    case Agg::none: return 0.0;
  }
  return 0.0;
}

std::int64_t elements(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      fail("shape ", to_string(shape), ": its element count overflows 64-bit integers (more than ", kMaxInt64, ")");
  return n;
}

std::string to_string(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ']';
  return os.str();
}

Rect Rect::whole(const Shape& shape) {
  if (shape.size() > static_cast<std::size_t>(kMaxRank))
    fail("shape ", to_string(shape), ": rank ", shape.size(), " exceeds the maximum of ", kMaxRank);
  Rect r;
  r.rank = static_cast<int>(shape.size());
  for (int i = 0; i < r.rank; ++i) r.size[i] = shape[i];
  return r;
}

std::int64_t Rect::elements() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= size[i];
  return n;
}

bool Rect::contains(const Rect& inner) const {
  if (inner.rank != rank) return false;
  for (int i = 0; i < rank; ++i)
    if (inner.offset[i] < offset[i] || inner.offset[i] + inner.size[i] > offset[i] + size[i]) return false;
  return true;
}

bool operator==(const Rect& a, const Rect& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i)
    if (a.offset[i] != b.offset[i] || a.size[i] != b.size[i]) return false;
  return true;
}

bool intersect(const Rect& a, const Rect& b, Rect* out) {
  assert(a.rank == b.rank);
  Rect r;
  r.rank = a.rank;
  for (int i = 0; i < a.rank; ++i) {
    std::int64_t lo = std::max(a.offset[i], b.offset[i]);
    std::int64_t hi = std::min(a.offset[i] + a.size[i], b.offset[i] + b.size[i]);
    if (hi <= lo) return false;
    r.offset[i] = lo;
    r.size[i] = hi - lo;
  }
  *out = r;
  return true;
}

Rect relative_to(const Rect& inner, const Rect& outer) {
  Rect r = inner;
  for (int i = 0; i < inner.rank; ++i) r.offset[i] -= outer.offset[i];
  return r;
}

std::string to_string(const Rect& r) {
  std::ostringstream os;
  os << '[';
  for (int i = 0; i < r.rank; ++i) os << (i ? "," : "") << r.offset[i] << ':' << r.offset[i] + r.size[i];
  os << ']';
  return os.str();
}

std::size_t hash_rect(const Rect& r) {
  // Multiply-xorshift mixing per coordinate: cheap, and no clustering of the
  // low bits that bucket selection uses.
  auto mix = [](std::uint64_t h, std::uint64_t v) {
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
  };
  std::uint64_t h = static_cast<std::uint64_t>(r.rank);
  for (int i = 0; i < r.rank; ++i) {
    h = mix(h, static_cast<std::uint64_t>(r.offset[i]));
    h = mix(h, static_cast<std::uint64_t>(r.size[i]));
  }
  return static_cast<std::size_t>(h);
}

}  // namespace tessel
