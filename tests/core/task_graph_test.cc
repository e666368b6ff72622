// lower()'s limits (core/task_graph.h, LowerOptions): a caller that lowers many
// candidate decompositions (planner/search.h) bounds the memory and the time of each.
// first_backward_bsp_dependency: none in a lowered graph, the first one in a
// memory-capped graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "core/error.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "tests/support/capped_plan.h"

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

// A lowered graph's dependencies follow bsp's phases; a memory-capped one's cross them
// backwards, and the helper names the first such dependency (no earlier task has one).
TEST(BspPhases, TheFirstBackwardDependencyIsNoneInALoweredGraphAndFoundInACappedOne) {
  const Graph g = build_workload("llama-block:model=tiny");
  const TaskGraph tg = lower(g, split_largest(g, 2));
  EXPECT_FALSE(first_backward_bsp_dependency(tg).has_value());
  const MemoryPlan plan = testing::capped_plan(tg, 0.5);
  const std::optional<BackwardBspDependency> b = first_backward_bsp_dependency(plan.graph);
  ASSERT_TRUE(b.has_value());
  const Task& t = plan.graph.task(b->task);
  EXPECT_NE(std::find(t.deps.begin(), t.deps.end(), b->dependency), t.deps.end());
  EXPECT_GT(bsp_phase(plan.graph.task(b->dependency)), bsp_phase(t));
  for (std::size_t i = 0; i < b->task.index(); ++i)
    for (TaskId d : plan.graph.tasks[i].deps) EXPECT_LE(bsp_phase(plan.graph.task(d)), bsp_phase(plan.graph.tasks[i]));
  for (TaskId d : t.deps) {
    if (d == b->dependency) break;
    EXPECT_LE(bsp_phase(plan.graph.task(d)), bsp_phase(t));
  }
}

}  // namespace
}  // namespace tessel
