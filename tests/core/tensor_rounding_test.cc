// Tensor::round_to_storage: f16 and bf16 values rounded to their own precision (round to
// nearest, ties to even), f32 to float, f64 untouched; and the reference evaluator's
// storage rounding (what the CUDA backend is checked against).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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
