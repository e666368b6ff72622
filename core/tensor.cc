#include "core/tensor.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace tessel {

Tensor::Tensor(Shape s, DType t, double fill) : shape(std::move(s)), dtype(t) {
  const std::int64_t n = elements(shape);
  try {
    data.assign(static_cast<std::size_t>(n), fill);
  } catch (const std::bad_alloc&) {
    throw ResourceError("out of memory allocating a tensor of shape " + to_string(shape) + " (" + std::to_string(n) +
                        " elements, " + std::to_string(static_cast<double>(n) * 8 / (1 << 30)) + " GiB as doubles)");
  } catch (const std::length_error&) {
    throw ResourceError("a tensor of shape " + to_string(shape) + " (" + std::to_string(n) +
                        " elements) is larger than this machine can allocate");
  }
}

std::vector<std::int64_t> Tensor::strides() const {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

void Tensor::round_to_dtype() {
  if (dtype == DType::f64) return;
  for (double& v : data) v = static_cast<double>(static_cast<float>(v));
}

void Tensor::round_to_storage() {
  round_to_dtype();
  if (dtype == DType::bf16) {
    for (double& v : data) {
      const float f = static_cast<float>(v);
      if (std::isnan(f)) continue;
      std::uint32_t u = 0;
      std::memcpy(&u, &f, 4);
      u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even on the top 16 bits
      u &= 0xffff0000u;
      float r = 0;
      std::memcpy(&r, &u, 4);
      v = static_cast<double>(r);
    }
  } else if (dtype == DType::f16) {
    for (double& v : data) v = static_cast<double>(round_to_f16(static_cast<float>(v)));
  }
}

float round_to_f16(float f) {
  // In arithmetic rather than through _Float16, which not every compiler offers on
  // every target (clang 14 on x86 has none). binary16: 11 significant bits, exponents
  // down to -14, subnormals in steps of 2^-24, largest finite 65504.
  if (!std::isfinite(f) || f == 0.0f) return f;
  int p = 0;
  std::frexp(static_cast<double>(f), &p);               // |f| = m * 2^p, m in [0.5, 1)
  const int q = std::max(p - 1 - 10, -24);               // exponent of the last kept bit
  const double scaled = std::ldexp(static_cast<double>(f), -q);  // exact: a power-of-two scale
  double r = std::floor(scaled);
  const double rest = scaled - r;                          // exact: scaled has <= 24 significant bits
  if (rest > 0.5 || (rest == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;  // nearest, ties to even
  const double out = std::ldexp(r, q);
  if (std::fabs(out) > 65504.0) return std::copysign(std::numeric_limits<float>::infinity(), f);
  return static_cast<float>(out);
}

Tensor random_tensor(const Shape& shape, DType dtype, std::uint64_t seed) {
  Tensor t(shape, dtype);
  std::mt19937_64 rng(seed);
  // Not std::uniform_real_distribution: its output is implementation-defined, and
  // inputs must be the same on every machine.
  for (double& v : t.data) v = static_cast<double>(rng() >> 11) * 0x1.0p-52 - 1.0;
  t.round_to_dtype();
  return t;
}

void copy_region(const Tensor& from, const Rect& src, Tensor& to, const Rect& dst, Agg combine) {
  assert(src.rank == static_cast<int>(from.shape.size()) && dst.rank == static_cast<int>(to.shape.size()));
  assert(src.rank == dst.rank);
  const int rank = src.rank;
  for (int d = 0; d < rank; ++d) assert(src.size[d] == dst.size[d]);
  if (rank == 0) {
    to.data[0] = combine == Agg::none ? from.data[0] : agg_combine(combine, to.data[0], from.data[0]);
    return;
  }
  auto fs = from.strides();
  auto ts = to.strides();
  std::int64_t inner = src.size[rank - 1];
  std::array<std::int64_t, kMaxRank> c{};
  for (;;) {
    std::int64_t fo = 0, tofs = 0;
    for (int d = 0; d < rank - 1; ++d) {
      fo += (src.offset[d] + c[d]) * fs[d];
      tofs += (dst.offset[d] + c[d]) * ts[d];
    }
    fo += src.offset[rank - 1];
    tofs += dst.offset[rank - 1];
    const double* f = from.data.data() + fo;
    double* t = to.data.data() + tofs;
    if (combine == Agg::none) {
      for (std::int64_t i = 0; i < inner; ++i) t[i] = f[i];
    } else {
      for (std::int64_t i = 0; i < inner; ++i) t[i] = agg_combine(combine, t[i], f[i]);
    }
    int d = rank - 2;
    while (d >= 0 && ++c[d] == src.size[d]) {
      c[d] = 0;
      --d;
    }
    if (d < 0) return;
  }
}

Difference compare(const Tensor& a, const Tensor& b) {
  if (a.shape != b.shape) fail("compare: shapes ", to_string(a.shape), " and ", to_string(b.shape), " differ");
  Difference d;
  double scale = 1.0;
  for (double y : b.data)
    if (std::isfinite(y)) scale = std::max(scale, std::fabs(y));
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    double x = a.data[i], y = b.data[i];
    if (x == y) continue;                         // also equal infinities
    if (std::isnan(x) && std::isnan(y)) continue;  // NaN in the same place agrees (numpy's equal_nan)
    double diff = std::fabs(x - y);
    if (std::isnan(diff)) diff = std::numeric_limits<double>::infinity();
    double rel = diff / std::max(1.0, std::max(std::fabs(x), std::fabs(y)));
    if (diff > d.max_abs) {
      d.max_abs = diff;
      d.index = static_cast<std::int64_t>(i);
    }
    d.max_rel = std::max(d.max_rel, rel);
  }
  d.normwise_rel = d.max_abs / scale;
  return d;
}

}  // namespace tessel
