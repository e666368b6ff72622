// `tessel calibrate` and `tessel compare` end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io.h"
#include "core/machine.h"
#include "tests/support/cli.h"

namespace tessel {
namespace {

using testing::run_tessel;
using testing::temp_path;

TEST(CalibrateCli, WritesASingleLaneMachineForTheRequestedWorkers) {
  auto out = temp_path("tessel_calibrate.json");
  auto r = run_tessel("calibrate -d 2 --seconds 0.005 --rounds 1 -o " + out.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.output();
  Machine m = machine_from_json(read_json_file(out.string()), out.string());
  EXPECT_EQ(m.num_devices(), 2);
  EXPECT_TRUE(m.device_types.at(0).single_lane);
  EXPECT_GT(m.device_types[0].generic_flops_per_s, 0);
  EXPECT_FALSE(m.device_types[0].efficiency.empty());
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["peak_flops_per_s"].get<double>(), 0);
  EXPECT_GT(j["copy_bytes_per_s_alone"].get<double>(), 0);
  std::filesystem::remove(out);
}

TEST(CompareCli, JsonHasRowsPerStrategyAndPolicyWithErrorsAndRanking) {
  auto machine = temp_path("tessel_compare_machine.json");
  ASSERT_EQ(run_tessel("calibrate -d 2 --seconds 0.005 --rounds 1 -o " + machine.string()).status, 0);
  auto dir = temp_path("tessel_compare_traces");
  std::filesystem::remove_all(dir);
  auto r = run_tessel("compare -w chain:size=64 -d 2 -s split-largest --repeat 1 -m " + machine.string() + " --trace-dir " +
                      dir.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.output();
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 2u);  // one strategy x async, bsp
  for (const auto& row : j["rows"]) {
    for (const char* key : {"strategy", "policy", "simulated_s", "measured_s", "error_pct"})
      EXPECT_TRUE(row.contains(key)) << key;
    EXPECT_GT(row["simulated_s"].get<double>(), 0);
    EXPECT_GT(row["measured_s"].get<double>(), 0);
    double expected = (row["simulated_s"].get<double>() - row["measured_s"].get<double>()) /
                      row["measured_s"].get<double>() * 100;
    EXPECT_NEAR(row["error_pct"].get<double>(), expected, 1e-9);
    EXPECT_TRUE(row["correct"].get<bool>());
  }
  EXPECT_TRUE(std::isfinite(j["mape_pct"].get<double>()));
  EXPECT_TRUE(j.contains("kendall_tau"));
  EXPECT_TRUE(j["task_kinds"].contains("compute"));
  for (const char* f : {"split-largest-async-measured.json", "split-largest-async-simulated.json",
                        "split-largest-bsp-measured.json", "split-largest-bsp-simulated.json"})
    EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
  std::filesystem::remove_all(dir);
  std::filesystem::remove(machine);
}

// The ranking check, recomputed from the rows' per-round times: a pair of strategies
// under one policy is measured apart when one ran faster in every round, and agrees
// when the simulated medians order it the same way.
TEST(CompareCli, RankingCheckJudgesOnlyPairsTheRoundsOrderAlike) {
  auto machine = temp_path("tessel_compare_rank_machine.json");
  ASSERT_EQ(run_tessel("calibrate -d 2 --seconds 0.005 --rounds 1 -o " + machine.string()).status, 0);
  auto r = run_tessel("compare -w chain:size=96 -d 2 -s split-largest,data-parallel,megatron --repeat 3 "
                      "--compute-model analytic -m " + machine.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.output();
  auto j = nlohmann::json::parse(r.out);
  const auto& rk = j["ranking"];
  ASSERT_EQ(rk["pairs"].get<int>(), 6);  // 3 pairs of strategies x 2 policies
  auto row_of = [&](const std::string& strategy, const std::string& policy) {
    for (const auto& row : j["rows"])
      if (row["strategy"] == strategy && row["policy"] == policy) return row;
    ADD_FAILURE() << strategy << " " << policy;
    return nlohmann::json();
  };
  int apart = 0, agree = 0;
  for (const auto& p : rk["by_pair"]) {
    auto a = row_of(p["a"], p["policy"]), b = row_of(p["b"], p["policy"]);
    ASSERT_EQ(a["round_measured_s"].size(), 3u);
    int faster = 0, slower = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      faster += a["round_measured_s"][i].get<double>() < b["round_measured_s"][i].get<double>();
      slower += a["round_measured_s"][i].get<double>() > b["round_measured_s"][i].get<double>();
    }
    const bool is_apart = faster == 3 || slower == 3;
    const double sa = a["simulated_s"], sb = b["simulated_s"];
    const bool agrees = (faster == 3 && sa < sb) || (slower == 3 && sa > sb);
    EXPECT_EQ(p["measured_apart"].get<bool>(), is_apart);
    if (is_apart) {
      EXPECT_EQ(p["agrees"].get<bool>(), agrees);
    } else {
      EXPECT_TRUE(p["agrees"].is_null());
    }
    apart += is_apart;
    agree += agrees;
  }
  EXPECT_EQ(rk["measured_apart"].get<int>(), apart);
  EXPECT_EQ(rk["measured_apart_agree"].get<int>(), agree);
  if (apart > 0) {
    EXPECT_EQ(rk["preserved"].get<bool>(), apart == agree);
  } else {
    EXPECT_TRUE(rk["preserved"].is_null());
  }
  std::filesystem::remove(machine);
}

TEST(CompareCli, WithoutAMachineItCalibratesDuringTheTimedRoundsAndReportsTheCalibration) {
  auto r = run_tessel(
      "compare -w chain:size=32 -d 2 -s split-largest --policy async --repeat 2 --warmup 1 "
      "--calibration-seconds 0.002 --json");
  ASSERT_EQ(r.status, 0) << r.output();
  EXPECT_NE(r.err.find("one round before each timed round"), std::string::npos) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["machine"], "calibrated now");
  EXPECT_EQ(j["warmup"], 1);
  ASSERT_TRUE(j["calibration"].is_object());
  EXPECT_GT(j["calibration"]["peak_flops_per_s"].get<double>(), 0);
  EXPECT_GT(j["calibration"]["task_overhead_s"].get<double>(), 0);
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_GT(j["rows"][0]["simulated_s"].get<double>(), 0);
  // By default the kernels are profiled, and the analytic simulation is reported beside.
  EXPECT_EQ(j["compute_model"], "profiled");
  // On the CPU every compute task of the row is timed in place (no GPU kernels).
  EXPECT_GT(j["tasks_profiled"].get<int>(), 0);
  EXPECT_EQ(j["kernels_profiled"], 0);
  // Each compute task takes its time between cold and DRAM by each round's retention
  // (no cache model), the cold-only simulation of the same rounds beside it ...
  EXPECT_EQ(j["kernel_times"], "retained");
  EXPECT_EQ(j["cache_model"], false);
  EXPECT_EQ(j["cache_model_bytes"], 0);
  EXPECT_EQ(j["retained_fraction_by_round"].size(), 2u);
  EXPECT_GT(j["rows"][0]["simulated_cold_s"].get<double>(), 0);
  EXPECT_TRUE(j["mape_cold_pct"].is_number());
  // ... and the same profile's hot-only simulation beside it.
  EXPECT_GT(j["rows"][0]["simulated_hot_s"].get<double>(), 0);
  EXPECT_TRUE(std::isfinite(j["rows"][0]["error_hot_pct"].get<double>()));
  EXPECT_TRUE(std::isfinite(j["mape_hot_pct"].get<double>()));
  EXPECT_GT(j["rows"][0]["simulated_analytic_s"].get<double>(), 0);
  EXPECT_TRUE(std::isfinite(j["mape_analytic_pct"].get<double>()));
  // One paired error per timed round; the row's error is their median.
  ASSERT_EQ(j["rows"][0]["round_errors_pct"].size(), 2u);
  const double a = j["rows"][0]["round_errors_pct"][0], b = j["rows"][0]["round_errors_pct"][1];
  EXPECT_NEAR(j["rows"][0]["error_pct"].get<double>(), (a + b) / 2, 1e-9);
  // Two rounds: where the median lies is between them, with probability 1/2.
  EXPECT_DOUBLE_EQ(j["rows"][0]["error_ci_low_pct"].get<double>(), std::min(a, b));
  EXPECT_DOUBLE_EQ(j["rows"][0]["error_ci_high_pct"].get<double>(), std::max(a, b));
  EXPECT_NEAR(j["rows"][0]["error_ci_coverage"].get<double>(), 0.5, 1e-12);
  // Each row's spread of measured rounds beside its error, and the flag that compares them.
  const auto& row = j["rows"][0];
  EXPECT_LE(row["measured_p10_s"].get<double>(), row["measured_p90_s"].get<double>());
  EXPECT_GE(row["measured_spread_pct"].get<double>(), 0);
  EXPECT_EQ(row["spread_exceeds_error"].get<bool>(),
            row["measured_spread_pct"].get<double>() > std::fabs(row["error_pct"].get<double>()));
  EXPECT_TRUE(j.contains("rows_spread_exceeds_error"));
}

TEST(CompareCli, AnalyticComputeModelSkipsProfiling) {
  auto r = run_tessel(
      "compare -w chain:size=32 -d 2 -s split-largest --policy bsp --repeat 1 --warmup 0 "
      "--calibration-seconds 0.002 --compute-model analytic --json");
  ASSERT_EQ(r.status, 0) << r.output();
  EXPECT_EQ(r.err.find("profiling"), std::string::npos) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["compute_model"], "analytic");
  EXPECT_EQ(j["kernels_profiled"], 0);
  EXPECT_EQ(j["tasks_profiled"], 0);
  EXPECT_EQ(j["cache_model"], false);
  EXPECT_TRUE(j["kernel_times"].is_null());
  EXPECT_FALSE(j["rows"][0].contains("simulated_analytic_s"));
  EXPECT_EQ(j["mape_analytic_pct"], j["mape_pct"]);
  EXPECT_GE(j["calibration"]["barrier_latency_s"].get<double>(), 0);
  // Profiled with hot kernel times only, and JSON says so; --no-cache-model is its
  // deprecated name, with a warning.
  for (const char* hot : {"--kernel-times hot", "--no-cache-model"}) {
    r = run_tessel(std::string("compare -w chain:size=32 -d 2 -s split-largest --policy async --repeat 1 --warmup 0 "
                               "--calibration-seconds 0.002 --json ") + hot);
    ASSERT_EQ(r.status, 0) << r.output();
    j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["compute_model"], "profiled");
    EXPECT_EQ(j["kernel_times"], "hot");
    EXPECT_EQ(j["cache_model"], false);
    EXPECT_FALSE(j["rows"][0].contains("simulated_hot_s"));
    EXPECT_EQ(j["mape_hot_pct"], j["mape_pct"]);
    EXPECT_EQ(r.err.find("deprecated") != std::string::npos, std::string(hot) == "--no-cache-model") << r.err;
  }
  // Retained: the cold simulation beside it, each round's retention in the JSON.
  r = run_tessel("compare -w chain:size=32 -d 2 -s split-largest --policy async --repeat 2 --warmup 0 "
                 "--calibration-seconds 0.002 --kernel-times retained --json");
  ASSERT_EQ(r.status, 0) << r.output();
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kernel_times"], "retained");
  ASSERT_EQ(j["retained_fraction_by_round"].size(), 2u);
  for (const auto& f : j["retained_fraction_by_round"]) {
    EXPECT_GE(f.get<double>(), 0);
    EXPECT_LE(f.get<double>(), 1);
  }
  EXPECT_TRUE(j["rows"][0].contains("simulated_cold_s"));
  EXPECT_TRUE(j["rows"][0].contains("simulated_hot_s"));
  EXPECT_TRUE(j["mape_cold_pct"].is_number());
  // It needs compare's own calibration.
  const auto machine = temp_path("tessel_compare_retained_machine.json");
  ASSERT_EQ(run_tessel("calibrate -d 2 --seconds 0.002 --rounds 1 -o " + machine.string()).status, 0);
  r = run_tessel("compare -w chain:size=32 -d 2 --repeat 1 --kernel-times retained -m " + machine.string());
  EXPECT_EQ(r.status, 1) << r.output();
  EXPECT_NE(r.err.find("--kernel-times retained"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(machine.string()), std::string::npos) << r.err;
  // Not asked for, with -m: the default falls back to cold times (no probe to weigh by).
  r = run_tessel("compare -w chain:size=32 -d 2 -s split-largest --policy async --repeat 1 --warmup 0 --json -m " +
                 machine.string());
  ASSERT_EQ(r.status, 0) << r.output();
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kernel_times"], "cold");
  EXPECT_TRUE(j["retained_fraction_by_round"].is_null());
  EXPECT_FALSE(j["rows"][0].contains("simulated_cold_s"));
  std::filesystem::remove(machine);
  r = run_tessel("compare -w chain:size=32 -d 2 --no-cache-model --kernel-times cached");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--no-cache-model and --kernel-times cached disagree"), std::string::npos) << r.err;
  r = run_tessel("compare -w chain:size=32 -d 2 --kernel-times lukewarm");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--kernel-times"), std::string::npos) << r.err;
  r = run_tessel("compare -w chain:size=32 -d 2 --compute-model guessed");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--compute-model"), std::string::npos) << r.err;
}

// --cache-bytes sets the capacity the cache model gives each simulated worker (the
// machine's roofline keeps its own) and implies --kernel-times cached; with kernel times
// that use no cache model it is refused by name. --kernel-times cached alone holds the
// calibrated per-core cache.
TEST(CompareCli, CacheBytesSetsTheCacheModelsCapacity) {
  auto r = run_tessel(
      "compare -w chain:size=32 -d 2 -s split-largest --policy async --repeat 1 --warmup 0 "
      "--calibration-seconds 0.002 --cache-bytes 4KiB --json");
  ASSERT_EQ(r.status, 0) << r.output();
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kernel_times"], "cached");
  EXPECT_EQ(j["cache_model"], true);
  EXPECT_EQ(j["cache_model_bytes"], 4096);
  EXPECT_GE(j["rows"][0]["simulated_s"].get<double>(), j["rows"][0]["simulated_hot_s"].get<double>());
  r = run_tessel(
      "compare -w chain:size=32 -d 2 -s split-largest --policy async --repeat 1 --warmup 0 "
      "--calibration-seconds 0.002 --cache-bytes 512KiB");
  ASSERT_EQ(r.status, 0) << r.output();
  EXPECT_NE(r.out.find("cache model of 512.00 KiB per worker"), std::string::npos) << r.out;
  r = run_tessel("compare -w chain:size=32 -d 2 --cache-bytes 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("tessel: error: --cache-bytes: '0': expected a whole number"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--cache-bytes: --cache-bytes"), std::string::npos) << r.err;  // the option named once
  r = run_tessel(
      "compare -w chain:size=32 -d 2 -s split-largest --policy async --repeat 1 --warmup 0 "
      "--calibration-seconds 0.002 --kernel-times cached --json");
  ASSERT_EQ(r.status, 0) << r.output();
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cache_model"], true);
  EXPECT_EQ(j["cache_model_bytes"], j["calibration"]["cache_capacity_bytes"]);
  for (const char* off : {"--no-cache-model", "--compute-model analytic", "--kernel-times cold", "--kernel-times hot"}) {
    r = run_tessel(std::string("compare -w chain:size=32 -d 2 --repeat 1 --cache-bytes 4096 ") + off);
    EXPECT_EQ(r.status, 1) << off;
    EXPECT_NE(r.err.find("--cache-bytes: the cache model is off"), std::string::npos) << r.err;
  }
}

TEST(CompareCli, AMachineForAnotherDeviceCountIsRejectedByName) {
  auto machine = temp_path("tessel_compare_machine3.json");
  ASSERT_EQ(run_tessel("calibrate -d 3 --seconds 0.005 --rounds 1 -o " + machine.string()).status, 0);
  auto r = run_tessel("compare -w chain:size=32 -d 2 --repeat 1 -m " + machine.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("describes 3 devices but 2"), std::string::npos) << r.err;
  std::filesystem::remove(machine);
}

TEST(CompareCli, UnknownStrategyOrPolicyIsAnErrorListingTheKnownOnes) {
  auto r = run_tessel("compare -w chain:size=32 -d 2 -s no-such-strategy");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("unknown strategy 'no-such-strategy'"), std::string::npos) << r.err;
  r = run_tessel("compare -w chain:size=32 -d 2 --policy sometimes");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("unknown policy 'sometimes'"), std::string::npos) << r.err;
}

TEST(CompareCli, SearchBoundedBySimulationsComparesTheSamePlanEachTime) {
  // -s search with --budget-simulations and no clock: the plan, so the simulated time on
  // the analytic model, is the same in every run; the progress counts simulations.
  const std::string cmd = "compare -w chain:size=48 -d 2 -s search -m cpu:2 --budget-simulations 12 --compute-model analytic "
                          "--repeat 1 --warmup 0 --json";
  auto a = run_tessel(cmd);
  ASSERT_EQ(a.status, 0) << a.output();
  EXPECT_NE(a.err.find("of 12 simulations"), std::string::npos) << a.err;
  auto b = run_tessel(cmd);
  ASSERT_EQ(b.status, 0) << b.output();
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["rows"][0]["tasks"], jb["rows"][0]["tasks"]);
  EXPECT_EQ(ja["rows"][0]["simulated_s"].get<double>(), jb["rows"][0]["simulated_s"].get<double>());
}

TEST(CalibrateCli, AnUnwritableOutputIsAnErrorAndLeavesNoFile) {
  auto r = run_tessel("calibrate -d 1 --seconds 0.001 -o /nonexistent-dir/m.json");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("/nonexistent-dir/m.json: cannot open for writing"), std::string::npos) << r.err;
  // Refused before measuring, not after seconds of it.
  EXPECT_EQ(r.output().find("calibrating the CPU backend"), std::string::npos) << r.output();
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// --interference-beside: each round simulated a second time with the machine's
// interference rows replaced, and that second simulation is exactly what `simulate`
// gives on a machine holding those rows (none: --no-interference; published: the rows
// left out, so the published defaults apply). A machine whose devices are not single-lane
// and whose rows slow compute 3x and communication 4x makes the three differ.
TEST(CompareCli, InterferenceBesideSimulatesTheSameRoundsWithTheOtherRows) {
  const auto calibrated = temp_path("tessel_beside_calibrated.json");
  ASSERT_EQ(run_tessel("calibrate -d 2 --seconds 0.002 --rounds 1 -o " + calibrated.string()).status, 0);
  nlohmann::json m = read_json_file(calibrated.string());
  for (auto& t : m["device_types"]) t["single_lane"] = false;
  m["interference"]["normal"] = {{"compute_slowdown", 3.0}, {"comm_slowdown", 4.0}, {"source", "test"}};
  const auto measured = temp_path("tessel_beside_measured.json"), published = temp_path("tessel_beside_published.json");
  write_file_atomic(measured.string(), m.dump());
  m.erase("interference");
  write_file_atomic(published.string(), m.dump());
  auto makespan = [](const std::string& args) {
    auto r = run_tessel("simulate -w ffn -d 2 -s megatron " + args + " --json");
    EXPECT_EQ(r.status, 0) << r.output();
    return nlohmann::json::parse(r.out)["makespan_s"].get<double>();
  };
  const double with_rows = makespan("-m " + measured.string());
  const double without = makespan("-m " + measured.string() + " --no-interference");
  const double with_published = makespan("-m " + published.string());
  ASSERT_NE(with_rows, without);
  ASSERT_NE(with_rows, with_published);
  const std::string cmd = "compare -w ffn -d 2 -m " + measured.string() +
                          " -s megatron --policy async --repeat 2 --warmup 0 --compute-model analytic --json";
  auto plain = run_tessel(cmd);
  ASSERT_EQ(plain.status, 0) << plain.output();
  auto jp = nlohmann::json::parse(plain.out);
  EXPECT_TRUE(jp["interference_beside"].is_null());
  EXPECT_TRUE(jp["mape_interference_beside_pct"].is_null());
  EXPECT_FALSE(jp["rows"][0].contains("simulated_interference_beside_s"));
  for (const auto& [beside, want] : {std::pair{"none", without}, std::pair{"published", with_published}}) {
    auto r = run_tessel(cmd + " --interference-beside " + beside);
    ASSERT_EQ(r.status, 0) << r.output();
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["interference_beside"], beside);
    const auto& row = j["rows"][0];
    EXPECT_DOUBLE_EQ(row["simulated_s"].get<double>(), with_rows) << beside;
    EXPECT_DOUBLE_EQ(row["simulated_interference_beside_s"].get<double>(), want) << beside;
    // The median of the per-round errors against the same measured rounds (two: their mean).
    std::vector<double> errors;
    for (const auto& m_r : row["round_measured_s"]) errors.push_back((want - m_r.get<double>()) / m_r.get<double>() * 100);
    ASSERT_EQ(errors.size(), 2u);
    EXPECT_NEAR(row["error_interference_beside_pct"].get<double>(), (errors[0] + errors[1]) / 2, 1e-9) << beside;
    EXPECT_DOUBLE_EQ(j["mape_interference_beside_pct"].get<double>(),
                     std::fabs(row["error_interference_beside_pct"].get<double>()));
  }
  for (const auto& p : {calibrated, measured, published}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace tessel
