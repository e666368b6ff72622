// Virtual devices of one chip (Device::chip) in closed form: k compute tasks running at
// once on a chip each run k times slower (processor sharing), devices on other chips are
// not slowed, and the chip survives the machine JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/machine.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace tessel::sim {
namespace {

using testing::bare_machine;
using testing::TgBuilder;

// Compute tasks of `flops[d]` on device d (1 TFLOP/s each, no memory cost), all ready at 0.
SimResult run(const Machine& m, const std::vector<double>& flops) {
  TgBuilder b(m.num_devices());
  for (std::size_t d = 0; d < flops.size(); ++d) b.compute(static_cast<int>(d), flops[d], 0, {});
  SimOptions o;
  o.interference = false;
  return simulate(b.graph(), m, o);
}

TEST(ChipSharing, TwoEqualKernelsOnOneChipTakeTwiceAsLong) {
  Machine m = bare_machine(2, 1e12, 1e30);
  EXPECT_NEAR(run(m, {1e9, 1e9}).makespan_s, 1e-3, 1e-12);  // own chips: in parallel
  m.devices[0].chip = m.devices[1].chip = 0;
  const SimResult r = run(m, {1e9, 1e9});
  EXPECT_NEAR(r.timeline.spans[0].end_s, 2e-3, 1e-12);
  EXPECT_NEAR(r.timeline.spans[1].end_s, 2e-3, 1e-12);
}

TEST(ChipSharing, TheShortKernelFreesTheChipForTheLongOne) {
  // 1 ms and 2 ms of work sharing one chip: both at half speed until the short one ends at
  // 2 ms (1 ms of work done by each), then the long one alone for its last 1 ms: 3 ms.
  Machine m = bare_machine(3, 1e12, 1e30);
  m.devices[0].chip = m.devices[1].chip = 0;
  const SimResult r = run(m, {1e9, 2e9, 2e9});  // device 2 has a chip of its own
  EXPECT_NEAR(r.timeline.spans[0].end_s, 2e-3, 1e-12);
  EXPECT_NEAR(r.timeline.spans[1].end_s, 3e-3, 1e-12);
  EXPECT_NEAR(r.timeline.spans[2].end_s, 2e-3, 1e-12);  // not slowed
}

TEST(ChipSharing, FourVirtualDevicesOfOneChipAreNoFasterThanOne) {
  Machine one = bare_machine(1, 1e12, 1e30);
  Machine four = bare_machine(4, 1e12, 1e30);
  for (Device& d : four.devices) d.chip = 3;  // any index below the device count
  EXPECT_NEAR(run(four, {1e9, 1e9, 1e9, 1e9}).makespan_s, run(one, {4e9}).makespan_s, 1e-12);
}

TEST(ChipSharing, TheChipIsPartOfTheMachineJson) {
  Machine m = bare_machine(2);
  m.devices[1].chip = 1;
  const Machine back = machine_from_json(to_json(m));
  EXPECT_EQ(back.devices[0].chip, -1);
  EXPECT_EQ(back.devices[1].chip, 1);
  EXPECT_EQ(back, m);
}

}  // namespace
}  // namespace tessel::sim

namespace tessel::sim {
namespace {

TEST(ChipSharing, KernelsThatFillPartOfTheChipShareItOnlyBeyondItsWhole) {
  Machine m = testing::bare_machine(2, 1e12, 1e30);
  m.devices[0].chip = m.devices[1].chip = 0;
  testing::TgBuilder b(2);
  b.compute(0, 1e9, 0, {});
  b.compute(1, 1e9, 0, {});
  SimOptions o;
  o.interference = false;
  o.task_chip_share = {0.25, 0.25};  // together half the chip: neither slowed
  EXPECT_NEAR(simulate(b.graph(), m, o).makespan_s, 1e-3, 1e-12);
  o.task_chip_share = {0.75, 0.75};  // 1.5 chips' worth: each 1.5x slower
  EXPECT_NEAR(simulate(b.graph(), m, o).makespan_s, 1.5e-3, 1e-12);
  o.task_chip_share = {0.75, -1};  // a value outside (0, 1] claims the whole chip: 1.75x
  EXPECT_NEAR(simulate(b.graph(), m, o).makespan_s, 1.75e-3, 1e-12);
  o.task_chip_share = {0.5};
  EXPECT_THROW((void)simulate(b.graph(), m, o), Error);
}

}  // namespace
}  // namespace tessel::sim

namespace tessel::sim {
namespace {

// Interference on a shared chip is the chip's: a GEMM on virtual device 0 slows a move
// sent by virtual device 1 (two streams of one GPU, as the overlap benchmark measures),
// and the move slows the GEMM; on chips of their own neither is slowed. The closed form
// of tests/sim/interference_test.cc: compute C = 1 ms, move M = 100 us, factors a, b while
// both run, b·M < a·C: the move ends at b·M, compute at C + b·M·(1 − 1/a).
TEST(ChipSharing, InterferenceCrossesTheVirtualDevicesOfOneChip) {
  const double a = 1.25, b = 4.0, C = 1e-3, M = 1e-4;
  Machine m = testing::switch_machine(2, 0, 1e10);
  m.interference = Interference{};
  m.interference.measured = true;
  m.interference.normal = {a, b, "test"};
  auto run = [&](const Machine& mm) {
    testing::TgBuilder bld(2);
    BufferId in = bld.input(1, 1'000'000);
    bld.compute(0, 1e9, 0, {});
    const TaskId compute = bld.last();
    bld.move(in, 0);
    const TaskId move = bld.last();
    SimOptions o;
    const SimResult r = simulate(bld.graph(), mm, o);
    return std::pair{r.timeline.spans[compute.index()].end_s, r.timeline.spans[move.index()].end_s};
  };
  const auto [alone_compute, alone_move] = run(m);
  EXPECT_NEAR(alone_compute, C, 1e-12);
  EXPECT_NEAR(alone_move, M, 1e-12);
  m.devices[0].chip = m.devices[1].chip = 0;
  const auto [compute_end, move_end] = run(m);
  EXPECT_NEAR(move_end, b * M, 1e-12);
  EXPECT_NEAR(compute_end, C + b * M * (1 - 1 / a), 1e-12);
}

}  // namespace
}  // namespace tessel::sim

namespace tessel::sim {
namespace {

TEST(ChipSharing, AChipIndexBeyondTheDevicesIsRefusedNamingIt) {
  Machine m = testing::bare_machine(2);
  nlohmann::json j = to_json(m);
  j["devices"][1]["chip"] = 2147483647;
  const std::string e = tessel::testing::error_of([&] { (void)machine_from_json(j, "m.json"); });
  EXPECT_NE(e.find("m.json.devices[1].chip: 2147483647 is not a chip index"), std::string::npos) << e;
  j["devices"][1]["chip"] = 1;  // the highest a 2-device machine may name
  EXPECT_EQ(machine_from_json(j, "m.json").devices[1].chip, 1);
}

}  // namespace
}  // namespace tessel::sim
