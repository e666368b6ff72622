// The interference model per configuration (mechanism × stream priority × reserved SMs)
// in closed form: a GEMM overlapped with a copy of known size finishes when predicted.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/machine.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "planner/strategy.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace tessel::sim {
namespace {

using testing::ps;
using testing::switch_machine;
using testing::TgBuilder;

// A GEMM of 1 ms (1e9 flop at 1 TFLOP/s) and a 100 µs move (1 MB at 1e10 B/s) start
// together on device 0 (100 SMs). With r SMs reserved the GEMM takes C = 1 ms · s,
// s = S / (S − r), alone or not. With compute slowed by a and the move by b while both
// run, and b·M < a·C: the move ends at b·M; compute has done b·M/a of its C by then and
// runs the rest alone: C + b·M·(1 − 1/a).
struct Overlap {
  double move_end_s, compute_end_s;
};
Overlap predicted(double a, double b, double s = 1) {
  const double C = 1e-3 * s, M = 1e-4;
  return {b * M, C + b * M * (1 - 1 / a)};
}

Overlap simulated(const Machine& m, const std::string& network) {
  TgBuilder bld(2);
  BufferId in = bld.input(0, 1'000'000);
  bld.compute(0, 1e9, 0, {});
  TaskId compute = bld.last();
  bld.move(in, 1);
  TaskId move = bld.last();
  SimOptions o;
  o.network = network;
  SimResult r = simulate(bld.graph(), m, o);
  return {r.timeline.spans[move.index()].end_s, r.timeline.spans[compute.index()].end_s};
}

// Measured-style factors: every row different, so that a wrong row shows.
Machine measured_machine() {
  Machine m = switch_machine(2, 0, 1e10);
  Interference& f = m.interference;
  f = Interference{};
  f.measured = true;
  f.normal = {1.10, 2.50, "measured (test)"};
  f.high = {1.30, 1.60, "measured (test)"};
  f.copy_engine_normal = {1.05, 1.20, "measured (test)"};
  f.copy_engine_high = {1.06, 1.15, "measured (test)"};
  f.reserved = {{CommPriority::high, 20, {1.35, 1.10, "measured (test)"}},
                {CommPriority::normal, 20, {1.30, 1.40, "measured (test)"}}};
  return m;
}

TEST(Interference, EveryConfigurationFinishesAtThePredictedTime) {
  struct Config {
    CommMechanism mechanism;
    CommPriority priority;
    int sms;
    double a, b;  // the factors this configuration must use (on top of 100 / (100 − sms))
  };
  const Config configs[] = {
      {CommMechanism::sm_kernels, CommPriority::normal, 0, 1.10, 2.50},
      {CommMechanism::sm_kernels, CommPriority::high, 0, 1.30, 1.60},
      {CommMechanism::copy_engine, CommPriority::normal, 0, 1.05, 1.20},
      {CommMechanism::copy_engine, CommPriority::high, 0, 1.06, 1.15},
      {CommMechanism::sm_kernels, CommPriority::high, 20, 1.35, 1.10},
      {CommMechanism::sm_kernels, CommPriority::normal, 20, 1.30, 1.40},
  };
  for (const Config& c : configs) {
    Machine m = measured_machine();
    m.interference.comm_mechanism = c.mechanism;
    m.interference.comm_priority = c.priority;
    m.interference.comm_sms = c.sms;
    const Overlap want = predicted(c.a, c.b, 100.0 / (100 - c.sms));
    for (const char* model : {"alpha-beta", "flow"}) {
      const Overlap got = simulated(m, model);
      const std::string what = std::string(to_string(c.mechanism)) + " " + std::string(to_string(c.priority)) + " " +
                               std::to_string(c.sms) + " " + model;
      EXPECT_EQ(ps(got.move_end_s), ps(want.move_end_s)) << what;
      EXPECT_NEAR(got.compute_end_s, want.compute_end_s, 2e-12) << what;
    }
  }
}

TEST(Interference, PublishedDefaultsPerConfiguration) {
  Interference f;  // the published rows
  const int sms = 132;
  EXPECT_DOUBLE_EQ(f.resolve(sms).compute_slowdown, 1.189);
  EXPECT_DOUBLE_EQ(f.resolve(sms).comm_slowdown, 2.98);
  f.comm_priority = CommPriority::high;
  EXPECT_DOUBLE_EQ(f.resolve(sms).compute_slowdown, 1.40);
  EXPECT_DOUBLE_EQ(f.resolve(sms).comm_slowdown, 1.71);
  // Copy engines: 72% of the ideal overlap, both sides alike; priority changes nothing.
  f.comm_mechanism = CommMechanism::copy_engine;
  EXPECT_DOUBLE_EQ(f.resolve(sms).compute_slowdown, 1.28);
  EXPECT_DOUBLE_EQ(f.resolve(sms).comm_slowdown, 1.28);
  f.comm_priority = CommPriority::normal;
  EXPECT_DOUBLE_EQ(f.resolve(sms).comm_slowdown, 1.28);
  // Equal work W on both sides: copy engines capture 72% of the ideal overlap.
  {
    const SlowdownFactors r = f.resolve(sms);
    EXPECT_NEAR(r.compute_slowdown, 2 - 0.72, 1e-12);
  }
  // SM kernels with 33 of 132 SMs reserved, unmeasured: compute runs on 99 of 132 SMs all
  // the time (4/3 slower) and nothing more while communication runs; communication meets
  // the copy-engine contention only; the priority changes nothing.
  f.comm_mechanism = CommMechanism::sm_kernels;
  f.comm_sms = 33;
  for (CommPriority p : {CommPriority::normal, CommPriority::high}) {
    f.comm_priority = p;
    EXPECT_DOUBLE_EQ(f.compute_occupancy_slowdown(sms), 132.0 / 99.0);
    EXPECT_DOUBLE_EQ(f.resolve(sms).compute_slowdown, 1.0);
    EXPECT_DOUBLE_EQ(f.resolve(sms).comm_slowdown, 1.28);
    EXPECT_NE(f.resolve(sms).source.find("2606.09200"), std::string::npos);
  }
  // Copy engines with SMs reserved: compute confined as well, the copy-engine row on top.
  f.comm_mechanism = CommMechanism::copy_engine;
  EXPECT_DOUBLE_EQ(f.compute_occupancy_slowdown(sms), 132.0 / 99.0);
  EXPECT_DOUBLE_EQ(f.resolve(sms).compute_slowdown, 1.28);
  f.comm_sms = 0;
  EXPECT_DOUBLE_EQ(f.compute_occupancy_slowdown(sms), 1.0);
  EXPECT_DOUBLE_EQ(f.compute_occupancy_slowdown(0), 1.0);  // a type without an SM count
  // Every row names its source.
  for (CommMechanism mech : {CommMechanism::sm_kernels, CommMechanism::copy_engine})
    for (CommPriority p : {CommPriority::normal, CommPriority::high})
      for (int r : {0, 16}) {
        Interference g;
        g.comm_mechanism = mech;
        g.comm_priority = p;
        g.comm_sms = r;
        EXPECT_FALSE(g.resolve(sms).source.empty());
      }
}

TEST(Interference, MeasuredMachineWithoutTheConfigurationIsAnErrorNamingTheField) {
  Machine m = measured_machine();
  m.interference.copy_engine_high = {};
  m.interference.comm_mechanism = CommMechanism::copy_engine;
  m.interference.comm_priority = CommPriority::high;
  std::string e = testing::error_of([&] { (void)simulate(TgBuilder(1).graph(), m); });
  EXPECT_NE(e.find("interference.copy_engine.high: missing"), std::string::npos) << e;
  m = measured_machine();
  m.interference.comm_sms = 8;  // no reserved entry for 8 SMs
  e = testing::error_of([&] { (void)m.interference.resolve(100); });
  EXPECT_NE(e.find("interference.reserved: no entry for comm_priority \"normal\" with comm_sms 8"), std::string::npos)
      << e;
}

TEST(Interference, PriorityAndReservedSmsInClosedFormWithPublishedDefaults) {
  // The overlap-priority experiment in miniature: normal, high, reserved, high + reserved.
  Machine m = switch_machine(2, 0, 1e10);
  m.interference = Interference{};
  m.device_types[0].sm_count = 132;
  const double base = simulated(m, "flow").compute_end_s;
  m.interference.comm_priority = CommPriority::high;
  const double high = simulated(m, "flow").compute_end_s;
  m.interference.comm_sms = 16;
  const Overlap both = simulated(m, "flow");
  m.interference.comm_priority = CommPriority::normal;
  const Overlap reserved = simulated(m, "flow");
  // Compute is the longer side here. Without reservation, what priority changes is how
  // long the move slows it; with 16 SMs reserved, compute runs on 116 of 132 SMs for its
  // whole 1 ms of work and the move (1.28x, memory contention only) does not slow it.
  EXPECT_NEAR(base, predicted(1.189, 2.98).compute_end_s, 2e-12);
  EXPECT_NEAR(high, predicted(1.40, 1.71).compute_end_s, 2e-12);
  const double s = 132.0 / 116.0;
  for (const Overlap& o : {both, reserved}) {
    EXPECT_NEAR(o.compute_end_s, predicted(1.0, 1.28, s).compute_end_s, 2e-12);
    EXPECT_EQ(ps(o.compute_end_s), ps(1e-3 * s));
    EXPECT_EQ(ps(o.move_end_s), ps(1.28e-4));
  }
}

// A GEMM alone (nothing to overlap) with r of S SMs reserved takes exactly S / (S − r)
// times its time: the kernel is confined to the SMs left whether or not communication
// runs. With interference off too: reserving SMs is what the kernel is given, not how two
// kernels disturb each other.
TEST(Interference, ReservedSmsSlowAGemmAloneByTheirShare) {
  for (const CommMechanism mech : {CommMechanism::sm_kernels, CommMechanism::copy_engine})
    for (const int r : {0, 1, 20, 50, 99})
      for (const bool interference : {true, false}) {
        Machine m = switch_machine(1, 0, 1e10);
        m.interference = Interference{};
        m.interference.comm_mechanism = mech;
        m.interference.comm_sms = r;
        TgBuilder b(1);
        b.compute(0, 1e9, 0, {});  // 1 ms on 100 SMs
        SimOptions o;
        o.interference = interference;
        const SimResult res = simulate(b.graph(), m, o);
        EXPECT_EQ(ps(res.makespan_s), ps(1e-3 * 100.0 / (100 - r)))
            << to_string(mech) << " " << r << " SMs, interference " << interference;
      }
}

// The property the model promises: with SMs reserved, a high-priority communication
// stream never makes a run longer than a normal-priority one (communication has SMs of its
// own; the priority has no SMs to hand out). Planned workloads on several machines and SM
// counts, simulated under both network models.
TEST(Interference, HighPriorityNeverSlowsARunWithSmsReserved) {
  struct Case {
    const char* workload;
    const char* strategy;
    int devices;
  };
  const Case cases[] = {{"llama-block:model=7b,seq=128", "eindecomp", 8},
                        {"ffn:tokens=1024,dim=1024,hidden=4096", "megatron", 8},
                        {"chain:size=2048", "eindecomp", 4},
                        {"ffn:tokens=2048,dim=1024,hidden=2048", "data-parallel", 16}};
  int compared = 0;
  for (const char* machine : {"h100-sxm-8", "a100-sxm-8", "cluster:2xh100-sxm-8"})
    for (const Case& c : cases)
      for (const int r : {8, 16, 32}) {
        Machine base = machine_preset(machine);
        if (c.devices > base.num_devices()) continue;
        const Graph g = build_workload(c.workload);
        // Per priority, the plan made on the machine it sets, then both network models.
        auto makespans = [&](CommPriority p) {
          Machine m = base;
          InterferenceSettings s;
          s.set_priority = s.set_sms = true;
          s.comm_priority = p;
          s.comm_sms = r;
          s.apply(m);
          planner::PlanOptions po;
          po.devices = c.devices;
          po.machine = m;
          const TaskGraph tg = lower(g, planner::plan(g, c.strategy, po).decomposition);
          std::vector<double> out;
          for (const char* network : {"flow", "alpha-beta"}) {
            SimOptions o;
            o.network = network;
            out.push_back(simulate(tg, m, o).makespan_s);
          }
          return out;
        };
        const std::vector<double> normal = makespans(CommPriority::normal), high = makespans(CommPriority::high);
        for (std::size_t k = 0; k < normal.size(); ++k) {
          EXPECT_LE(high[k], normal[k]) << machine << " " << c.workload << " " << c.strategy << " " << r
                                        << " SMs, network " << (k == 0 ? "flow" : "alpha-beta");
          ++compared;
        }
      }
  EXPECT_EQ(compared, 3 * 2 * 3 * 4 - 2 * 3 * 2);  // the 16-device case only on the cluster
}

}  // namespace
}  // namespace tessel::sim
