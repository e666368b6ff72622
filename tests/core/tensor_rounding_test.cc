// Tensor::round_to_storage: f16 and bf16 values rounded to their own precision (round to
// nearest, ties to even), f32 to float, f64 untouched; and the reference evaluator's
// storage rounding (what the CUDA backend is checked against).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/tensor.h"
#include "core/workloads.h"
#include "runtime/executor.h"

namespace tessel {
namespace {

double stored(DType t, double v) {
  Tensor x(Shape{1}, t);
  x.data[0] = v;
  x.round_to_storage();
  return x.data[0];
}

TEST(TensorRounding, Bf16KeepsEightSignificantBitsTiesToEven) {
  EXPECT_EQ(stored(DType::bf16, 1.0 + std::ldexp(1.0, -8)), 1.0);                        // tie: down to even
  EXPECT_EQ(stored(DType::bf16, 1.0 + 3 * std::ldexp(1.0, -8)), 1.0 + std::ldexp(1.0, -6));  // tie: up to even
  EXPECT_EQ(stored(DType::bf16, 1.0 + std::ldexp(1.0, -7)), 1.0 + std::ldexp(1.0, -7));  // representable
  EXPECT_EQ(stored(DType::bf16, -3.0), -3.0);
  EXPECT_TRUE(std::isnan(stored(DType::bf16, std::numeric_limits<double>::quiet_NaN())));
  EXPECT_TRUE(std::isinf(stored(DType::bf16, 1e300)));
}

TEST(TensorRounding, F16KeepsElevenSignificantBitsTiesToEven) {
  EXPECT_EQ(stored(DType::f16, 1.0 + std::ldexp(1.0, -11)), 1.0);
  EXPECT_EQ(stored(DType::f16, 1.0 + 3 * std::ldexp(1.0, -11)), 1.0 + std::ldexp(1.0, -9));
  EXPECT_EQ(stored(DType::f16, 65504.0), 65504.0);
  EXPECT_TRUE(std::isinf(stored(DType::f16, 70000.0)));
}

// Every finite binary16 value, decoded from its bits here rather than through a compiler's
// half type, in increasing order from 0 to 65504.
std::vector<double> every_nonnegative_f16() {
  std::vector<double> v;
  for (int bits = 0; bits < 0x7c00; ++bits) {
    const int exponent = bits >> 10, fraction = bits & 0x3ff;
    v.push_back(exponent == 0 ? std::ldexp(fraction, -24) : std::ldexp(1024 + fraction, exponent - 25));
  }
  return v;
}

TEST(TensorRounding, F16RoundingAgreesWithEveryBinary16ValueAndEveryMidpoint) {
  const std::vector<double> f16 = every_nonnegative_f16();
  ASSERT_EQ(f16.back(), 65504.0);
  for (std::size_t i = 0; i < f16.size(); ++i) {
    for (double sign : {1.0, -1.0}) {
      const double x = sign * f16[i];
      ASSERT_EQ(round_to_f16(static_cast<float>(x)), x) << "f16 value " << x << " is not a fixed point";
      if (i + 1 == f16.size()) continue;
      const double lo = f16[i], hi = f16[i + 1];
      const double mid = 0.5 * (lo + hi);  // exact: both have few significant bits
      const double even = (i % 2 == 0) ? lo : hi;  // the bit pattern i is even or odd
      ASSERT_EQ(round_to_f16(static_cast<float>(sign * mid)), sign * even) << "tie between " << lo << " and " << hi;
      const double below = std::nextafter(static_cast<float>(mid), 0.0f);
      const double above = std::nextafter(static_cast<float>(mid), 1e9f);
      if (below > lo) {
        ASSERT_EQ(round_to_f16(static_cast<float>(sign * below)), sign * lo);
      }
      if (above < hi) {
        ASSERT_EQ(round_to_f16(static_cast<float>(sign * above)), sign * hi);
      }
    }
  }
  EXPECT_EQ(round_to_f16(65519.0f), 65504.0f);
  EXPECT_TRUE(std::isinf(round_to_f16(65520.0f)));  // the tie above 65504 rounds to the next, out of range
  EXPECT_TRUE(std::isinf(round_to_f16(-1e30f)) && round_to_f16(-1e30f) < 0);
  EXPECT_EQ(round_to_f16(std::ldexp(1.0f, -26)), 0.0f);  // below half the smallest subnormal
  EXPECT_TRUE(std::isnan(round_to_f16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(TensorRounding, F32AndF64AsRoundToDtype) {
  const double v = 1.0 + std::ldexp(1.0, -40);
  EXPECT_EQ(stored(DType::f32, v), 1.0);
  EXPECT_EQ(stored(DType::f64, v), v);
}

TEST(TensorRounding, TheReferenceRoundsStoredValuesOnlyWhenAsked) {
  for (const char* spec : {"ffn", "ffn:dtype=bf16"}) {
    const Graph g = build_workload(spec);
    const runtime::TensorMap in = runtime::random_inputs(g, 3);
    const runtime::TensorMap plain = runtime::evaluate_reference(g, in);
    const runtime::TensorMap stored_ref = runtime::evaluate_reference(g, in, /*storage_rounding=*/true);
    for (const auto& [name, t] : plain) {
      const bool bf16 = std::string(spec).find("bf16") != std::string::npos;
      if (bf16) {
        EXPECT_NE(t.data, stored_ref.at(name).data) << spec;
        // Every stored output value is a bf16 value: rounding it again changes nothing.
        Tensor again = stored_ref.at(name);
        again.round_to_storage();
        EXPECT_EQ(again.data, stored_ref.at(name).data);
      } else {
        EXPECT_EQ(t.data, stored_ref.at(name).data) << spec;
      }
    }
  }
}

}  // namespace
}  // namespace tessel
