#pragma once
// Statistics every module shares: one median, percentiles, the median's confidence
// interval, the mean absolute percentage error, Kendall's tau and the paired-round ranking check of `compare`.
//
// Definitions (pinned by tests/core/stats_test.cc):
// - median: the middle value of the sorted values; for an even count the mean of the
//   two middle values. percentile(v, 50) is the same number.
// - percentile(v, p): linear interpolation between closest ranks (numpy's default):
//   sorted x, rank r = p/100 · (n − 1), x[floor r] + (r − floor r)(x[ceil r] − x[floor r]).
// - median_index: the index of an element that actually occurred and is the median for
//   odd counts; for even counts the upper of the two middle values (ties: the earlier
//   index). Use it to pick a representative run (a timeline must be one that happened).
// Empty input gives NaN (median, percentile, mape) or 0 (median_index): callers that
// must not see it check for emptiness first.

#include <cstddef>
#include <vector>

namespace tessel::stats {

[[nodiscard]] double median(std::vector<double> values);
[[nodiscard]] double percentile(std::vector<double> values, double p);
[[nodiscard]] std::size_t median_index(const std::vector<double>& values);
[[nodiscard]] double mean(const std::vector<double>& values);

// The spread of repeated measurements: 10th and 90th percentiles.
struct Spread {
  double p10 = 0;
  double p90 = 0;
  [[nodiscard]] double width() const { return p90 - p10; }
};
[[nodiscard]] Spread spread(const std::vector<double>& values);

// A distribution-free confidence interval for the median of what the values were drawn
// from (independent draws, any distribution): the j-th smallest and the j-th largest value,
// j the largest rank whose interval covers the median with probability at least `level`,
// 1 − 2·P(B < j) for B ~ Binomial(n, 1/2) (the sign test's interval). Too few values for the
// level (n ≤ 5 at 95%) give the whole range with its lower coverage: `coverage` is always
// the interval's own. Empty input gives NaN bounds and coverage 0.
struct MedianInterval {
  double low = 0;
  double high = 0;
  double coverage = 0;  // P(low ≤ median ≤ high) before the draws were seen
};
[[nodiscard]] MedianInterval median_interval(std::vector<double> values, double level = 0.95);

// (predicted − actual) / actual · 100.
[[nodiscard]] double error_pct(double predicted, double actual);
// Mean of |e| over percentage errors.
[[nodiscard]] double mape_pct(const std::vector<double>& errors_pct);

// Kendall's tau-a between two scorings of the same items: (concordant − discordant) /
// (n(n−1)/2); a pair tied on either side counts as neither. 1 for fewer than two items.
[[nodiscard]] double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);

// The ranking check that noise cannot decide by chance. Two items of one group are
// "measured apart" when one was faster than the other in every round (rounds are
// paired: both ran within seconds of each other) and there were at least three rounds;
// such a pair "agrees" when the simulated order is the same. Pairs whose measured order
// flips between rounds are reported, not judged.
struct PairOrder {
  std::size_t a = 0, b = 0;      // item indices, a < b
  double measured_diff_pct = 0;  // (measured[a] − measured[b]) / measured[b] · 100
  double simulated_diff_pct = 0;
  bool measured_apart = false;
  bool agrees = false;
};
// Every pair a < b with group[a] == group[b]. measured_rounds[i] are item i's rounds;
// measured[i] and simulated[i] its summaries (medians).
[[nodiscard]] std::vector<PairOrder> pair_orders(const std::vector<std::vector<double>>& measured_rounds,
                                                 const std::vector<double>& measured,
                                                 const std::vector<double>& simulated, const std::vector<int>& group);

}  // namespace tessel::stats
