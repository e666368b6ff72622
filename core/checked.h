#pragma once
// Checked 64-bit integer arithmetic for quantities a user's input can make arbitrarily
// large: element counts, bytes, flops, device counts. An overflow throws tessel::Error
// naming the quantity instead of wrapping around (a wrapped count once reported negative
// bytes moved and a planner cost of 0).
//
// The limit is int64's: every element count, byte count and sum of them that tessel
// keeps must stay at or below 2^63 - 1 (about 9.2e18).

#include <cstdint>
#include <limits>
#include <string_view>

#include "core/error.h"

namespace tessel {

inline constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();

// a * b; throws Error "WHAT: A x B overflows 64-bit integers (more than 9223372036854775807)".
[[nodiscard]] inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(what, ": ", a, " x ", b, " overflows 64-bit integers (more than ", kMaxInt64, ")");
  return r;
}

// a + b; throws Error "WHAT: A + B overflows 64-bit integers (...)".
[[nodiscard]] inline std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(what, ": ", a, " + ", b, " overflows 64-bit integers (more than ", kMaxInt64, ")");
  return r;
}

}  // namespace tessel
