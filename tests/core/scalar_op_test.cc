#include "core/scalar_op.h"

#include <gtest/gtest.h>

namespace tessel {
TEST(ScalarOp, PrintsAndParsesBack) {
  ScalarOp op = ScalarOp::parse("mul(silu(x0),x1)");
  EXPECT_EQ(op.to_string(), "mul(silu(x0),x1)");
}
}  // namespace tessel
