// experiments/memory_cap.h as functions: the RAM a capped run takes on this machine
// (host copies, and the devices' arenas where device memory is this machine's RAM), and
// the check run and compare make against the physical memory.
#include "experiments/memory_cap.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "experiments/cli.h"

namespace tessel::cli {
namespace {

MemoryCapped capped_tiny_block() {
  const Graph g = build_workload("llama-block:model=tiny");
  const TaskGraph tg = lower(g, decompose(g, "eindecomp", 2));
  return cap_memory(tg, "50%", nullptr, "one-range", {}, &g);
}

// On the cpu and block backends a device's arena is this machine's RAM: the check counts
// it beside the host copies (it once compared the host copies alone with the RAM).
TEST(MemoryCapRam, DeviceArenasCountOnTheCpuBackend) {
  const MemoryCapped c = capped_tiny_block();
  ASSERT_GT(c.stats.bytes_evicted + c.stats.host_inputs, 0);  // something lives on the host
  const std::int64_t host = ram_bytes(c, false), all = ram_bytes(c, true);
  EXPECT_GT(host, 0);
  std::int64_t planned = 0;
  for (std::int64_t p : c.stats.planned_peak_bytes) planned += p;
  EXPECT_GE(all - host, planned);  // every device's arena, at least its planned bytes (f32: exactly)
  EXPECT_NO_THROW(check_ram(c, true, all));
  EXPECT_NO_THROW(check_ram(c, false, host));
  // Room for the host copies but not for the arenas beside them: refused on the cpu
  // backend only, naming --memory-cap and both parts.
  try {
    check_ram(c, true, all - 1);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--memory-cap: "), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(all) + " bytes of this machine's RAM"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(all - host) + " for the devices' arenas"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(check_ram(c, false, all - 1));
  EXPECT_THROW(check_ram(c, false, host - 1), Error);
  EXPECT_NO_THROW(check_ram(c, true, 0));  // physical memory unknown: unchecked
}

// Errors of the plan name the graph node by its name when the graph is given.
TEST(MemoryCapRam, PlanErrorsNameTheGraphNode) {
  const Graph g = build_workload("llama-block:model=tiny");
  const TaskGraph tg = lower(g, decompose(g, "eindecomp", 2));
  try {
    (void)cap_memory(tg, "100", nullptr, "one-range", {}, &g);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    const auto at = msg.find("of graph node ");
    ASSERT_NE(at, std::string::npos) << msg;
    const int node = std::stoi(msg.substr(at + 14));
    EXPECT_NE(msg.find("of graph node " + std::to_string(node) + " '" + g.node(NodeId(node)).name + "'"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace tessel::cli
