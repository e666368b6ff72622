#include "core/partition.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tessel
