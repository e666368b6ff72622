#include "core/partition.h"

#include <gtest/gtest.h>

#include <chrono>

#include "core/error.h"
#include "core/workloads.h"

namespace tessel {
namespace {

TEST(Partition, BlocksTileTheSpaceExactlyOnce) {
  for (Partition p : {Partition::even({7, 5, 3}, {3, 2, 1}), Partition::from_bounds({{0, 1, 6, 7}, {0, 2, 5}})}) {
    Shape s = p.shape();
    std::vector<int> hits(static_cast<std::size_t>(elements(s)), 0);
    for (std::int64_t b = 0; b < p.num_blocks(); ++b) {
      Rect r = p.block(b);
      std::array<int, kMaxRank> c{};
      for (int d = 0; d < p.rank(); ++d) {
        int first = 0, last = 0;
        p.overlapping(d, r.offset[d], r.offset[d] + r.size[d], &first, &last);
        EXPECT_EQ(last - first, 1);
        c[d] = first;
      }
      EXPECT_EQ(p.block_index(c), b);
      // Count every element of the block.
      std::vector<std::int64_t> idx(static_cast<std::size_t>(r.rank), 0);
      for (std::int64_t e = 0; e < r.elements(); ++e) {
        std::int64_t flat = 0, rem = e;
        for (int d = r.rank - 1; d >= 0; --d) {
          idx[d] = r.offset[d] + rem % r.size[d];
          rem /= r.size[d];
        }
        for (int d = 0; d < r.rank; ++d) flat = flat * s[d] + idx[d];
        ++hits[static_cast<std::size_t>(flat)];
      }
    }
    for (int h : hits) EXPECT_EQ(h, 1);
  }
}

TEST(Partition, EvenSplitsDifferByAtMostOne) {
  Partition p = Partition::even({10}, {4});
  EXPECT_EQ(p.bounds()[0], (std::vector<std::int64_t>{0, 2, 5, 7, 10}));
  EXPECT_TRUE(p.is_even());
  EXPECT_FALSE(Partition::from_bounds({{0, 1, 10}}).is_even());
}

TEST(Partition, ImpossiblePartitionsAreErrors) {
  EXPECT_THROW((void)Partition::even({3}, {4}), Error);        // more parts than elements
  EXPECT_THROW((void)Partition::even({3, 3}, {1}), Error);     // rank mismatch
  EXPECT_THROW((void)Partition::even({3}, {0}), Error);        // zero parts
  EXPECT_THROW((void)Partition::from_bounds({{0, 2, 2, 4}}), Error);  // not increasing
  EXPECT_THROW((void)Partition::from_bounds({{1, 4}}), Error);        // does not start at 0
}

TEST(Decomposition, ValidationNamesTheNode) {
  Graph g = build_workload("chain:size=8");
  Decomposition d = split_largest(g, 2);
  d.nodes[3].devices[0] = DeviceId(5);
  try {
    d.validate(g);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'XY': device 5 out of range [0, 2)"), std::string::npos) << e.what();
  }
  d = split_largest(g, 2);
  d.nodes[3].devices.pop_back();
  EXPECT_THROW(d.validate(g), Error);
}

TEST(Decomposition, SplitLargestCutsTheLargestIndexFirst) {
  EXPECT_EQ(split_largest_parts({1000, 4096, 64}, 8), (std::vector<int>{1, 8, 1}));
  EXPECT_EQ(split_largest_parts({16, 16}, 6), (std::vector<int>{3, 2}));
  EXPECT_EQ(split_largest_parts({2, 2}, 8), (std::vector<int>{2, 2}));  // cannot reach 8 blocks
}

}  // namespace
}  // namespace tessel

#include <nlohmann/json.hpp>

#include "core/io.h"

namespace tessel {
namespace {

TEST(Decomposition, PostAggregationOutputPartitionsRoundTripAndAreChecked) {
  Graph g = build_workload("chain:size=8");
  Decomposition d = decomposition_from_parts(g, 4, {{}, {}, {}, {1, 2, 2}, {}, {}});
  d.nodes[3].output = Partition::even({8, 8}, {4, 1});  // XY's partials aggregated by rows
  d.nodes[3].agg_devices = {DeviceId(0), DeviceId(1), DeviceId(2), DeviceId(3)};
  d.validate(g);
  EXPECT_EQ(decomposition_from_json(nlohmann::json::parse(to_json(d, g).dump()), g), d);
  d.nodes[3].agg_devices.pop_back();
  EXPECT_THROW(d.validate(g), Error);  // one site per output block
  Decomposition e = decomposition_from_parts(g, 2, {});
  e.nodes[3].output = Partition::even({8, 8}, {2, 1});
  EXPECT_THROW(e.validate(g), Error);  // nothing aggregated is split
}

// Requests beyond the limits are refused before any block is made, and large sizes
// split without overflow.
TEST(Partition, TooManyBlocksIsAnErrorAndHugeSizesSplitExactly) {
  const std::int64_t big = std::int64_t{1} << 20;
  try {
    (void)Partition::even({big, big, big}, {4096, 4096, 1});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("partition 4096x4096x1: more than 4194304 blocks"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)Partition::from_bounds({std::vector<std::int64_t>(5'000'000)}), Error);
  const std::int64_t huge = (std::int64_t{1} << 62) + 3;
  Partition p = Partition::even({huge}, {3});
  const std::int64_t q = huge / 3;  // huge = 3q + 1: floor(huge i / 3) = q i for i < 3
  EXPECT_EQ(p.bounds()[0], (std::vector<std::int64_t>{0, q, 2 * q, huge}));
}

TEST(Decomposition, SplitLargestFactorsALargePrimeBlockCountAtOnce) {
  // 2147483647 is prime: factoring by trial division up to it took minutes.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(split_largest_parts({256, 256}, 2147483647), (std::vector<int>{1, 1}));
  EXPECT_EQ(split_largest_parts({256, 256}, 2 * 65521), (std::vector<int>{2, 1}));  // 65521 > 256: not applied
  EXPECT_EQ(split_largest_parts({64, 32}, 12), (std::vector<int>{6, 2}));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

}  // namespace
}  // namespace tessel
