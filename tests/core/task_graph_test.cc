// lower()'s limits (core/task_graph.h, LowerOptions): a caller that lowers many
// candidate decompositions (planner/search.h) bounds the memory and the time of each.
#include <gtest/gtest.h>

#include <atomic>

#include "core/error.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"

namespace tessel {
namespace {

// max_tasks: a graph of exactly that many tasks is lowered as without a limit; one task
// fewer allowed, and the lowering stops with a ResourceError (not a plain input Error).
TEST(LowerLimits, MaxTasksStopsALargerGraphAndLeavesASmallerOneAlone) {
  Graph g = build_workload("llama-block:model=tiny,seq=64");
  Decomposition d = split_largest(g, 8);
  const TaskGraph whole = lower(g, d);
  ASSERT_GT(whole.size(), 100u);
  LowerOptions o;
  o.max_tasks = static_cast<std::int64_t>(whole.size());
  const TaskGraph bounded = lower(g, d, o);
  EXPECT_EQ(bounded.size(), whole.size());
  EXPECT_EQ(bounded.summary().edges, whole.summary().edges);
  o.max_tasks = static_cast<std::int64_t>(whole.size()) - 1;
  EXPECT_THROW((void)lower(g, d, o), ResourceError);
}

// cancel: already set, the lowering stops at once with an Error; unset, it has no effect.
TEST(LowerLimits, CancelStopsTheLowering) {
  Graph g = build_workload("llama-block:model=tiny,seq=64");
  Decomposition d = split_largest(g, 8);
  LowerOptions o;
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  EXPECT_EQ(lower(g, d, o).size(), lower(g, d).size());
  cancel = true;
  try {
    (void)lower(g, d, o);
    ADD_FAILURE() << "not cancelled";
  } catch (const ResourceError&) {
    ADD_FAILURE() << "cancelled as if too large";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel
