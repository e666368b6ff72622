// tessel sweep: spec parsing and its errors, the CSV, resumption, refusal of a file
// with other columns, failing points recorded.
#include "experiments/sweep.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/support/cli.h"
#include "tests/support/error_of.h"
#include "tests/support/sweep.h"

namespace tessel::experiments {
namespace {

using nlohmann::json;
using testing::run_tessel;
using testing::temp_path;

std::string error_of(const json& spec) {
  return testing::error_of([&] { (void)parse_sweep_spec(spec, "spec.json"); });
}

json small_spec() {
  return json::parse(R"({"workloads": ["chain:size=64", "ffn:tokens=32,dim=16,hidden=32"],
                         "devices": [2, 4], "strategies": ["split-largest", "data-parallel"],
                         "machines": ["h100-sxm-8"], "policies": ["async", "bsp"]})");
}

std::string read(const std::filesystem::path& p) { return testing::read_text(p); }
std::size_t col(const std::string& name) { return testing::sweep_col(name); }
std::vector<std::vector<std::string>> rows_of(const std::filesystem::path& p) { return testing::sweep_rows(p); }

TEST(SweepSpec, KeysLeftOutTakeTheCliDefaults) {
  SweepSpec s = parse_sweep_spec(json::parse(R"({"workloads": ["chain"], "machines": ["h100-sxm-8"]})"), "s");
  EXPECT_EQ(s.devices, std::vector<int>{4});
  EXPECT_EQ(s.strategies, std::vector<std::string>{"split-largest"});
  EXPECT_EQ(s.placements, std::vector<std::string>{"round-robin"});
  EXPECT_EQ(s.networks, std::vector<std::string>{"flow"});
  EXPECT_EQ(s.policies, std::vector<std::string>{"async"});
  EXPECT_EQ(s.backends, std::vector<std::string>{"sim"});
  EXPECT_EQ(s.weights, std::vector<std::string>{"resident"});
  EXPECT_EQ(s.memory_caps, std::vector<std::string>{""});  // uncapped
  EXPECT_EQ(s.offload_orders, std::vector<std::string>{"free"});
}

TEST(SweepSpec, PointsAreTheCartesianProductLastKeyFastest) {
  auto points = sweep_points(parse_sweep_spec(small_spec(), "s"));
  ASSERT_EQ(points.size(), 2u * 2 * 2 * 2);
  EXPECT_EQ(points[0].key(), (std::vector<std::string>{"chain:size=64", "2", "split-largest", "round-robin",
                                                        "h100-sxm-8", "flow", "async", "sim", "resident", "",
                                                        "free", "longest-path", "machine", "machine", "machine", "0"}));
  EXPECT_EQ(points[1].policy, "bsp");
  EXPECT_EQ(points[2].strategy, "data-parallel");
  EXPECT_EQ(points[8].workload, "ffn:tokens=32,dim=16,hidden=32");
}

TEST(SweepSpec, BadSpecsNameTheOffenderAndListTheValidNames) {
  json s = small_spec();
  s["strategy"] = {"eindecomp"};
  std::string e = error_of(s);
  EXPECT_NE(e.find("unknown key \"strategy\""), std::string::npos) << e;
  EXPECT_NE(e.find("strategies"), std::string::npos) << e;

  s = small_spec();
  s["strategies"] = {"eindecomp", "best"};
  e = error_of(s);
  EXPECT_NE(e.find("unknown strategy 'best'"), std::string::npos) << e;
  EXPECT_NE(e.find("megatron"), std::string::npos) << e;

  s = small_spec();
  s["placements"] = {"nearest"};
  e = error_of(s);
  EXPECT_NE(e.find("unknown placement 'nearest'"), std::string::npos) << e;
  EXPECT_NE(e.find("greedy"), std::string::npos) << e;

  s = small_spec();
  s["workloads"] = {"chian"};
  e = error_of(s);
  EXPECT_NE(e.find("chian"), std::string::npos) << e;
  EXPECT_NE(e.find("llama-block"), std::string::npos) << e;

  s = small_spec();
  s["machines"] = {"h200-sxm-16"};
  e = error_of(s);
  EXPECT_NE(e.find("h200-sxm-16"), std::string::npos) << e;
  EXPECT_NE(e.find("a100-sxm-8"), std::string::npos) << e;

  s = small_spec();
  s["networks"] = {"packet"};
  EXPECT_NE(error_of(s).find("unknown network model 'packet' (valid: flow, alpha-beta"), std::string::npos);
  s = small_spec();
  s["policies"] = {"sync"};
  EXPECT_NE(error_of(s).find("unknown policy 'sync'"), std::string::npos);
  s = small_spec();
  s["backends"] = {"gpu"};
  EXPECT_NE(error_of(s).find("unknown backend 'gpu' (valid: sim, cpu)"), std::string::npos);
  s = small_spec();
  s["devices"] = {0};
  EXPECT_NE(error_of(s).find("\"devices\": 0 is not a positive integer"), std::string::npos);
  s = small_spec();
  s["devices"] = json::array();
  EXPECT_NE(error_of(s).find("non-empty"), std::string::npos);
  s = small_spec();
  s.erase("workloads");
  EXPECT_NE(error_of(s).find("\"workloads\" is required"), std::string::npos);
  s = small_spec();
  s.erase("machines");
  EXPECT_NE(error_of(s).find("\"machines\" is required"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("JSON object"), std::string::npos);
}

TEST(SweepCsv, FieldsWithCommasAndQuotesRoundTrip) {
  std::vector<std::string> f{"ffn:tokens=32,dim=16", "say \"hi\"", "", "plain"};
  std::string line = csv_line(f);
  EXPECT_EQ(line, "\"ffn:tokens=32,dim=16\",\"say \"\"hi\"\"\",,plain\n");
  EXPECT_EQ(parse_csv_line(line, "x"), f);
  EXPECT_THROW((void)parse_csv_line("\"open,", "x"), Error);
}

class SweepRun : public testing::SweepFile {};

TEST_F(SweepRun, EveryPointGivesOneRowWithTheFiguresOfSimulate) {
  SweepSpec spec = parse_sweep_spec(small_spec(), "s");
  SweepSummary s = run_sweep(spec, csv_.string(), options(2));
  EXPECT_EQ(s.total, 16u);
  EXPECT_EQ(s.done, 16u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_FALSE(s.interrupted);
  std::string text = read(csv_);
  EXPECT_EQ(text.substr(0, text.find('\n') + 1), csv_line(sweep_columns()));
  auto rows = rows_of(csv_);
  ASSERT_EQ(rows.size(), 16u);
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), sweep_columns().size());
    EXPECT_GT(std::stod(r[col("makespan_s")]), 0) << r[0];
    EXPECT_GT(std::stod(r[col("tasks")]), 0) << r[0];
    EXPECT_EQ(r[col("fused_kernels")], "0") << r[0];
    EXPECT_EQ(r.back(), "") << r[0];             // no error
    const double util = std::stod(r[col("compute_utilization")]);
    EXPECT_GT(util, 0);
    EXPECT_LE(util, 1 + 1e-9);
  }
}

TEST_F(SweepRun, RowsAreTheSameWhateverTheNumberOfJobsBesidesWallTimes) {
  SweepSpec spec = parse_sweep_spec(small_spec(), "s");
  (void)run_sweep(spec, csv_.string(), options(1));
  auto one = rows_of(csv_);
  std::filesystem::remove(csv_);
  (void)run_sweep(spec, csv_.string(), options(2));
  auto two = rows_of(csv_);
  auto strip = [](std::vector<std::vector<std::string>> rows) {
    for (auto& r : rows)  // plan, lower, sim wall times
      r.erase(r.begin() + static_cast<std::ptrdiff_t>(col("plan_wall_s")),
              r.begin() + static_cast<std::ptrdiff_t>(col("sim_wall_s")) + 1);
    std::sort(rows.begin(), rows.end());
    return rows;
  };
  EXPECT_EQ(strip(one), strip(two));
}

TEST_F(SweepRun, AnInterruptedSweepResumesAndRunsEveryPointExactlyOnce) {
  SweepSpec spec = parse_sweep_spec(small_spec(), "s");
  // Stop after 5 points have started (as Ctrl-C does: the points under way finish).
  std::atomic<int> started{0};
  SweepOptions o = options(2);
  o.on_start = [&](const SweepPoint&) { ++started; };
  o.stop = [&] { return started.load() >= 5; };
  SweepSummary first = run_sweep(spec, csv_.string(), o);
  EXPECT_TRUE(first.interrupted);
  EXPECT_LT(first.done, 16u);
  EXPECT_GE(first.done, 4u);
  // Then a row cut short, as a kill in the middle of a write leaves it.
  {
    std::ofstream out(csv_, std::ios::app | std::ios::binary);
    out << "chain:size=64,4,data-parallel,round-ro";
  }
  SweepSummary second = run_sweep(spec, csv_.string(), options(2));
  EXPECT_FALSE(second.interrupted);
  EXPECT_EQ(second.skipped, first.done);
  EXPECT_EQ(second.skipped + second.done, 16u);
  auto rows = rows_of(csv_);
  ASSERT_EQ(rows.size(), 16u);
  std::map<std::vector<std::string>, int> seen;
  for (const auto& r : rows) ++seen[std::vector<std::string>(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(sweep_keys().size()))];
  EXPECT_EQ(seen.size(), 16u);
  for (const auto& p : sweep_points(spec)) EXPECT_EQ(seen[p.key()], 1) << p.workload << " " << p.devices;
  // A third run finds nothing to do.
  SweepSummary third = run_sweep(spec, csv_.string(), options(2));
  EXPECT_EQ(third.done, 0u);
  EXPECT_EQ(third.skipped, 16u);
  EXPECT_EQ(rows_of(csv_).size(), 16u);
}

TEST_F(SweepRun, AFileWithOtherColumnsIsRefusedAndLeftUntouched) {
  {
    std::ofstream out(csv_);
    out << "workload,devices,makespan_s\nchain,4,0.001\n";
  }
  const std::string before = read(csv_);
  try {
    (void)run_sweep(parse_sweep_spec(small_spec(), "s"), csv_.string(), options(1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("other columns"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read(csv_), before);
}

TEST_F(SweepRun, AFailingPointIsRecordedWithItsErrorAndTheSweepGoesOn) {
  // 16 devices on an 8-device machine fail; 2 devices succeed.
  json j = json::parse(R"({"workloads": ["chain:size=64"], "devices": [16, 2], "machines": ["h100-sxm-8"]})");
  SweepSummary s = run_sweep(parse_sweep_spec(j, "s"), csv_.string(), options(1));
  EXPECT_EQ(s.done, 2u);
  EXPECT_EQ(s.failed, 1u);
  auto rows = rows_of(csv_);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][1], "16");
  EXPECT_NE(rows[0].back().find("8"), std::string::npos) << rows[0].back();
  EXPECT_EQ(rows[0][col("makespan_s")], "");
  EXPECT_EQ(rows[1][1], "2");
  EXPECT_EQ(rows[1].back(), "");
}

TEST_F(SweepRun, CpuBackendPointsAreMeasuredBesideSimulatedOnes) {
  json j = json::parse(R"({"workloads": ["chain:size=32"], "devices": [2], "machines": ["cpu:2"],
                           "backends": ["sim", "cpu"]})");
  SweepSummary s = run_sweep(parse_sweep_spec(j, "s"), csv_.string(), options(2));
  EXPECT_EQ(s.done, 2u);
  EXPECT_EQ(s.failed, 0u);
  auto rows = rows_of(csv_);
  ASSERT_EQ(rows.size(), 2u);
  std::map<std::string, std::vector<std::string>> by_backend;
  for (const auto& r : rows) by_backend[r[col("backend")]] = r;
  ASSERT_EQ(by_backend.count("cpu"), 1u);
  const auto& cpu = by_backend["cpu"];
  EXPECT_GT(std::stod(cpu[col("makespan_s")]), 0);                       // measured
  EXPECT_EQ(cpu[col("tasks")], by_backend["sim"][col("tasks")]);           // the same task graph
  EXPECT_EQ(cpu[col("events")], "0");                                      // no simulator events
  EXPECT_EQ(cpu.back(), "");
}

TEST(SweepCli, ABadSpecIsAnErrorNamingItAndWritesNoFile) {
  auto spec = temp_path("tessel_bad_spec.json");
  auto out = temp_path("tessel_bad_sweep.csv");
  std::filesystem::remove(out);
  {
    std::ofstream f(spec);
    f << R"({"workloads": ["chain"], "machines": ["h100-sxm-8"], "strategies": ["nope"]})";
  }
  auto r = run_tessel("sweep " + spec.string() + " -o " + out.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("tessel: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown strategy 'nope'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove(spec);
}

TEST(SweepCli, RunsASpecAndResumesWithNothingToDo) {
  auto spec = temp_path("tessel_spec.json");
  auto out = temp_path("tessel_sweep_cli.csv");
  std::filesystem::remove(out);
  {
    std::ofstream f(spec);
    f << R"({"workloads": ["chain:size=64"], "devices": [2, 4], "machines": ["h100-sxm-8"]})";
  }
  auto r = run_tessel("sweep " + spec.string() + " -o " + out.string() + " --jobs 2 --json");
  ASSERT_EQ(r.status, 0) << r.output();
  auto j = json::parse(r.out);
  EXPECT_EQ(j["points"], 2);
  EXPECT_EQ(j["done"], 2);
  r = run_tessel("sweep " + spec.string() + " -o " + out.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.output();
  j = json::parse(r.out);
  EXPECT_EQ(j["skipped"], 2);
  EXPECT_EQ(j["done"], 0);
  std::filesystem::remove(out);
  std::filesystem::remove(spec);
}

// The overlap options are key columns: a file begun with normal priority does not hand
// its row to a sweep with --comm-priority high (it once printed "1 already in" and kept
// the normal-priority row), and resuming with the same options still skips.
TEST_F(SweepRun, OverlapOptionsAreKeysSoOtherSettingsRunAgain) {
  json j = json::parse(R"({"workloads": ["chain:size=64"], "devices": [2], "machines": ["h100-sxm-8"]})");
  SweepSpec spec = parse_sweep_spec(j, "s");
  SweepSummary normal = run_sweep(spec, csv_.string(), options(1));
  EXPECT_EQ(normal.done, 1u);
  SweepSpec high = spec;
  high.interference.set_priority = true;
  high.interference.comm_priority = CommPriority::high;
  SweepSummary second = run_sweep(high, csv_.string(), options(1));
  EXPECT_EQ(second.skipped, 0u);
  EXPECT_EQ(second.done, 1u);
  SweepSpec fused = spec;
  fused.fuse_collectives = true;
  fused.ready_order = sim::Priority::fifo;
  EXPECT_EQ(run_sweep(fused, csv_.string(), options(1)).done, 1u);
  EXPECT_EQ(run_sweep(high, csv_.string(), options(1)).skipped, 1u);
  auto rows = rows_of(csv_);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][col("comm_priority")], "machine");
  EXPECT_EQ(rows[1][col("comm_priority")], "high");
  EXPECT_EQ(rows[2][col("fuse_collectives")], "1");
  EXPECT_EQ(rows[2][col("ready_order")], "fifo");
}

// --fuse-collectives: a point with nothing to fuse warns (naming it) and runs unfused, and
// the fused_kernels column says how many GEMMs each point fused.
TEST_F(SweepRun, FuseCollectivesWarnsPerPointWithNothingToFuseAndRecordsFusion) {
  json j = json::parse(R"({"workloads": ["chain:size=64", "gemm-alltoall"], "devices": [1, 8],
                           "machines": ["h100-sxm-8"]})");
  SweepSpec spec = parse_sweep_spec(j, "s");
  spec.fuse_collectives = true;
  ::testing::internal::CaptureStderr();
  (void)run_sweep(spec, csv_.string(), options(1));
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::size_t warnings = 0;
  for (std::size_t at = 0; (at = err.find("nothing to fuse", at)) != std::string::npos; ++at) ++warnings;
  std::map<std::string, std::string> fused;  // workload -d: fused_kernels
  for (const auto& r : rows_of(csv_)) {
    EXPECT_EQ(r.back(), "") << r[0];
    fused[r[0] + " " + r[1]] = r[col("fused_kernels")];
  }
  ASSERT_EQ(fused.size(), 4u);
  EXPECT_EQ(fused["chain:size=64 1"], "0");
  EXPECT_EQ(fused["gemm-alltoall 1"], "0");
  EXPECT_NE(fused["gemm-alltoall 8"], "0");
  std::size_t unfused = 0;
  for (const auto& [k, v] : fused) unfused += v == "0";
  EXPECT_EQ(warnings, unfused) << err;
  EXPECT_NE(err.find("tessel: warning: --fuse-collectives: gemm-alltoall (-d 1"), std::string::npos) << err;
}

}  // namespace
}  // namespace tessel::experiments
