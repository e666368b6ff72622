// The stagger among ready moves of equal priority (core/ready_order.h).
#include "core/ready_order.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "core/machine.h"
#include "core/task_graph.h"

namespace tessel {
namespace {

const StaggerLayout kLayouts[] = {{1, 0}, {2, 0}, {6, 0}, {8, 0}, {12, 4}, {16, 8}, {24, 8}, {8, 8}, {12, 5}};

TEST(ReadyOrder, StaggerPeerInvertsStaggerStep) {
  for (const StaggerLayout l : kLayouts)
    for (int src = 0; src < l.devices; ++src) {
      EXPECT_EQ(stagger_step(src, src, l), 0);
      for (int step = 1; step < l.devices; ++step) {
        const int dst = stagger_peer(src, step, l);
        EXPECT_NE(dst, src);
        EXPECT_EQ(stagger_step(src, dst, l), step) << l.devices << "/" << l.per_node << ": " << src << " -> " << dst;
      }
    }
}

TEST(ReadyOrder, EveryStepIsAPermutation) {
  for (const StaggerLayout l : kLayouts)
    for (int step = 1; step < l.devices; ++step) {
      std::set<int> receivers;
      for (int src = 0; src < l.devices; ++src) receivers.insert(stagger_peer(src, step, l));
      EXPECT_EQ(receivers.size(), static_cast<std::size_t>(l.devices)) << l.devices << "/" << l.per_node << " step " << step;
    }
}

// The m-th peer of every sender, its peers restricted to `peer(src, dst)`, ordered by step.
std::vector<std::vector<int>> nth_peers(StaggerLayout l, bool (*peer)(int, int, int), int per_node) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(l.devices));
  for (int src = 0; src < l.devices; ++src)
    for (int step = 1; step < l.devices; ++step) {
      const int dst = stagger_peer(src, step, l);
      if (peer(src, dst, per_node)) out[static_cast<std::size_t>(src)].push_back(dst);
    }
  return out;
}

bool distinct_in_every_round(const std::vector<std::vector<int>>& peers) {
  for (std::size_t m = 0; m < peers[0].size(); ++m) {
    std::set<int> receivers;
    for (const auto& p : peers) receivers.insert(p[m]);
    if (receivers.size() != peers.size()) return false;
  }
  return true;
}

TEST(ReadyOrder, MovesTiedOnlyAmongThemselvesStillSpreadOverReceivers) {
  // Inter-node moves tie among themselves in the simulator (slower routes, so higher ranks
  // than the intra-node ones): two levels send every device's m-th of them to a different
  // device; one level sends a whole node's first one to the same device of the next node.
  auto other_node = [](int src, int dst, int g) { return src / g != dst / g; };
  EXPECT_TRUE(distinct_in_every_round(nth_peers({16, 8}, other_node, 8)));
  EXPECT_TRUE(distinct_in_every_round(nth_peers({24, 8}, other_node, 8)));
  EXPECT_FALSE(distinct_in_every_round(nth_peers({16, 0}, other_node, 8)));
  // One level, any subset of devices exchanging among themselves (a group of a 2-D
  // layout): a sender's steps keep the cyclic order of its peers.
  auto same_group = [](int src, int dst, int stride) { return src % stride == dst % stride; };
  EXPECT_TRUE(distinct_in_every_round(nth_peers({12, 0}, same_group, 3)));
  auto same_block = [](int src, int dst, int g) { return src / g == dst / g; };
  EXPECT_TRUE(distinct_in_every_round(nth_peers({12, 0}, same_block, 4)));
}

TEST(ReadyOrder, TheStepGoesBeforeTheTaskIdAndOnlyMovesHaveOne) {
  EXPECT_LT(ready_tie(1, 900), ready_tie(2, 3));
  EXPECT_LT(ready_tie(0, 7), ready_tie(0, 8));
  Task move;
  move.kind = TaskKind::move;
  move.device = DeviceId(3);
  move.dst_device = DeviceId(1);
  EXPECT_EQ(ready_tie(move, TaskId(42), StaggerLayout{4}), ready_tie(2, 42));
  Task compute;
  compute.device = compute.dst_device = DeviceId(3);
  EXPECT_EQ(ready_tie(compute, TaskId(42), StaggerLayout{4}), ready_tie(0, 42));
}

TEST(ReadyOrder, DevicesPerHostNeedsWholeHostsOfOneSize) {
  const Machine two = machine_preset("cluster:2xh100-sxm-8");
  EXPECT_EQ(devices_per_host(two, 16), 8);
  EXPECT_EQ(devices_per_host(two, 8), 0);   // one host
  EXPECT_EQ(devices_per_host(two, 12), 0);  // a host and a half
  EXPECT_EQ(devices_per_host(machine_preset("h100-sxm-8"), 8), 0);
}

}  // namespace
}  // namespace tessel
