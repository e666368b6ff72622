#include "core/stats.h"

#include <cmath>
#include <cstdint>
#include <random>

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

// The sign test's interval in closed form: j-th smallest to j-th largest, coverage
// 1 − 2·sum_{i<j} C(n, i) / 2^n, counted here in integers.
double exact_coverage(int n, int j) {
  std::int64_t below = 0, c = 1;  // C(n, i)
  for (int i = 0; i < j; ++i) {
    below += c;
    c = c * (n - i) / (i + 1);
  }
  return 1 - 2 * static_cast<double>(below) / static_cast<double>(std::int64_t{1} << n);
}

std::vector<double> shuffled_ranks(int n) {  // 0 .. n − 1, in a fixed scrambled order
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back((i * 17) % n);
  return v;
}

TEST(Stats, MedianIntervalTakesTheWidestRanksThatStillReachTheLevel) {
  struct Case {
    int n, j;  // j: the rank the 95% interval must use
  };
  for (Case c : {Case{7, 1}, Case{9, 2}, Case{15, 4}, Case{31, 10}}) {
    SCOPED_TRACE(c.n);
    const MedianInterval m = median_interval(shuffled_ranks(c.n));
    EXPECT_EQ(m.low, c.j - 1);
    EXPECT_EQ(m.high, c.n - c.j);
    EXPECT_NEAR(m.coverage, exact_coverage(c.n, c.j), 1e-12);
    EXPECT_GE(m.coverage, 0.95);
    EXPECT_LT(exact_coverage(c.n, c.j + 1), 0.95);  // one rank further in would miss the level
  }
  // Five values cannot reach 95%: the whole range, with the coverage it has.
  const MedianInterval five = median_interval({3, 1, 4, 1.5, 9});
  EXPECT_EQ(five.low, 1);
  EXPECT_EQ(five.high, 9);
  EXPECT_NEAR(five.coverage, 1 - 2.0 / 32, 1e-12);
  // A lower level narrows it: 31 values at 80% use rank 12 (coverage 1 − 2·P(B < 12)).
  const MedianInterval m80 = median_interval(shuffled_ranks(31), 0.8);
  EXPECT_EQ(m80.low, 11);
  EXPECT_EQ(m80.high, 19);
  EXPECT_NEAR(m80.coverage, exact_coverage(31, 12), 1e-12);
}

TEST(Stats, MedianIntervalOfFewValuesCoversLittle) {
  const MedianInterval none = median_interval({});
  EXPECT_TRUE(std::isnan(none.low) && std::isnan(none.high));
  EXPECT_EQ(none.coverage, 0);
  const MedianInterval one = median_interval({2.5});
  EXPECT_EQ(one.low, 2.5);
  EXPECT_EQ(one.high, 2.5);
  EXPECT_EQ(one.coverage, 0);  // a single draw lands on the median with probability 0
  EXPECT_NEAR(median_interval({4, 2}).coverage, 0.5, 1e-12);
}

TEST(Stats, MedianIntervalCoversTheMedianAsOftenAsItSays) {
  // Draws from a skewed distribution whose median is known (exponential: ln 2).
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> draw(1.0);
  const int trials = 4000;
  int covered = 0;
  double coverage = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> v(15);
    for (double& x : v) x = draw(rng);
    const MedianInterval m = median_interval(v);
    coverage = m.coverage;
    covered += m.low <= std::log(2.0) && std::log(2.0) <= m.high;
  }
  // 0.965 claimed; the binomial standard error over 4000 trials is 0.003.
  EXPECT_NEAR(static_cast<double>(covered) / trials, coverage, 0.015);
}

TEST(Stats, MedianIntervalStaysFiniteForTenThousandValues) {
  std::vector<double> v;
  for (int i = 0; i < 10000; ++i) v.push_back(i);
  const MedianInterval m = median_interval(v);
  // Normal approximation: ranks n/2 ± 1.96·sqrt(n)/2 ≈ 5000 ± 98.
  EXPECT_NEAR(m.low, 4901, 3);
  EXPECT_NEAR(m.high, 9999 - m.low, 0);
  EXPECT_GE(m.coverage, 0.95);
  EXPECT_LT(m.coverage, 0.96);
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
