// --copy-lane on run and compare (experiments/memory_cap.h): what the JSON reports per
// backend, and the warnings where the choice does less than it says (a preset machine's
// simulation, the fixed offload order).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/cpu_executor.h"
#include "tests/support/cli.h"

namespace {

using tessel::testing::run_tessel;

// copy_lane is the cpu backend's choice: the other backends have no per-device worker to
// choose for, so their JSON carries null, in run as in compare.
TEST(CopyLaneCli, OnlyTheCpuBackendReportsACopyLane) {
  auto block = run_tessel("run -w llama-block:model=tiny -d 1 --memory-cap 50% --backend block --json");
  ASSERT_EQ(block.status, 0) << block.output();
  const auto jb = nlohmann::json::parse(block.out);
  EXPECT_TRUE(jb["copy_lane"].is_null()) << jb["copy_lane"].dump();
  EXPECT_TRUE(jb["copy_lane_cores_shared"].is_null()) << jb["copy_lane_cores_shared"].dump();
  auto cpu = run_tessel("run -w llama-block:model=tiny -d 1 --memory-cap 50% --json");
  ASSERT_EQ(cpu.status, 0) << cpu.output();
  const auto jc = nlohmann::json::parse(cpu.out);
  EXPECT_EQ(jc["copy_lane"], "worker");
  EXPECT_EQ(jc["copy_lane_cores_shared"], false);  // no copy lanes: nothing shares a core
}

// A preset machine's device types are not single-lane: its simulation runs evicts and
// loads beside compute whatever --copy-lane says, so compare warns, naming the machine;
// the JSON reports whether the copy lanes share the workers' cores (2 x devices cores
// or not), which the simulation does not model.
TEST(CopyLaneCli, CompareWarnsWhereTheMachineIgnoresTheCopyLane) {
  const std::string cmd = "compare -w llama-block:model=tiny -d 1 -s data-parallel --policy async --repeat 1 "
                          "--warmup 0 --compute-model analytic --memory-cap 50% --json -m cpu:1 --copy-lane ";
  auto thread = run_tessel(cmd + "thread");
  ASSERT_EQ(thread.status, 0) << thread.output();
  EXPECT_NE(thread.err.find("tessel: warning: --copy-lane thread: machine 'cpu:1'"), std::string::npos)
      << thread.output();
  const auto j = nlohmann::json::parse(thread.out);
  EXPECT_EQ(j["copy_lane"], "thread");
  EXPECT_EQ(j["copy_lane_cores_shared"], tessel::runtime::copy_lane_core(1, 0) < 0);
  auto worker = run_tessel(cmd + "worker");
  ASSERT_EQ(worker.status, 0) << worker.output();
  EXPECT_EQ(worker.err.find("machine 'cpu:1'"), std::string::npos) << worker.output();
}

// In the fixed order each device's kernels and transfers are chained: the copy lane
// overlaps nothing there, and run says so.
TEST(CopyLaneCli, TheFixedOrderWarnsThatTheCopyLaneOverlapsNothing) {
  auto r = run_tessel("run -w llama-block:model=tiny -d 1 --memory-cap 50% --offload-order fixed --copy-lane thread --json");
  ASSERT_EQ(r.status, 0) << r.output();
  EXPECT_NE(r.err.find("tessel: warning: --copy-lane thread with --offload-order fixed"), std::string::npos)
      << r.output();
  EXPECT_TRUE(nlohmann::json::parse(r.out)["correct"].get<bool>());
  auto free = run_tessel("run -w llama-block:model=tiny -d 1 --memory-cap 50% --copy-lane thread --json");
  ASSERT_EQ(free.status, 0) << free.output();
  EXPECT_EQ(free.err.find("--offload-order fixed"), std::string::npos) << free.output();
}

}  // namespace
