// Virtual devices of one chip (Device::chip) in closed form: k compute tasks running at
// once on a chip each run k times slower (processor sharing), devices on other chips are
// not slowed, and the chip survives the machine JSON.
#include <gtest/gtest.h>

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
  for (Device& d : four.devices) d.chip = 7;
  EXPECT_NEAR(run(four, {1e9, 1e9, 1e9, 1e9}).makespan_s, run(one, {4e9}).makespan_s, 1e-12);
}

TEST(ChipSharing, TheChipIsPartOfTheMachineJson) {
  Machine m = bare_machine(2);
  m.devices[1].chip = 3;
  const Machine back = machine_from_json(to_json(m));
  EXPECT_EQ(back.devices[0].chip, -1);
  EXPECT_EQ(back.devices[1].chip, 3);
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
