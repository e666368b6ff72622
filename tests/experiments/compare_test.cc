// The compare experiment as a module: summarise() on hand-made rounds, and a small
// run without the CLI.
#include "experiments/compare.h"

#include <cmath>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/workloads.h"

namespace tessel::experiments {
namespace {

CompareRounds rounds_of(std::string strategy, std::string policy, std::vector<double> sim, std::vector<double> meas) {
  CompareRounds r;
  r.strategy = std::move(strategy);
  r.policy = std::move(policy);
  r.tasks = 10;
  r.simulated_s = std::move(sim);
  r.measured_s = std::move(meas);
  return r;
}

TEST(CompareSummary, RowErrorIsTheMedianOfPairedRoundErrors) {
  CompareResult res;
  // errors per round: +10%, -10%, +20%, 0% -> median (0 + 10) / 2 = 5%
  summarise(res, {rounds_of("a", "async", {1.1, 0.9, 1.2, 1.0}, {1, 1, 1, 1})});
  ASSERT_EQ(res.rows.size(), 1u);
  EXPECT_NEAR(res.rows[0].error_pct, 5, 1e-9);
  EXPECT_NEAR(res.rows[0].simulated_s, 1.05, 1e-12);
  EXPECT_NEAR(res.rows[0].measured_s, 1, 1e-12);
  EXPECT_NEAR(res.mape_pct, 5, 1e-9);
}

TEST(CompareSummary, EachRowSaysWhereItsMedianErrorLies) {
  CompareResult res;
  // Seven rounds with errors -30, -3, -2, 0, +1, +4, +40%: the median is 0; 95% from seven
  // rounds needs the whole range (coverage 1 − 2/128); nine rounds drop one at each end.
  std::vector<double> sim7 = {0.7, 0.97, 0.98, 1.0, 1.01, 1.04, 1.4};
  std::vector<double> sim9 = {0.5, 0.7, 0.97, 0.98, 1.0, 1.01, 1.04, 1.4, 2.0};
  summarise(res, {rounds_of("a", "async", sim7, std::vector<double>(7, 1.0)),
                  rounds_of("b", "async", sim9, std::vector<double>(9, 1.0))});
  EXPECT_NEAR(res.rows[0].error_pct, 0, 1e-9);
  EXPECT_NEAR(res.rows[0].error_interval_pct.low, -30, 1e-9);
  EXPECT_NEAR(res.rows[0].error_interval_pct.high, 40, 1e-9);
  EXPECT_NEAR(res.rows[0].error_interval_pct.coverage, 1 - 2.0 / 128, 1e-12);
  EXPECT_NEAR(res.rows[1].error_interval_pct.low, -30, 1e-9);
  EXPECT_NEAR(res.rows[1].error_interval_pct.high, 40, 1e-9);
  EXPECT_NEAR(res.rows[1].error_interval_pct.coverage, 1 - 2.0 * 10 / 512, 1e-12);
  auto j = compare_to_json(res);
  EXPECT_NEAR(j["rows"][1]["error_ci_low_pct"].get<double>(), -30, 1e-9);
  EXPECT_NEAR(j["rows"][1]["error_ci_high_pct"].get<double>(), 40, 1e-9);
  EXPECT_NEAR(j["rows"][1]["error_ci_coverage"].get<double>(), 1 - 2.0 * 10 / 512, 1e-12);
}

TEST(CompareSummary, RetainedKernelTimeIsTheRetainedShareOfTheWayFromDramToCold) {
  EXPECT_DOUBLE_EQ(retained_kernel_seconds(1e-3, 3e-3, 0.25), 2.5e-3);
  EXPECT_DOUBLE_EQ(retained_kernel_seconds(1e-3, 3e-3, 1), 1e-3);  // all kept: cold
  EXPECT_DOUBLE_EQ(retained_kernel_seconds(1e-3, 3e-3, 0), 3e-3);  // nothing kept: DRAM
  EXPECT_DOUBLE_EQ(retained_kernel_seconds(1e-3, 3e-3, 1.4), 1e-3);   // clamped
  EXPECT_DOUBLE_EQ(retained_kernel_seconds(1e-3, 3e-3, -0.2), 3e-3);  // clamped
  EXPECT_DOUBLE_EQ(retained_kernel_seconds(1e-3, -1, 0.5), 1e-3);     // no DRAM time: cold
  EXPECT_EQ(parse_kernel_times("retained", "--kernel-times"), KernelTimes::retained);
  EXPECT_EQ(to_string(KernelTimes::retained), "retained");
}

// With retained kernel times the cold simulation of the same rounds stands beside it.
TEST(CompareSummary, TheColdSimulationBesideRetainedTimesHasItsOwnErrorAndMape) {
  CompareResult res;
  CompareRounds a = rounds_of("a", "async", {1.0, 1.0, 1.0}, {1.0, 1.0, 1.0});
  a.cold_s = {0.8, 0.9, 0.7};
  CompareRounds b = rounds_of("b", "async", {2.0, 2.0, 2.0}, {2.0, 2.0, 2.0});
  b.cold_s = {2.2, 2.2, 2.2};
  summarise(res, {a, b});
  ASSERT_TRUE(res.rows[0].simulated_cold_s && res.rows[0].error_cold_pct);
  EXPECT_NEAR(*res.rows[0].simulated_cold_s, 0.8, 1e-12);
  EXPECT_NEAR(*res.rows[0].error_cold_pct, -20, 1e-9);
  EXPECT_NEAR(*res.rows[1].error_cold_pct, 10, 1e-9);
  ASSERT_TRUE(res.mape_cold_pct);
  EXPECT_NEAR(*res.mape_cold_pct, 15, 1e-9);
  EXPECT_NEAR(res.mape_pct, 0, 1e-9);
  auto j = compare_to_json(res);
  EXPECT_NEAR(j["rows"][0]["error_cold_pct"].get<double>(), -20, 1e-9);
  EXPECT_NEAR(j["mape_cold_pct"].get<double>(), 15, 1e-9);
  // Without cold rounds beside: no such figures.
  summarise(res, {rounds_of("a", "async", {1.0}, {1.0})});
  EXPECT_FALSE(res.rows[0].simulated_cold_s);
  EXPECT_FALSE(res.mape_cold_pct);
  EXPECT_TRUE(compare_to_json(res)["mape_cold_pct"].is_null());
}

TEST(CompareSummary, SpreadOfMeasuredRoundsIsP10ToP90AndFlagsRowsWiderThanTheirError) {
  CompareResult res;
  // measured 1..5: p10 1.4, p90 4.6, median 3 -> spread 3.2 / 3 = 106.7%, error 0: flagged
  // second row: measured all 2, simulated 3 -> spread 0, error +50%: not flagged
  summarise(res, {rounds_of("a", "async", {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}),
                  rounds_of("b", "async", {3, 3, 3, 3, 3}, {2, 2, 2, 2, 2})});
  EXPECT_DOUBLE_EQ(res.rows[0].measured_spread_s.p10, 1.4);
  EXPECT_DOUBLE_EQ(res.rows[0].measured_spread_s.p90, 4.6);
  EXPECT_NEAR(res.rows[0].measured_spread_pct, 3.2 / 3 * 100, 1e-9);
  EXPECT_TRUE(res.rows[0].spread_exceeds_error);
  EXPECT_DOUBLE_EQ(res.rows[1].measured_spread_pct, 0);
  EXPECT_NEAR(res.rows[1].error_pct, 50, 1e-9);
  EXPECT_FALSE(res.rows[1].spread_exceeds_error);
  auto j = compare_to_json(res);
  EXPECT_EQ(j["rows_spread_exceeds_error"], 1);
  EXPECT_EQ(j["rows"][0]["spread_exceeds_error"], true);
  EXPECT_DOUBLE_EQ(j["rows"][0]["measured_p10_s"].get<double>(), 1.4);
  EXPECT_DOUBLE_EQ(j["rows"][0]["measured_p90_s"].get<double>(), 4.6);
}

TEST(CompareSummary, RankingIsJudgedWithinAPolicyOnly) {
  CompareResult res;
  summarise(res, {rounds_of("a", "async", {1, 1, 1}, {1, 1, 1}), rounds_of("a", "bsp", {5, 5, 5}, {5, 5, 5}),
                  rounds_of("b", "async", {2, 2, 2}, {3, 3, 3}), rounds_of("b", "bsp", {6, 6, 6}, {7, 7, 7})});
  ASSERT_EQ(res.pairs.size(), 2u);  // a-b under async, a-b under bsp
  for (const auto& p : res.pairs) {
    EXPECT_TRUE(p.measured_apart);
    EXPECT_TRUE(p.agrees);
  }
  EXPECT_DOUBLE_EQ(res.kendall_tau_by_policy.at("async"), 1);
  EXPECT_DOUBLE_EQ(res.kendall_tau_by_policy.at("bsp"), 1);
  auto j = compare_to_json(res);
  EXPECT_EQ(j["ranking"]["preserved"], true);
  EXPECT_EQ(j["ranking"]["measured_apart"], 2);
}

TEST(CompareSummary, AnalyticAndHotFiguresAppearOnlyWhenSimulated) {
  CompareResult res;
  CompareRounds r = rounds_of("a", "async", {1, 1, 1}, {1, 1, 1});
  r.analytic_s = {2, 2, 2};
  summarise(res, {r});
  ASSERT_TRUE(res.rows[0].error_analytic_pct.has_value());
  EXPECT_NEAR(*res.rows[0].error_analytic_pct, 100, 1e-9);
  EXPECT_FALSE(res.rows[0].error_hot_pct.has_value());
  EXPECT_NEAR(res.mape_analytic_pct, 100, 1e-9);
  EXPECT_NEAR(res.mape_hot_pct, 0, 1e-9);  // no hot simulation: the profiled error stands in
  auto j = to_json(res.rows[0]);
  EXPECT_TRUE(j.contains("simulated_analytic_s"));
  EXPECT_FALSE(j.contains("simulated_hot_s"));
}

TEST(CompareRun, RunsWithoutTheCliOnAGivenMachine) {
  Graph g = build_workload("chain:size=32");
  CompareOptions o;
  o.devices = 2;
  o.strategies = {"split-largest"};
  o.policies = {"async"};
  o.machine = machine_preset("cpu:2");
  o.machine_name = "cpu:2";
  o.repeat = 3;
  o.warmup = 0;
  o.profiled = false;
  CompareResult res = run_compare(g, "chain:size=32", o, stdout);
  ASSERT_EQ(res.rows.size(), 1u);
  EXPECT_TRUE(res.correct);
  EXPECT_EQ(res.rows[0].rounds.measured_s.size(), 3u);
  EXPECT_GT(res.rows[0].simulated_s, 0);
  EXPECT_GT(res.rows[0].measured_s, 0);
  EXPECT_LE(res.rows[0].measured_spread_s.p10, res.rows[0].measured_spread_s.p90);
  EXPECT_EQ(res.kernels_profiled, 0u);
  EXPECT_EQ(res.tasks_profiled, 0u);
  EXPECT_FALSE(res.task_kinds.empty());
}

TEST(CompareRun, AMachineOfAnotherDeviceCountIsRefusedBeforeMeasuring) {
  Graph g = build_workload("chain:size=32");
  CompareOptions o;
  o.devices = 2;
  o.machine = machine_preset("cpu:4");
  o.machine_name = "cpu:4";
  EXPECT_THROW((void)run_compare(g, "chain", o, stdout), Error);
  o.machine = machine_preset("cpu:2");
  o.strategies = {"no-such-strategy"};
  EXPECT_THROW((void)run_compare(g, "chain", o, stdout), Error);
}

}  // namespace
}  // namespace tessel::experiments
