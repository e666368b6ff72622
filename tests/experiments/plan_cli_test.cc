// `tessel plan` end to end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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
  for (const char* key : {"strategy", "devices", "cost", "plan_seconds", "nodes"}) EXPECT_TRUE(j.contains(key)) << key;
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
                        Case{"-w chain -d 4 -s manual", "needs a decomposition file"}}) {
    auto r = run_tessel("plan " + c.args + " -o " + out.string());
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
}

}  // namespace
}  // namespace tessel
