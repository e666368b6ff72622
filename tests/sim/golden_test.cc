// Golden scenarios: small machines and task graphs with makespans derived by hand
// (tests/data/sim/scenarios.json holds each derivation).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/io.h"
#include "core/machine.h"
#include "sim/simulator.h"
#include "sim/task_graph_json.h"
#include "tests/sim/sim_test_util.h"

namespace tessel::sim {
namespace {

const std::string kDir = std::string(TESSEL_TEST_DATA_DIR) + "/sim/";

TEST(Golden, ScenariosHaveTheirExactMakespans) {
  nlohmann::json scenarios = read_json_file(kDir + "scenarios.json");
  ASSERT_GE(scenarios.size(), 5u);
  for (const auto& s : scenarios) {
    const std::string name = s.at("name").get<std::string>();
    Machine m = machine_from_json(read_json_file(kDir + s.at("machine").get<std::string>()), name);
    TaskGraph tg;
    if (s.contains("task_graph")) {
      tg = task_graph_from_json(read_json_file(kDir + s.at("task_graph").get<std::string>()), name);
    } else {
      Graph g = graph_from_json(read_json_file(kDir + s.at("graph").get<std::string>()), name);
      Decomposition d = decomposition_from_json(read_json_file(kDir + s.at("decomposition").get<std::string>()), g, name);
      tg = lower(g, d);
    }
    SimOptions o;
    o.network = s.at("network").get<std::string>();
    o.policy = parse_policy(s.at("policy").get<std::string>());
    o.interference = s.at("interference").get<bool>();
    SimResult r = simulate(tg, m, o);
    EXPECT_EQ(testing::ps(r.makespan_s), s.at("makespan_ps").get<std::int64_t>()) << name;
  }
}

}  // namespace
}  // namespace tessel::sim
