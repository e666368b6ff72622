// The interference model per configuration (mechanism × stream priority × reserved SMs)
// in closed form: a GEMM overlapped with a copy of known size finishes when predicted.
#include <gtest/gtest.h>

#include <string>

#include "core/machine.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace tessel::sim {
namespace {

using testing::ps;
using testing::switch_machine;
using testing::TgBuilder;

// A GEMM of 1 ms (1e9 flop at 1 TFLOP/s) and a 100 µs move (1 MB at 1e10 B/s) start
// together on device 0 (100 SMs). With compute slowed by a and the move by b while both
// run, and b·M < a·C: the move ends at b·M; compute has done b·M/a of its C by then and
// runs the rest alone: C + b·M·(1 − 1/a).
struct Overlap {
  double move_end_s, compute_end_s;
};
Overlap predicted(double a, double b) {
  const double C = 1e-3, M = 1e-4;
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
    double a, b;  // the factors this configuration must use
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
    const Overlap want = predicted(c.a, c.b);
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
  // SM kernels with 33 of 132 SMs reserved, unmeasured: compute at most 99/132 of its
  // speed (4/3 slower), communication meets the copy-engine contention only.
  f.comm_mechanism = CommMechanism::sm_kernels;
  f.comm_sms = 33;
  EXPECT_DOUBLE_EQ(f.resolve(sms).compute_slowdown, 132.0 / 99.0);
  EXPECT_DOUBLE_EQ(f.resolve(sms).comm_slowdown, 1.28);
  EXPECT_NE(f.resolve(sms).source.find("2606.09200"), std::string::npos);
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

TEST(Interference, ReservedSmsShortenAnOverlappedRunAndLeavePriorityNothingToChange) {
  // The overlap-priority experiment in miniature: normal, high, reserved, high + reserved.
  Machine m = switch_machine(2, 0, 1e10);
  m.interference = Interference{};
  m.device_types[0].sm_count = 132;
  const double base = simulated(m, "flow").compute_end_s;
  m.interference.comm_priority = CommPriority::high;
  const double high = simulated(m, "flow").compute_end_s;
  m.interference.comm_sms = 16;
  const double both = simulated(m, "flow").compute_end_s;
  m.interference.comm_priority = CommPriority::normal;
  const double reserved = simulated(m, "flow").compute_end_s;
  // Compute is the longer side here; what priority and reservation change is how long the
  // move slows it. Closed form per configuration.
  EXPECT_NEAR(base, predicted(1.189, 2.98).compute_end_s, 2e-12);
  EXPECT_NEAR(high, predicted(1.40, 1.71).compute_end_s, 2e-12);
  // With 16 SMs of its own, communication takes none of compute's: the normal row's
  // compute factor (above 132/116) at either priority, communication at HBM contention.
  EXPECT_NEAR(reserved, predicted(1.189, 1.28).compute_end_s, 2e-12);
  EXPECT_EQ(both, reserved);
}

}  // namespace
}  // namespace tessel::sim
