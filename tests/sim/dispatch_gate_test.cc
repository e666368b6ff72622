// The dispatch gate (DeviceType::dispatch_interval_s) in closed form: tasks of one chip
// start at least the interval apart, first come first served, whatever their lane or
// virtual device; inputs and outputs pass it too; devices on chips of their own have
// gates of their own; a held task's wait is not busy time; 0 changes nothing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/machine.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace tessel::sim {
namespace {

using testing::bare_machine;
using testing::ps;
using testing::TgBuilder;

constexpr double kInterval = 5e-6;

Machine gated(int devices, double interval = kInterval) {
  Machine m = bare_machine(devices, 1e12, 1e30);  // 1 TFLOP/s, memory free
  m.device_types[0].dispatch_interval_s = interval;
  return m;
}

SimResult run(const TaskGraph& tg, const Machine& m, Policy policy = Policy::async) {
  SimOptions o;
  o.interference = false;
  o.policy = policy;
  return simulate(tg, m, o);
}

// One 1 us kernel (1e6 flop) on each device, all ready at 0.
TaskGraph one_kernel_each(int devices) {
  TgBuilder b(devices);
  for (int d = 0; d < devices; ++d) b.compute(d, 1e6, 0, {});
  return b.graph();
}

TEST(DispatchGate, DevicesOnChipsOfTheirOwnStartTogether) {
  const SimResult r = run(one_kernel_each(4), gated(4));
  for (const Span& s : r.timeline.spans) EXPECT_EQ(ps(s.start_s), 0);
  EXPECT_EQ(ps(r.makespan_s), ps(1e-6));
}

TEST(DispatchGate, VirtualDevicesOfOneChipStartOneIntervalApart) {
  Machine m = gated(4);
  for (Device& d : m.devices) d.chip = 0;
  // No chip sharing in the way: each kernel alone on the chip (the next starts 5 us later,
  // after it ended).
  const SimResult r = run(one_kernel_each(4), m);
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(ps(r.timeline.spans[static_cast<std::size_t>(d)].start_s), ps(d * kInterval)) << d;  // task order
    EXPECT_EQ(ps(r.timeline.spans[static_cast<std::size_t>(d)].end_s), ps(d * kInterval + 1e-6)) << d;
  }
  EXPECT_EQ(ps(r.makespan_s), ps(3 * kInterval + 1e-6));
  EXPECT_EQ(r.dispatch_held_tasks, 3);  // held 5, 10 and 15 us
  // The critical path (first to last) is the chain of starts: each held back by the one before.
  EXPECT_EQ(r.critical_path, (std::vector<TaskId>{TaskId(0), TaskId(1), TaskId(2), TaskId(3)}));
  EXPECT_EQ(ps(r.dispatch_wait_s), ps(6 * kInterval));
  const nlohmann::json j = to_json(r, m);
  EXPECT_EQ(j.at("dispatch_held_tasks").get<std::int64_t>(), 3);
  EXPECT_EQ(ps(j.at("dispatch_wait_s").get<double>()), ps(6 * kInterval));
}

TEST(DispatchGate, AChainRunsAtTheSlowerOfItsKernelsAndTheGate) {
  // N dependent kernels of D seconds on one device: (N - 1) max(I, D) + D.
  for (double d_s : {1e-6, 2e-5}) {
    TgBuilder b(1);
    BufferId prev = b.compute(0, d_s * 1e12, 0, {});
    for (int k = 1; k < 10; ++k) prev = b.compute(0, d_s * 1e12, 0, {prev});
    const SimResult r = run(b.graph(), gated(1));
    EXPECT_EQ(ps(r.makespan_s), ps(9 * std::max(kInterval, d_s) + d_s)) << d_s;
  }
}

TEST(DispatchGate, InputsAndOutputsPassTheGate) {
  // input -> kernel (1 us) -> output on one device: three starts, 5 us apart.
  TgBuilder b(1);
  const BufferId x = b.input(0, 1024);
  const BufferId y = b.compute(0, 1e6, 0, {x});
  b.output(y);
  const SimResult r = run(b.graph(), gated(1));
  EXPECT_EQ(ps(r.timeline.spans[0].start_s), 0);
  EXPECT_EQ(ps(r.timeline.spans[1].start_s), ps(kInterval));
  EXPECT_EQ(ps(r.timeline.spans[2].start_s), ps(2 * kInterval));
  EXPECT_EQ(ps(r.makespan_s), ps(2 * kInterval));
}

TEST(DispatchGate, EveryLaneOfAChipPassesOneGate) {
  // A kernel (task 0), an input (task 1) and a move of that input (task 2), on device 0.
  // The input, taking no time, goes through at 0; then the kernel's compute lane and the
  // move's comm lane, in the order they became ready: the kernel at 5 us, the move at 10.
  Machine m = testing::switch_machine(2, 0, 1e9);  // 1 GB/s, no latency
  m.device_types[0].dispatch_interval_s = kInterval;
  TgBuilder b(2);
  b.compute(0, 1e6, 0, {});
  const BufferId x = b.input(0, 4000);  // 4 kB: 4 us on the link
  b.move(x, 1);
  const SimResult r = run(b.graph(), m);
  EXPECT_EQ(ps(r.timeline.spans[1].start_s), 0);
  EXPECT_EQ(ps(r.timeline.spans[0].start_s), ps(kInterval));
  EXPECT_EQ(ps(r.timeline.spans[2].start_s), ps(2 * kInterval));
  EXPECT_EQ(ps(r.timeline.spans[2].end_s), ps(2 * kInterval + 4e-6));
}

TEST(DispatchGate, TimeHeldAtTheGateIsNotBusyTime) {
  TgBuilder b(1);
  b.compute(0, 1e6, 0, {});
  b.compute(0, 1e6, 0, {});
  const SimResult r = run(b.graph(), gated(1));
  EXPECT_EQ(ps(r.makespan_s), ps(kInterval + 1e-6));
  EXPECT_EQ(ps(r.devices[0].compute_busy_s), ps(2e-6));
}

TEST(DispatchGate, NoIntervalChangesNothing) {
  Machine m = gated(4, 0);
  for (Device& d : m.devices) d.chip = 0;
  Machine plain = bare_machine(4, 1e12, 1e30);
  for (Device& d : plain.devices) d.chip = 0;
  const SimResult a = run(one_kernel_each(4), m), p = run(one_kernel_each(4), plain);
  EXPECT_EQ(ps(a.makespan_s), ps(p.makespan_s));
  EXPECT_EQ(a.events, p.events);
  EXPECT_EQ(a.dispatch_held_tasks, 0);
  EXPECT_EQ(a.dispatch_wait_s, 0);
}

// Two phases of one 1 us kernel on each of 2 virtual devices of one chip.
TaskGraph two_phases() {
  TgBuilder b(2);
  const BufferId a0 = b.compute(0, 1e6, 0, {}, 4, 0);
  const BufferId a1 = b.compute(1, 1e6, 0, {}, 4, 0);
  b.compute(0, 1e6, 0, {a0}, 4, 1);
  b.compute(1, 1e6, 0, {a1}, 4, 1);
  return b.graph();
}

TEST(DispatchGate, BspPhasesWaitForTheGateAndTheBarrier) {
  Machine m = gated(2);
  for (Device& d : m.devices) d.chip = 0;
  const TaskGraph tg = two_phases();
  // Without a barrier cost, starts are 0, 5, 10, 15 us under either policy: the gate, not
  // the barrier (phase 1 ends at 6), spaces them.
  EXPECT_EQ(ps(run(tg, m, Policy::async).makespan_s), ps(3 * kInterval + 1e-6));
  EXPECT_EQ(ps(run(tg, m, Policy::bsp).makespan_s), ps(3 * kInterval + 1e-6));
  // A barrier of 7 us releases the next phase at 13 us, after the gate's next start (10):
  // it starts at 13 and 18 and ends at 19 us; async keeps 16.
  m.barrier_latency_s = 7e-6;
  EXPECT_EQ(ps(run(tg, m, Policy::async).makespan_s), ps(3 * kInterval + 1e-6));
  const SimResult bsp = run(tg, m, Policy::bsp);
  EXPECT_EQ(ps(bsp.timeline.spans[2].start_s), ps(13e-6));
  EXPECT_EQ(ps(bsp.timeline.spans[3].start_s), ps(18e-6));
  EXPECT_EQ(ps(bsp.makespan_s), ps(19e-6));
}

TEST(DispatchGate, InterferenceRetimesAHeldTaskOnlyOnceItRuns) {
  // A 1 ms GEMM on device 0 and, held behind it at the gate, a 100 us move sent by device
  // 0 (a 1 MB input, 1e10 B/s): the GEMM starts at 5 us and runs alone until the move
  // starts at 10 us; then the move is slowed by b = 4 (400 us) and the GEMM by a = 1.25,
  // which ends at 5 us + 1 ms + 400 us * (1 - 1/a) = 1.085 ms. Held, the move did not
  // slow the GEMM.
  const double a = 1.25, b = 4.0;
  Machine m = testing::switch_machine(2, 0, 1e10);
  m.interference = Interference{};
  m.interference.measured = true;
  m.interference.normal = {a, b, "test"};
  m.device_types[0].dispatch_interval_s = kInterval;
  TgBuilder bld(2);
  bld.compute(0, 1e9, 0, {});
  const BufferId x = bld.input(0, 1'000'000);
  bld.move(x, 1);
  SimOptions o;
  const SimResult r = simulate(bld.graph(), m, o);
  // The input passes at 0, the GEMM at 5 us, the move at 10 us.
  EXPECT_EQ(ps(r.timeline.spans[0].start_s), ps(kInterval));
  EXPECT_EQ(ps(r.timeline.spans[2].start_s), ps(2 * kInterval));
  EXPECT_NEAR(r.timeline.spans[2].end_s, 2 * kInterval + b * 1e-4, 1e-12);
  EXPECT_NEAR(r.timeline.spans[0].end_s, kInterval + 1e-3 + b * 1e-4 * (1 - 1 / a), 1e-12);
}

TEST(DispatchGate, SameInputsSameTimelineBitForBit) {
  Machine m = gated(4);
  for (Device& d : m.devices) d.chip = 0;
  TgBuilder b(4);
  std::vector<BufferId> prev(4);
  for (int d = 0; d < 4; ++d) prev[static_cast<std::size_t>(d)] = b.compute(d, 3e6 + d * 1e5, 0, {});
  for (int k = 0; k < 20; ++k)
    for (int d = 0; d < 4; ++d) {
      auto& p = prev[static_cast<std::size_t>(d)];
      p = b.compute(d, 1e6 * (1 + (k * 7 + d) % 5), 0, {p, prev[static_cast<std::size_t>((d + 1) % 4)]});
    }
  const SimResult r1 = run(b.graph(), m), r2 = run(b.graph(), m);
  ASSERT_EQ(r1.timeline.spans.size(), r2.timeline.spans.size());
  for (std::size_t i = 0; i < r1.timeline.spans.size(); ++i) {
    EXPECT_EQ(r1.timeline.spans[i].start_s, r2.timeline.spans[i].start_s);
    EXPECT_EQ(r1.timeline.spans[i].end_s, r2.timeline.spans[i].end_s);
  }
  // Starts on the chip are at least one interval apart.
  std::vector<double> starts;
  for (const Span& s : r1.timeline.spans) starts.push_back(s.start_s);
  std::sort(starts.begin(), starts.end());
  for (std::size_t i = 1; i < starts.size(); ++i) EXPECT_GE(ps(starts[i] - starts[i - 1]), ps(kInterval) - 1) << i;
}

TEST(DispatchGate, TheIntervalIsPartOfTheMachineJsonAndChecked) {
  Machine m = gated(2, 4.5e-6);
  const Machine back = machine_from_json(to_json(m));
  EXPECT_EQ(back.device_types[0].dispatch_interval_s, 4.5e-6);
  EXPECT_EQ(back, m);
  nlohmann::json j = to_json(m);
  j["device_types"][0]["dispatch_interval_s"] = -1e-6;
  const std::string e = tessel::testing::error_of([&] { (void)machine_from_json(j, "m.json"); });
  EXPECT_NE(e.find("m.json.device_types[0].dispatch_interval_s: must be a finite number >= 0"), std::string::npos) << e;
}

}  // namespace
}  // namespace tessel::sim
