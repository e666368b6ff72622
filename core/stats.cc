#include "core/stats.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

namespace tessel::stats {

double percentile(std::vector<double> v, double p) {
  assert(p >= 0 && p <= 100);
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double rank = p / 100 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (rank - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const std::size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const double upper = v[n / 2];
  if (n % 2) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2));
  return (lower + upper) / 2;
}

std::size_t median_index(const std::vector<double>& v) {
  if (v.empty()) return 0;
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  return order[order.size() / 2];
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

MedianInterval median_interval(std::vector<double> v, double level) {
  assert(level > 0 && level < 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (v.empty()) return {nan, nan, 0};
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double dn = static_cast<double>(n);
  // P(B = i) in logs: C(n, i) / 2^n underflows for the n `--repeat` allows.
  auto pmf = [&](std::size_t i) {
    const double di = static_cast<double>(i);
    return std::exp(std::lgamma(dn + 1) - std::lgamma(di + 1) - std::lgamma(dn - di + 1) - dn * std::log(2.0));
  };
  std::size_t j = 1;           // ranks from 1: the j-th smallest is v[j − 1]
  double below = pmf(0);       // P(B < j)
  double coverage = 1 - 2 * below;
  while (j + 1 <= (n + 1) / 2) {  // the next rank still leaves low ≤ high
    const double next = 1 - 2 * (below + pmf(j));
    if (next < level) break;
    below += pmf(j);
    coverage = next;
    ++j;
  }
  return {v[j - 1], v[n - j], std::max(0.0, coverage)};
}

Spread spread(const std::vector<double>& v) { return {percentile(v, 10), percentile(v, 90)}; }

double error_pct(double predicted, double actual) { return (predicted - actual) / actual * 100; }

double mape_pct(const std::vector<double>& errors_pct) {
  if (errors_pct.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (double e : errors_pct) sum += std::fabs(e);
  return sum / static_cast<double>(errors_pct.size());
}

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  assert(a.size() == b.size());
  const std::size_t n = a.size();
  if (n < 2) return 1.0;
  double concordant = 0, discordant = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      const double s = (a[i] - a[j]) * (b[i] - b[j]);
      if (s > 0) ++concordant;
      if (s < 0) ++discordant;
    }
  return (concordant - discordant) / (static_cast<double>(n) * static_cast<double>(n - 1) / 2);
}

std::vector<PairOrder> pair_orders(const std::vector<std::vector<double>>& measured_rounds,
                                   const std::vector<double>& measured, const std::vector<double>& simulated,
                                   const std::vector<int>& group) {
  std::vector<PairOrder> out;
  for (std::size_t a = 0; a < measured.size(); ++a)
    for (std::size_t b = a + 1; b < measured.size(); ++b) {
      if (group[a] != group[b]) continue;
      PairOrder p;
      p.a = a;
      p.b = b;
      p.measured_diff_pct = error_pct(measured[a], measured[b]);
      p.simulated_diff_pct = error_pct(simulated[a], simulated[b]);
      const auto& ra = measured_rounds[a];
      const auto& rb = measured_rounds[b];
      const std::size_t n = std::min(ra.size(), rb.size());
      std::size_t faster = 0, slower = 0;
      for (std::size_t r = 0; r < n; ++r) {
        if (ra[r] < rb[r]) ++faster;
        if (ra[r] > rb[r]) ++slower;
      }
      p.measured_apart = n >= 3 && (faster == n || slower == n);
      p.agrees = (faster == n && simulated[a] < simulated[b]) || (slower == n && simulated[a] > simulated[b]);
      out.push_back(p);
    }
  return out;
}

}  // namespace tessel::stats
