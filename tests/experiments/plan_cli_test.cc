// `tessel plan` end to end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <future>

#include "tests/support/cli.h"

namespace tessel {
namespace {

using testing::run_tessel;
using testing::temp_path;

TEST(PlanCli, JsonHasTheIssueFieldsAndTheWrittenDecompositionLowers) {
  auto out = temp_path("tessel_plan.json");
  auto r = run_tessel("plan -w llama-block:model=7b -d 8 -s eindecomp --json -o " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"strategy", "devices", "cost", "plan_wall_s", "nodes"}) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["devices"], 8);
  double sum = 0;
  for (const auto& n : j["nodes"]) {
    for (const char* key : {"name", "parts", "cost"}) EXPECT_TRUE(n.contains(key)) << key;
    sum += n["cost"].get<double>();
  }
  EXPECT_NEAR(sum, j["cost"].get<double>(), 1e-6 * sum);
  auto lowered = run_tessel("lower -w llama-block:model=7b --decomposition " + out.string() + " --json");
  EXPECT_EQ(lowered.status, 0) << lowered.err;
  std::filesystem::remove(out);
}

TEST(PlanCli, AMachineSetsTheGreedyPlacementsByteWeight) {
  auto r = run_tessel("plan -w ffn -d 8 -s megatron --placement greedy -m h100-sxm-8 --dtype bf16 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  // 989 Tflop/s bf16 over 450 GB/s of NVLink per direction (vendor datasheets).
  EXPECT_NEAR(nlohmann::json::parse(r.out)["flops_per_byte"].get<double>(), 989e12 / 450e9, 1.0);
}

TEST(PlanCli, BadInputIsNamedAndWritesNothing) {
  auto out = temp_path("tessel_plan_bad.json");
  std::filesystem::remove(out);
  struct Case {
    std::string args, needle;
  };
  for (const Case& c : {Case{"-w chain -d 3 -s eindecomp", "power of two"},
                        Case{"-w chain -d 4 -s nosuch", "unknown strategy 'nosuch'"},
                        Case{"-w chain -d 4 --placement nearest", "unknown placement 'nearest'"},
                        Case{"-w llama-block -d 8 -s exhaustive", "over the limit"},
                        Case{"-w chain -d 4 -s manual", "needs a decomposition file"},
                        Case{"-w llama-block -d 8 -s dp-tp", "needs a machine (-m)"},
                        Case{"-w llama-block -d 16 -s dp-tp -m cluster:2xh100-sxm-8",
                             "batch 1 is smaller than the 2 nodes that 16 devices span"},
                        Case{"-w llama-block -d 12 -s dp-tp -m cluster:2xh100-sxm-8", "not whole nodes"},
                        Case{"-w llama-block -d 4 --weights always", "--weights"},
                        // 6.5 GB of f64 weights replicated on 4 GB devices; sharded (megatron) they fit.
                        Case{"-w llama-block:model=65b,dtype=f64 -d 2 -s data-parallel -m cpu:2",
                             "device 0 of machine 'cpu:2' would hold 6.03 GiB of weights (6476136448 bytes) at rest, "
                             "more than its memory of 3.73 GiB (4000000000 bytes)"}}) {
    auto r = run_tessel("plan " + c.args + " -o " + out.string());
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
}

TEST(PlanCli, WeightsResidentOrFetchedAndAnnotationsFromAGraphFile) {
  auto r = run_tessel("plan -w llama-block:model=65b,dtype=f64 -d 2 -s megatron -m cpu:2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["weights"], "resident");
  EXPECT_EQ(j["resident_weight_bytes"], (std::vector<std::int64_t>{3238133760, 3238133760}));  // half of each matrix, both norm vectors whole
  EXPECT_TRUE(j["idle_devices"].empty());
  r = run_tessel("plan -w llama-block:model=65b,dtype=f64 -d 2 -s data-parallel -m cpu:2 --weights fetched --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["weights"], "fetched");
  // An annotation naming an index the input lacks: an error naming node and index.
  auto graph = temp_path("tessel_plan_annotated.json");
  {
    std::ofstream f(graph);
    f << R"({"nodes": [{"name": "x", "kind": "input", "shape": [4, 8], "role": "data", "index_roles": {"batch": 0}},
                       {"name": "w", "kind": "input", "shape": [8, 8], "role": "weight", "index_roles": {"heads": 2}},
                       {"name": "y", "kind": "einsum", "inputs": ["x", "w"], "einsum": "ij,jk->ik"},
                       {"name": "out", "kind": "output", "inputs": ["y"]}]})";
  }
  auto out = temp_path("tessel_plan_annotated_out.json");
  std::filesystem::remove(out);
  r = run_tessel("plan -g " + graph.string() + " -d 2 -s megatron -o " + out.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("node 'w' (shape [8,8]): the heads annotation names index 2, but the node has indices 0..1"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove(graph);
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// A search bounded by --budget-simulations has no clock: two runs at once, each slowed
// by the other, give the same plan and the same makespans. (One the clock stops may not:
// the budget cuts eindecomp's refinement of its start short at a point the clock picks.)
TEST(PlanCli, SearchBoundedBySimulationsGivesTheSamePlanWhateverTheLoad) {
  const std::string cmd =
      "plan -w llama-block:model=tiny -d 16 -s search -m cluster:2xh100-sxm-8 --weights fetched --seed 3 "
      "--budget-simulations 24 --json";
  auto a = std::async(std::launch::async, [&] { return run_tessel(cmd); });
  auto b = std::async(std::launch::async, [&] { return run_tessel(cmd); });
  auto ra = a.get(), rb = b.get();
  ASSERT_EQ(ra.status, 0) << ra.err;
  ASSERT_EQ(rb.status, 0) << rb.err;
  auto ja = nlohmann::json::parse(ra.out), jb = nlohmann::json::parse(rb.out);
  EXPECT_EQ(ja["nodes"], jb["nodes"]);
  EXPECT_EQ(ja["search"]["simulations"], 24);
  EXPECT_EQ(ja["search"]["budget_reached"], false);
  EXPECT_EQ(ja["search"]["budget_simulations"], 24);
  for (const char* key : {"start_makespan_s", "final_makespan_s", "starts", "moves", "simulations"})
    EXPECT_EQ(ja["search"][key], jb["search"][key]) << key;
}

}  // namespace
}  // namespace tessel
