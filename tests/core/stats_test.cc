#include "core/stats.h"

#include <cmath>

#include <gtest/gtest.h>

namespace tessel::stats {
namespace {

TEST(Stats, MedianOfAnOddCountIsTheMiddleValue) { EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3); }

TEST(Stats, MedianOfAnEvenCountAveragesTheTwoMiddleValues) {
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({10, 20}), 15);
  EXPECT_DOUBLE_EQ(median({7, 7, 1, 9}), 7);
}

TEST(Stats, MedianOfNothingIsNaN) { EXPECT_TRUE(std::isnan(median({}))); }

TEST(Stats, PercentileInterpolatesBetweenClosestRanks) {
  // sorted 1 2 3 4 5: rank of p10 = 0.4 -> 1.4; p90 = 3.6 -> 4.6 (numpy: 1.4, 4.6)
  EXPECT_DOUBLE_EQ(percentile({5, 4, 3, 2, 1}, 10), 1.4);
  EXPECT_DOUBLE_EQ(percentile({5, 4, 3, 2, 1}, 90), 4.6);
  EXPECT_DOUBLE_EQ(percentile({5, 4, 3, 2, 1}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({5, 4, 3, 2, 1}, 100), 5);
  EXPECT_DOUBLE_EQ(percentile({42}, 90), 42);
}

TEST(Stats, FiftiethPercentileIsTheMedian) {
  std::vector<double> v{3, 9, 1, 4, 8, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 50), median(v));
}

TEST(Stats, SpreadIsP10ToP90) {
  Spread s = spread({1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(s.p10, 1.4);
  EXPECT_DOUBLE_EQ(s.p90, 4.6);
  EXPECT_DOUBLE_EQ(s.width(), 3.2);
}

TEST(Stats, MedianIndexPicksAnElementThatOccurred) {
  EXPECT_EQ(median_index({30, 10, 20}), 2u);
  EXPECT_EQ(median_index({40, 10, 30, 20}), 2u);  // upper middle: 30
  EXPECT_EQ(median_index({5, 5, 5}), 1u);         // ties keep their order
}

TEST(Stats, MapeIsTheMeanOfAbsolutePercentageErrors) {
  EXPECT_DOUBLE_EQ(mape_pct({10, -20, 0, 30}), 15);
  EXPECT_DOUBLE_EQ(error_pct(110, 100), 10);
  EXPECT_DOUBLE_EQ(error_pct(90, 100), -10);
}

TEST(Stats, KendallTauCountsConcordantAndDiscordantPairs) {
  EXPECT_DOUBLE_EQ(kendall_tau({1, 2, 3}, {10, 20, 30}), 1);
  EXPECT_DOUBLE_EQ(kendall_tau({1, 2, 3}, {30, 20, 10}), -1);
  // pairs (0,1) concordant, (0,2) concordant, (1,2) discordant: (2 - 1) / 3
  EXPECT_DOUBLE_EQ(kendall_tau({1, 2, 3}, {1, 3, 2}), 1.0 / 3);
  // a tie counts as neither: (0,1) tied, (0,2) and (1,2) concordant -> 2/3
  EXPECT_DOUBLE_EQ(kendall_tau({1, 1, 3}, {1, 2, 3}), 2.0 / 3);
  EXPECT_DOUBLE_EQ(kendall_tau({7}, {3}), 1);
}

TEST(Stats, PairOrdersJudgeOnlyPairsMeasuredApartInEveryRound) {
  // items 0 and 1: 0 faster in all three rounds; item 2 flips against both.
  std::vector<std::vector<double>> rounds{{1, 1, 1}, {2, 2, 2}, {1.5, 0.5, 3}};
  std::vector<double> measured{1, 2, 1.5}, simulated{1, 3, 2};
  auto pairs = pair_orders(rounds, measured, simulated, {0, 0, 0});
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_TRUE(pairs[0].measured_apart);
  EXPECT_TRUE(pairs[0].agrees);
  EXPECT_DOUBLE_EQ(pairs[0].measured_diff_pct, -50);
  EXPECT_DOUBLE_EQ(pairs[0].simulated_diff_pct, -100.0 * 2 / 3);
  EXPECT_FALSE(pairs[1].measured_apart);  // 0 vs 2 flips
  EXPECT_FALSE(pairs[2].measured_apart);  // 1 vs 2 flips

  // the simulated order reversed: measured apart but not agreeing
  auto reversed = pair_orders(rounds, measured, {3, 1, 2}, {0, 0, 0});
  EXPECT_TRUE(reversed[0].measured_apart);
  EXPECT_FALSE(reversed[0].agrees);
}

TEST(Stats, PairOrdersSkipPairsOfDifferentGroupsAndNeedThreeRounds) {
  std::vector<std::vector<double>> rounds{{1, 1}, {2, 2}, {3, 3}};
  auto pairs = pair_orders(rounds, {1, 2, 3}, {1, 2, 3}, {0, 0, 1});
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].a, 0u);
  EXPECT_EQ(pairs[0].b, 1u);
  EXPECT_FALSE(pairs[0].measured_apart);  // two rounds only
}

}  // namespace
}  // namespace tessel::stats
