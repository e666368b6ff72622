// Checked arithmetic: element counts, bytes and workload sizes that overflow int64 are
// errors naming the quantity, never wrapped numbers.
#include "core/checked.h"

#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "core/einsum.h"
#include "core/graph.h"
#include "core/io.h"
#include "core/workloads.h"
#include "tests/support/error_of.h"

namespace tessel {
namespace {

using testing::error_of;

TEST(Checked, MulAndAddThrowNamingTheQuantityOnOverflow) {
  EXPECT_EQ(checked_mul(3, 4, "x"), 12);
  EXPECT_EQ(checked_add(kMaxInt64 - 1, 1, "x"), kMaxInt64);
  EXPECT_NE(error_of([] { (void)checked_mul(std::int64_t{1} << 32, std::int64_t{1} << 31, "bytes of w"); })
                .find("bytes of w: 4294967296 x 2147483648 overflows 64-bit integers"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)checked_add(kMaxInt64, 1, "bytes moved"); }).find("bytes moved: "), std::string::npos);
}

TEST(Checked, AnElementCountBeyondInt64IsAnErrorNamingTheShape) {
  EXPECT_EQ(elements({1 << 20, 1 << 20}), std::int64_t{1} << 40);
  EXPECT_NE(error_of([] { (void)elements({std::int64_t{1} << 32, std::int64_t{1} << 32}); })
                .find("shape [4294967296,4294967296]: its element count overflows 64-bit integers"),
            std::string::npos);
}

TEST(Checked, AGraphWhoseTensorsOrJoinSpaceOverflowIsRejectedWhenBuilt) {
  // 2^40 x 2^40: the input's element count overflows.
  EXPECT_NE(error_of([] {
              GraphBuilder b;
              (void)b.input("x", {std::int64_t{1} << 40, std::int64_t{1} << 40});
            }).find("overflows 64-bit integers"),
            std::string::npos);
  // 2^61 f32 elements: the count fits, the bytes do not.
  EXPECT_NE(error_of([] {
              GraphBuilder b;
              (void)b.input("x", {std::int64_t{1} << 61});
            }).find("node 'x' (input): bytes: 2305843009213693952 x 4 overflows"),
            std::string::npos);
  // Each operand fits; the join space 2^31 x 2^31 x 2^31 does not.
  EXPECT_NE(error_of([] { (void)build_workload("chain:size=2147483648"); }).find("overflows 64-bit integers"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)build_workload("chain:size=4611686018427387904"); }).find("overflows 64-bit integers"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)build_workload("chain-sum:size=4611686018427387904,skewed=1"); })
                .find("overflows 64-bit integers"),
            std::string::npos);
  // The same through JSON.
  auto j = nlohmann::json::parse(R"({"nodes": [
      {"name": "a", "kind": "input", "shape": [4294967296, 4294967296]}]})");
  EXPECT_NE(error_of([&] { (void)graph_from_json(j, "big.json"); }).find("big.json"), std::string::npos);
}

TEST(Checked, TheLargestJoinSpaceThatFitsStillBuildsAndLowers) {
  // 2^20 per index: join space 2^60, bytes of each operand 2^42.
  Graph g = build_workload("chain:size=1048576");
  EXPECT_EQ(g.node(*g.find("XY")).einsum.join_elements(), std::int64_t{1} << 60);
  TaskGraph tg = lower(g, split_largest(g, 4));
  EXPECT_GT(tg.summary().bytes_moved, 0);
}

}  // namespace
}  // namespace tessel
