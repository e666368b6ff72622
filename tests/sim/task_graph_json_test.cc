#include "sim/task_graph_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/partition.h"
#include "core/workloads.h"
#include "tests/support/error_of.h"

namespace tessel::sim {
namespace {

using nlohmann::json;

std::string error_of(const json& j) {
  return testing::error_of([&] { (void)task_graph_from_json(j, "tg.json"); });
}

TEST(TaskGraphJson, LoweredGraphsRoundTrip) {
  Graph g = build_workload("chain-sum:size=64");
  TaskGraph tg = lower(g, split_largest(g, 4));
  TaskGraph back = task_graph_from_json(json::parse(to_json(tg).dump()));
  ASSERT_EQ(back.size(), tg.size());
  EXPECT_EQ(back.num_devices, tg.num_devices);
  for (std::size_t i = 0; i < tg.size(); ++i) {
    const Task &a = tg.tasks[i], &b = back.tasks[i];
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.device, b.device);
    EXPECT_EQ(a.dst_device, b.dst_device);
    EXPECT_EQ(a.reads, b.reads);
    EXPECT_EQ(a.writes, b.writes);
    EXPECT_EQ(a.deps, b.deps);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(a.flops, b.flops);
    EXPECT_EQ(a.src, b.src);
    EXPECT_EQ(a.op, b.op);
  }
  ASSERT_EQ(back.buffers.size(), tg.buffers.size());
  for (std::size_t b = 0; b < tg.buffers.size(); ++b) EXPECT_EQ(back.buffers[b].bytes(), tg.buffers[b].bytes());
}

json two_tasks() {
  return json::parse(R"({"devices": 2,
    "buffers": [{"device": 0, "shape": [4]}, {"device": 1, "shape": [4]}],
    "tasks": [{"kind": "compute", "device": 0, "writes": 0, "flops": 8},
              {"kind": "move", "device": 0, "dst_device": 1, "reads": [0], "writes": 1}]})");
}

TEST(TaskGraphJson, DependenciesDefaultToTheWritersOfWhatATaskReads) {
  TaskGraph tg = task_graph_from_json(two_tasks());
  EXPECT_EQ(tg.tasks[1].deps, std::vector<TaskId>{TaskId(0)});
  EXPECT_EQ(tg.tasks[1].bytes, 16);
}

TEST(TaskGraphJson, ACycleIsReportedWithItsTasks) {
  json j = two_tasks();
  j["tasks"][0]["deps"] = {1};
  std::string e = error_of(j);
  EXPECT_NE(e.find("dependency cycle"), std::string::npos) << e;
  EXPECT_NE(e.find("0 → 1 → 0"), std::string::npos) << e;
}

TEST(TaskGraphJson, BadFieldsAreNamed) {
  json j = two_tasks();
  j["tasks"][1]["dst_device"] = 5;
  EXPECT_NE(error_of(j).find("tg.json.tasks[1].dst_device: device 5 does not exist"), std::string::npos);
  j = two_tasks();
  j["tasks"][1]["reads"] = {7};
  EXPECT_NE(error_of(j).find("tg.json.tasks[1].reads[0]: buffer 7 does not exist"), std::string::npos);
  j = two_tasks();
  j["tasks"][0]["kind"] = "launch";
  EXPECT_NE(error_of(j).find("tg.json.tasks[0].kind"), std::string::npos);
  j = two_tasks();
  j["tasks"][1]["writes"] = 0;  // a buffer on the source device
  EXPECT_NE(error_of(j).find("tg.json.tasks[1].writes"), std::string::npos);
  j = two_tasks();
  j["tasks"][0].erase("writes");
  EXPECT_NE(error_of(j).find("tg.json.tasks[0]: missing field \"writes\""), std::string::npos);
  j = two_tasks();
  j.erase("devices");
  EXPECT_NE(error_of(j).find("missing field \"devices\""), std::string::npos);
}

}  // namespace
}  // namespace tessel::sim
