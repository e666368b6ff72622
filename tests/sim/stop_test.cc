// SimOptions::stop_after_s and cancel: a run stopped early says so and never reports a
// makespan below the one it would have had (the bound planners rely on).
#include <gtest/gtest.h>

#include <atomic>

#include "core/partition.h"
#include "core/workloads.h"
#include "sim/simulator.h"

namespace tessel::sim {
namespace {

struct Case {
  const char* workload;
  const char* machine;
  int devices;
};

TEST(SimulatorStop, ABoundStopsOnlyRunsThatEndPastIt) {
  for (const Case& c : {Case{"llama-block:model=7b,seq=128", "cluster:4xh100-sxm-8", 32},
                        Case{"chain-sum:size=2000,skewed=1", "h100-sxm-8", 8}}) {
    Graph g = build_workload(c.workload);
    TaskGraph tg = lower(g, split_largest(g, c.devices));
    Machine m = machine_preset(c.machine);
    for (const char* network : {"flow", "alpha-beta"})
      for (Policy policy : {Policy::async, Policy::bsp}) {
        SimOptions o;
        o.network = network;
        o.policy = policy;
        const SimResult full = simulate(tg, m, o);
        ASSERT_FALSE(full.stopped);
        const double t = full.makespan_s;
        for (double bound : {0.0, 0.1 * t, 0.5 * t, 0.999 * t, t, 1.5 * t}) {
          o.stop_after_s = bound;
          const SimResult r = simulate(tg, m, o);
          SCOPED_TRACE(std::string(c.workload) + " " + network + " bound " + std::to_string(bound / t));
          if (bound >= t) {  // it ends by the bound: run to its end, the same result
            EXPECT_FALSE(r.stopped);
            EXPECT_EQ(r.makespan_s, t);
            EXPECT_EQ(r.events, full.events);
            EXPECT_EQ(r.timeline, full.timeline);
          } else {
            EXPECT_TRUE(r.stopped);
            EXPECT_FALSE(r.cancelled);
            EXPECT_GT(r.makespan_s, bound);  // past the bound...
            EXPECT_LE(r.makespan_s, t);      // ...and never above the makespan it stands for
            EXPECT_LT(r.events, full.events);
            EXPECT_TRUE(r.timeline.spans.empty());
          }
        }
      }
  }
}

TEST(SimulatorStop, ACancelledRunSaysSo) {
  Graph g = build_workload("llama-block:model=tiny");
  TaskGraph tg = lower(g, split_largest(g, 8));
  std::atomic<bool> cancel{true};
  SimOptions o;
  o.cancel = &cancel;
  const SimResult r = simulate(tg, machine_preset("h100-sxm-8"), o);
  EXPECT_TRUE(r.stopped);
  EXPECT_TRUE(r.cancelled);
  cancel = false;
  const SimResult full = simulate(tg, machine_preset("h100-sxm-8"), o);
  EXPECT_FALSE(full.stopped);
  EXPECT_GT(full.makespan_s, 0);
}

}  // namespace
}  // namespace tessel::sim
