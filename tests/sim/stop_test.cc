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
                        Case{"chain-sum:size=2000,skewed=1", "h100-sxm-8", 8},
                        Case{"llama-block:model=tiny,seq=64", "cluster:2xh100-sxm-8", 16},
                        Case{"ffn:tokens=64,dim=32,hidden=64", "h100-sxm-8", 4}}) {
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

// The path bound: a task released at t cannot let the run end before t plus its longest
// undisturbed path to the end. On one device the two GEMMs of a chain depend on each
// other, so at time 0 that path is the whole makespan: a bound below it stops the run
// before any GEMM runs (only the inputs' zero-time events), and the clock it reports is
// the path, not 0.
TEST(SimulatorStop, ALongestPathPastTheBoundStopsTheRunAtOnce) {
  Graph g = build_workload("chain:size=512");
  TaskGraph tg = lower(g, split_largest(g, 1));
  Machine m = machine_preset("h100-sxm-8");
  SimOptions o;
  const SimResult full = simulate(tg, m, o);
  o.stop_after_s = 0.5 * full.makespan_s;
  const SimResult r = simulate(tg, m, o);
  EXPECT_TRUE(r.stopped);
  EXPECT_FALSE(r.cancelled);
  EXPECT_GT(r.makespan_s, o.stop_after_s);
  EXPECT_LE(r.makespan_s, full.makespan_s);
  o.priority = Priority::fifo;  // no longest paths computed: only the clock stops it
  const SimResult fifo = simulate(tg, m, o);
  EXPECT_TRUE(fifo.stopped);
  EXPECT_LT(r.events, fifo.events);  // the clock had to pass the bound: the first GEMM ran
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
