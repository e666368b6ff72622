// Memory caps and offload orders as sweep axes (experiments/sweep.h, sweep_point.cc): the
// spec keys and their errors, capped rows with the figures simulate gives the same point,
// determinism, resumption keyed on the cap and the order, failing caps recorded, capped
// cpu points run on the workers, and files from before these columns refused.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "experiments/sweep.h"
#include "tests/support/cli.h"
#include "tests/support/error_of.h"
#include "tests/support/sweep.h"

namespace tessel::experiments {
namespace {

using nlohmann::json;
using testing::run_tessel;
using testing::sweep_col;
using testing::sweep_rows;
using testing::temp_path;

class SweepMemoryCap : public testing::SweepFile {};

std::string error_of(const json& spec) {
  return testing::error_of([&] { (void)parse_sweep_spec(spec, "spec.json"); });
}

// The tiny LLaMA block on 2 simulated CPU cores: at 60% of its peak it loads, and the
// packed prefetch rule is strictly the fastest (tests/experiments/memory_cap_cli_test.cc),
// so a row planned with one rule alone differs from simulate's.
json capped_spec() {
  return json::parse(R"({"workloads": ["llama-block:model=tiny"], "devices": [2], "machines": ["cpu:2"],
                         "memory_caps": [null, "0.6"], "offload_orders": ["free", "fixed"]})");
}

// Rows keyed by "memory_cap/offload_order".
std::map<std::string, std::vector<std::string>> by_cap(const std::filesystem::path& csv) {
  std::map<std::string, std::vector<std::string>> out;
  for (auto& r : sweep_rows(csv)) out[r[sweep_col("memory_cap")] + "/" + r[sweep_col("offload_order")]] = r;
  return out;
}

double number(const std::vector<std::string>& row, const char* column) { return std::stod(row.at(sweep_col(column))); }

TEST(SweepMemoryCapSpec, CapsPairWithOrdersAndAnUncappedPointRunsInFreeOrderOnly) {
  const auto points = sweep_points(parse_sweep_spec(capped_spec(), "s"));
  ASSERT_EQ(points.size(), 3u);  // (null, fixed) is not a point
  EXPECT_EQ(points[0].memory_cap, "");
  EXPECT_EQ(points[0].offload_order, "free");
  EXPECT_EQ(points[1].memory_cap, "0.6");
  EXPECT_EQ(points[1].offload_order, "free");
  EXPECT_EQ(points[2].memory_cap, "0.6");
  EXPECT_EQ(points[2].offload_order, "fixed");
  // Caps vary before orders, both after weights (spec key order, the last fastest).
  json j = capped_spec();
  j["memory_caps"] = {"25%", "512MiB"};
  j["weights"] = {"resident", "fetched"};
  const auto more = sweep_points(parse_sweep_spec(j, "s"));
  ASSERT_EQ(more.size(), 8u);
  EXPECT_EQ(more[0].memory_cap + " " + more[0].offload_order + " " + more[0].weights, "25% free resident");
  EXPECT_EQ(more[1].memory_cap + " " + more[1].offload_order, "25% fixed");
  EXPECT_EQ(more[2].memory_cap, "512MiB");
  EXPECT_EQ(more[4].weights, "fetched");
}

TEST(SweepMemoryCapSpec, ACapTheParserRefusesIsAnErrorNamingTheKeyAndTheValue) {
  for (const char* bad : {"12XB", "150%", "0", "half"}) {
    json j = capped_spec();
    j["memory_caps"] = {nullptr, bad};
    const std::string e = error_of(j);
    EXPECT_NE(e.find("spec.json: \"memory_caps\" '" + std::string(bad) + "'"), std::string::npos) << e;
  }
  json j = capped_spec();
  j["memory_caps"] = {0.5};  // a number, not the string --memory-cap takes
  std::string e = error_of(j);
  EXPECT_NE(e.find("\"memory_caps\": 0.5 is not a cap"), std::string::npos) << e;
  j["memory_caps"] = json::array();
  e = error_of(j);
  EXPECT_NE(e.find("\"memory_caps\" must be a non-empty list"), std::string::npos) << e;
  j = capped_spec();
  j["offload_orders"] = {"sync"};
  e = error_of(j);
  EXPECT_NE(e.find("unknown offload order 'sync' (valid: free, fixed)"), std::string::npos) << e;
}

TEST(SweepMemoryCapSpec, FixedOrderWithEveryCapNullIsRefusedNamingBothKeys) {
  json j = capped_spec();
  j.erase("memory_caps");  // the default: [null]
  std::string e = error_of(j);
  EXPECT_NE(e.find("\"offload_orders\": \"fixed\" needs a memory cap"), std::string::npos) << e;
  EXPECT_NE(e.find("\"memory_caps\""), std::string::npos) << e;
  j["memory_caps"] = {nullptr, nullptr};
  EXPECT_EQ(error_of(j), e);
  j["offload_orders"] = {"free"};
  EXPECT_NO_THROW((void)parse_sweep_spec(j, "s"));
}

// The capped rows are simulate's figures for the same point: the same helper plans them
// (each prefetch rule, the fastest kept: packed here), so makespan, loads, bytes and the
// rule agree, in both orders.
TEST_F(SweepMemoryCap, CappedRowsOffloadAreNoFasterAndMatchSimulate) {
  SweepSummary s = run_sweep(parse_sweep_spec(capped_spec(), "s"), csv_.string(), options(2));
  EXPECT_EQ(s.done, 3u);
  EXPECT_EQ(s.failed, 0u);
  auto rows = by_cap(csv_);
  ASSERT_EQ(rows.size(), 3u);
  const auto& none = rows.at("/free");
  const auto& in_free = rows.at("0.6/free");
  const auto& in_fixed = rows.at("0.6/fixed");
  for (const auto* r : {&none, &in_free, &in_fixed}) EXPECT_EQ(r->back(), "") << r->back();
  for (const char* c : {"evicts", "loads", "bytes_evicted", "bytes_loaded"}) EXPECT_EQ(none[sweep_col(c)], "0") << c;
  EXPECT_EQ(none[sweep_col("prefetch")], "");
  for (const auto* r : {&in_free, &in_fixed}) {
    EXPECT_GT(number(*r, "bytes_loaded"), 0);
    EXPECT_GT(number(*r, "loads"), 0);
    EXPECT_GE(number(*r, "makespan_s"), number(none, "makespan_s"));
    EXPECT_LT(number(*r, "peak_memory_bytes"), number(none, "peak_memory_bytes"));
    EXPECT_GT(number(*r, "tasks"), number(none, "tasks"));  // the graph that ran, with its evicts and loads
  }
  // Both orders run the same plan; the fixed one is never faster.
  for (const char* c : {"evicts", "loads", "bytes_evicted", "bytes_loaded", "prefetch"})
    EXPECT_EQ(in_free[sweep_col(c)], in_fixed[sweep_col(c)]) << c;
  EXPECT_GE(number(in_fixed, "makespan_s"), number(in_free, "makespan_s"));
  EXPECT_EQ(in_free[sweep_col("prefetch")], "packed");  // the case this test is for: not the first rule

  for (const char* order : {"free", "fixed"}) {
    auto r = run_tessel(std::string("simulate -w llama-block:model=tiny -d 2 -m cpu:2 --memory-cap 0.6 --json "
                                     "--offload-order ") + order);
    ASSERT_EQ(r.status, 0) << r.output();
    const json j = json::parse(r.out);
    const auto& row = rows.at(std::string("0.6/") + order);
    EXPECT_DOUBLE_EQ(number(row, "makespan_s"), j["makespan_s"].get<double>()) << order;
    EXPECT_EQ(row[sweep_col("peak_memory_bytes")], j["peak_memory_bytes"].dump()) << order;
    EXPECT_EQ(row[sweep_col("tasks")], j["tasks"].dump()) << order;
    EXPECT_EQ(row[sweep_col("prefetch")], j["memory_cap"]["prefetch"].get<std::string>()) << order;
    for (const char* c : {"evicts", "loads", "bytes_evicted", "bytes_loaded"})
      EXPECT_EQ(row[sweep_col(c)], j["memory_cap"][c].dump()) << order << " " << c;
  }
}

TEST_F(SweepMemoryCap, TheSameSpecTwiceGivesTheSameRowsBesidesWallTimes) {
  json j = capped_spec();
  j["devices"] = {1, 2};
  j["memory_caps"] = {nullptr, "0.5", "75%"};
  const SweepSpec spec = parse_sweep_spec(j, "s");
  const auto other = temp_path("tessel_sweep_again.csv");
  std::filesystem::remove(other);
  (void)run_sweep(spec, csv_.string(), options(2));
  (void)run_sweep(spec, other.string(), options(1));
  auto strip = [](std::vector<std::vector<std::string>> rows) {
    for (auto& r : rows)
      for (const char* c : {"plan_wall_s", "lower_wall_s", "memory_plan_wall_s", "sim_wall_s"}) r[sweep_col(c)].clear();
    std::sort(rows.begin(), rows.end());
    return rows;
  };
  const auto one = strip(sweep_rows(csv_)), two = strip(sweep_rows(other));
  EXPECT_EQ(one.size(), 2u * 5);
  EXPECT_EQ(one, two);
  std::filesystem::remove(other);
}

// memory_cap and offload_order are key columns: a point with another cap or order is run,
// not taken from the file; the same points again are skipped.
TEST_F(SweepMemoryCap, ResumeSkipsCappedPointsAlreadyInTheFileAndRunsOtherCaps) {
  json j = capped_spec();
  j["offload_orders"] = {"free"};
  EXPECT_EQ(run_sweep(parse_sweep_spec(j, "s"), csv_.string(), options(1)).done, 2u);
  SweepSummary again = run_sweep(parse_sweep_spec(j, "s"), csv_.string(), options(1));
  EXPECT_EQ(again.skipped, 2u);
  EXPECT_EQ(again.done, 0u);
  j["memory_caps"] = {nullptr, "0.6", "0.75"};
  SweepSummary more = run_sweep(parse_sweep_spec(j, "s"), csv_.string(), options(1));
  EXPECT_EQ(more.skipped, 2u);
  EXPECT_EQ(more.done, 1u);
  j["offload_orders"] = {"fixed"};
  SweepSummary fixed = run_sweep(parse_sweep_spec(j, "s"), csv_.string(), options(1));
  EXPECT_EQ(fixed.skipped, 0u);
  EXPECT_EQ(fixed.done, 2u);
  auto rows = by_cap(csv_);
  EXPECT_EQ(rows.size(), 5u);
  EXPECT_EQ(sweep_rows(csv_).size(), 5u);
  EXPECT_LT(number(rows.at("0.75/free"), "bytes_loaded"), number(rows.at("0.6/free"), "bytes_loaded"));
}

// A cap below what one task needs, and a cap with the bsp policy: error rows naming the
// cause, and the other points still run.
TEST_F(SweepMemoryCap, ACapThatCannotBeMetIsAnErrorRowAndTheSweepGoesOn) {
  json j = json::parse(R"({"workloads": ["chain:size=64"], "devices": [2], "machines": ["h100-sxm-8"],
                           "policies": ["async", "bsp"], "memory_caps": [null, "4096"]})");
  SweepSummary s = run_sweep(parse_sweep_spec(j, "s"), csv_.string(), options(1));
  EXPECT_EQ(s.done, 4u);
  EXPECT_EQ(s.failed, 2u);
  std::map<std::string, std::vector<std::string>> rows;
  for (auto& r : sweep_rows(csv_)) rows[r[sweep_col("policy")] + " " + r[sweep_col("memory_cap")]] = r;
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows.at("async ").back(), "");
  EXPECT_EQ(rows.at("bsp ").back(), "");
  const std::string too_small = rows.at("async 4096").back();
  EXPECT_NE(too_small.find("memory cap: "), std::string::npos) << too_small;
  EXPECT_NE(too_small.find("more than the cap of 4096 bytes: no schedule fits"), std::string::npos) << too_small;
  EXPECT_EQ(rows.at("async 4096")[sweep_col("makespan_s")], "");
  EXPECT_NE(rows.at("bsp 4096").back().find("memory cap 4096 needs policy async"), std::string::npos)
      << rows.at("bsp 4096").back();
}

// With --fuse-collectives (a command-line setting of every point) a capped point is an
// error row, as simulate refuses the pair; the uncapped one fuses.
TEST_F(SweepMemoryCap, ACappedPointWithFusedCollectivesIsAnErrorRow) {
  json j = json::parse(R"({"workloads": ["gemm-alltoall"], "devices": [8], "machines": ["h100-sxm-8"],
                           "memory_caps": [null, "0.5"]})");
  SweepSpec spec = parse_sweep_spec(j, "s");
  spec.fuse_collectives = true;
  SweepSummary s = run_sweep(spec, csv_.string(), options(1));
  EXPECT_EQ(s.failed, 1u);
  auto rows = by_cap(csv_);
  EXPECT_NE(rows.at("/free")[sweep_col("fused_kernels")], "0");
  EXPECT_NE(rows.at("0.5/free").back().find("memory cap 0.5 and --fuse-collectives cannot be combined"),
            std::string::npos)
      << rows.at("0.5/free").back();
}

// backend cpu: the capped graph of `run --memory-cap` (one-range prefetch) on the workers.
TEST_F(SweepMemoryCap, CpuPointsRunTheCappedGraph) {
  json j = capped_spec();
  j["offload_orders"] = {"free"};
  j["backends"] = {"cpu"};
  SweepSummary s = run_sweep(parse_sweep_spec(j, "s"), csv_.string(), options(1));
  EXPECT_EQ(s.failed, 0u);
  auto rows = by_cap(csv_);
  ASSERT_EQ(rows.size(), 2u);
  const auto& none = rows.at("/free");
  const auto& capped = rows.at("0.6/free");
  EXPECT_EQ(capped.back(), "");
  EXPECT_GT(number(capped, "makespan_s"), 0);
  EXPECT_GT(number(capped, "bytes_loaded"), 0);
  EXPECT_EQ(capped[sweep_col("prefetch")], "one-range");
  EXPECT_GT(number(capped, "tasks"), number(none, "tasks"));
  EXPECT_EQ(none[sweep_col("bytes_loaded")], "0");
}

// A file written before memory_cap and its figures were columns is refused, untouched,
// with the existing message.
TEST_F(SweepMemoryCap, AFileFromBeforeTheMemoryCapColumnsIsRefused) {
  const std::string old_header =
      "workload,devices,strategy,placement,machine,network,policy,backend,weights,ready_order,comm_priority,comm_sms,"
      "comm_mechanism,fuse_collectives,makespan_s,bytes_moved,peak_memory_bytes,compute_utilization,comm_utilization,"
      "tasks,events,plan_wall_s,lower_wall_s,sim_wall_s,fused_kernels,error\n";
  {
    std::ofstream out(csv_, std::ios::binary);
    out << old_header;
  }
  try {
    (void)run_sweep(parse_sweep_spec(capped_spec(), "s"), csv_.string(), options(1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has other columns than this sweep writes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(testing::read_text(csv_), old_header);
}

TEST(SweepMemoryCapCli, ABadCapIsRefusedBeforeAnyPointRunsAndWritesNoFile) {
  const auto spec = temp_path("tessel_cap_spec.json");
  const auto out = temp_path("tessel_cap_sweep.csv");
  std::filesystem::remove(out);
  std::ofstream(spec) << R"({"workloads": ["chain"], "machines": ["h100-sxm-8"], "memory_caps": [null, "64XB"]})";
  auto r = run_tessel("sweep " + spec.string() + " -o " + out.string());
  EXPECT_EQ(r.status, 1) << r.output();
  EXPECT_NE(r.err.find("tessel: error: " + spec.string() + ": \"memory_caps\" '64XB': unknown unit 'XB'"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  auto help = run_tessel("sweep --help");
  EXPECT_NE(help.out.find("memory_caps"), std::string::npos);
  EXPECT_NE(help.out.find("offload_orders"), std::string::npos);
  std::filesystem::remove(spec);
}

}  // namespace
}  // namespace tessel::experiments
