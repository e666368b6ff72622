// The overlap options (experiments/overlap_cli.h) change the simulated makespan in the
// expected direction, and bad values fail cleanly.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli.h"

namespace tessel {
namespace {

using testing::run_tessel;
using testing::temp_path;

// LLaMA-7B block on 8 simulated H100s, EinDecomp: moves overlap GEMMs.
const std::string kLlama = "simulate -w llama-block:model=7b -d 8 -s eindecomp -m h100-sxm-8 --json ";

double makespan(const std::string& args, std::string* err = nullptr) {
  auto r = run_tessel(args);
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  if (err) *err = r.err;
  if (r.status != 0) return -1;
  return nlohmann::json::parse(r.out)["makespan_s"].get<double>();
}

TEST(OverlapCli, PriorityReservedSmsAndCopyEnginesShortenAnOverlappedRun) {
  const double normal = makespan(kLlama);
  const double none = makespan(kLlama + "--no-interference");
  const double high = makespan(kLlama + "--comm-priority high");
  const double reserved = makespan(kLlama + "--comm-sms 16");
  const double copy_engine = makespan(kLlama + "--comm-mechanism copy-engine");
  // High priority: communication 1.71x instead of 2.98x slower while compute runs.
  EXPECT_LT(high, normal);
  // 16 of 132 SMs for communication: compute at most 132/116 slower, communication only
  // meets HBM contention.
  EXPECT_LT(reserved, normal);
  // With SMs reserved, priority has nothing left to arbitrate: the same run.
  EXPECT_EQ(makespan(kLlama + "--comm-sms 16 --comm-priority high"), reserved);
  EXPECT_LT(copy_engine, normal);
  for (double t : {high, reserved, copy_engine}) EXPECT_GE(t, none);
  // The JSON names what was used.
  auto r = run_tessel(kLlama + "--comm-priority high --comm-sms 16");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["comm_priority"], "high");
  EXPECT_EQ(j["comm_sms"], 16);
  EXPECT_DOUBLE_EQ(j["comm_slowdown"].get<double>(), 1.28);
  EXPECT_NE(j["interference_source"].get<std::string>().find("arXiv"), std::string::npos);
}

TEST(OverlapCli, ReadyOrderFifoIsSlowerHereAndPriorityIsADeprecatedAlias) {
  const double longest = makespan(kLlama);
  std::string err;
  const double fifo = makespan(kLlama + "--ready-order fifo", &err);
  EXPECT_GT(fifo, longest);
  EXPECT_EQ(err, "");
  const double alias = makespan(kLlama + "--priority fifo", &err);
  EXPECT_EQ(alias, fifo);
  EXPECT_NE(err.find("tessel: warning: --priority is deprecated"), std::string::npos) << err;
  EXPECT_NE(err.find("--ready-order fifo"), std::string::npos) << err;
  auto r = run_tessel(kLlama + "--priority fifo --ready-order longest-path");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("disagree"), std::string::npos) << r.err;
}

TEST(OverlapCli, CommSmsAboveTheDeviceIsAClearErrorAndLeavesNoFile) {
  const auto trace = temp_path("tessel_overlap_trace.json");
  std::filesystem::remove(trace);
  auto r = run_tessel(kLlama + "--comm-sms 132 --trace " + trace.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("tessel: error: --comm-sms 132: device type 'h100-sxm' of machine 'h100-sxm-8' has 132 SMs"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(trace));
  r = run_tessel(kLlama + "--comm-priority urgent");
  EXPECT_EQ(r.status, 2) << r.err;
  r = run_tessel("simulate -w chain -d 2 -m cpu:2 --comm-sms 4");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no SM count"), std::string::npos) << r.err;
  // compare refuses it before any run.
  const auto machine = temp_path("tessel_overlap_h100.json");
  ASSERT_EQ(run_tessel("simulate -m h100-sxm-8 --collective allreduce --bytes 1MB -d 2 --write-machine " +
                       machine.string()).status,
            0);
  r = run_tessel("compare -w chain:size=64 -d 2 -m " + machine.string() + " --comm-sms 500");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--comm-sms 500"), std::string::npos) << r.err;
  std::filesystem::remove(machine);
}

// compare takes the overlap options for its simulation and echoes them under simulate's
// names; the simulated makespan moves with them as simulate's does. Directions only (the
// reserved-SM model may change): 16 SMs reserved against the preset's default, high
// priority against normal with no SM reserved.
TEST(OverlapCli, CompareEchoesTheOverlapOptionsAndItsSimulationMovesWithThem) {
  const auto machine = temp_path("tessel_overlap_compare_h100.json");
  ASSERT_EQ(run_tessel("simulate -m h100-sxm-8 --collective allreduce --bytes 1MB -d 2 --write-machine " +
                       machine.string()).status,
            0);
  const std::string compare = "compare -w chain:size=512 -d 8 -s eindecomp --policy async -m " + machine.string() +
                              " --compute-model analytic --repeat 1 --warmup 0 --json ";
  auto simulated = [&](const std::string& extra, nlohmann::json* out) {
    auto r = run_tessel(compare + extra);
    EXPECT_EQ(r.status, 0) << extra << "\n" << r.err;
    if (r.status != 0) return -1.0;
    *out = nlohmann::json::parse(r.out);
    return (*out)["rows"][0]["simulated_s"].get<double>();
  };
  nlohmann::json base, reserved, normal, high;
  const double t_base = simulated("", &base);
  const double t_reserved = simulated("--comm-sms 16", &reserved);
  const double t_normal = simulated("--comm-priority normal --comm-sms 0", &normal);
  const double t_high = simulated("--comm-priority high --comm-sms 0", &high);
  std::filesystem::remove(machine);
  EXPECT_LT(t_reserved, t_base);
  EXPECT_LT(t_high, t_normal);
  EXPECT_EQ(base["comm_priority"], "normal");
  EXPECT_EQ(base["ready_order"], "longest-path");
  EXPECT_EQ(reserved["comm_sms"], 16);
  EXPECT_EQ(high["comm_priority"], "high");
  EXPECT_EQ(high["comm_sms"], 0);
  EXPECT_EQ(high["comm_mechanism"], base["comm_mechanism"]);
  // The same names and spellings as simulate's JSON.
  auto sim = run_tessel("simulate -w chain:size=512 -d 8 -s eindecomp -m h100-sxm-8 --json --comm-priority high "
                        "--comm-sms 0");
  ASSERT_EQ(sim.status, 0) << sim.err;
  const auto sj = nlohmann::json::parse(sim.out);
  for (const char* key : {"ready_order", "comm_priority", "comm_sms", "comm_mechanism"}) EXPECT_EQ(high[key], sj[key]) << key;
}

TEST(OverlapCli, FuseCollectivesShortensGemmAllToAllAndWarnsWhereNothingFuses) {
  const std::string gemm =
      "simulate -w gemm-alltoall:tokens=4096,dim=4096,out=4096,dtype=bf16 -d 8 -m h100-sxm-8 "
      "--parts x=8x1x1,w=8x1x1,gemm=8x1x1x1,act=1x8x1,out=1x8x1 --json ";
  const double bulk = makespan(gemm);
  std::string err;
  const double fused = makespan(gemm + "--fuse-collectives", &err);
  EXPECT_LT(fused, 0.95 * bulk);  // 12.9% lower with the moves staggered (core/ready_order.h)
  EXPECT_EQ(err, "");
  // One device: nothing moves, nothing to fuse.
  const double plain = makespan("simulate -w chain -d 1 -m h100-sxm-8 --json");
  const double warned = makespan("simulate -w chain -d 1 -m h100-sxm-8 --json --fuse-collectives", &err);
  EXPECT_EQ(warned, plain);
  EXPECT_NE(err.find("tessel: warning: --fuse-collectives: "), std::string::npos) << err;
  EXPECT_NE(err.find("nothing to fuse"), std::string::npos) << err;
}

TEST(OverlapCli, SweepAppliesTheOptionsToEveryPoint) {
  const auto spec = temp_path("tessel_overlap_sweep.json");
  const auto a = temp_path("tessel_overlap_a.csv"), b = temp_path("tessel_overlap_b.csv");
  for (const auto& p : {a, b}) std::filesystem::remove(p);
  std::ofstream(spec) << R"({"workloads": ["llama-block:model=7b"], "devices": [8], "strategies": ["eindecomp"],
                            "machines": ["h100-sxm-8"]})";
  ASSERT_EQ(run_tessel("sweep " + spec.string() + " -o " + a.string() + " --jobs 1").status, 0);
  ASSERT_EQ(run_tessel("sweep " + spec.string() + " -o " + b.string() + " --jobs 1 --comm-priority high").status, 0);
  auto makespan_of = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::string header, row;
    std::getline(in, header);
    std::getline(in, row);
    // The column named makespan_s (found by name: the keys before it grow); no key
    // value holds a comma here.
    auto split = [](const std::string& line) {
      std::vector<std::string> cells;
      std::size_t start = 0;
      for (std::size_t comma; (comma = line.find(',', start)) != std::string::npos; start = comma + 1)
        cells.push_back(line.substr(start, comma - start));
      cells.push_back(line.substr(start));
      return cells;
    };
    const auto names = split(header), cells = split(row);
    const auto it = std::find(names.begin(), names.end(), "makespan_s");
    EXPECT_NE(it, names.end()) << header;
    const auto col = static_cast<std::size_t>(it - names.begin());
    EXPECT_LT(col, cells.size()) << row;
    return std::stod(cells.at(col));
  };
  EXPECT_LT(makespan_of(b), makespan_of(a));
  auto r = run_tessel("sweep " + spec.string() + " -o " + b.string() + " --comm-sms 999");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--comm-sms 999"), std::string::npos) << r.err;
  for (const auto& p : {spec, a, b}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace tessel
