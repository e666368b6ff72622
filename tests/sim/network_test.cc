// The network models against closed forms, driven directly through NetworkModel.
#include "sim/network.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "tests/sim/sim_test_util.h"

namespace tessel::sim {
namespace {

using testing::add_link;
using testing::bare_machine;
using testing::switch_machine;

struct Transfer {
  int src = 0, dst = 0;
  std::int64_t bytes = 0;
  SimTime start = 0;
  double slowdown = 1;
};

// Runs the transfers through model `name`; returns each one's finish time.
std::vector<SimTime> run(const std::string& name, const Machine& m, const std::vector<Transfer>& xs) {
  RouteTable routes;
  std::vector<std::int32_t> route_of;
  for (const Transfer& x : xs) route_of.push_back(routes.add(m, m.route(DeviceId(x.src), DeviceId(x.dst))));
  auto model = make_network_model(name, NetworkContext{m, routes, static_cast<std::int32_t>(xs.size())});
  std::vector<SimTime> done(xs.size(), -1);
  std::vector<std::size_t> order(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return xs[a].start < xs[b].start; });
  std::size_t next = 0;
  std::vector<std::int32_t> finished;
  for (;;) {
    SimTime t = model->next_time();
    if (next < order.size()) t = std::min(t, xs[order[next]].start);
    if (t == kNever) break;
    finished.clear();
    if (model->next_time() == t) model->advance(t, finished);
    for (std::int32_t id : finished) done[static_cast<std::size_t>(id)] = t;
    while (next < order.size() && xs[order[next]].start == t) {
      const std::size_t i = order[next++];
      model->start(static_cast<std::int32_t>(i), route_of[i], xs[i].bytes, xs[i].slowdown, t);
    }
  }
  return done;
}

const char* const kModels[] = {"alpha-beta", "flow"};

TEST(Network, OneTransferTakesLatencyPlusBytesOverBandwidth) {
  // 3 µs + 1 MB / 10 GB/s = 103 µs, on both models, over a two-link route.
  Machine m = switch_machine(2, 3e-6, 1e10);
  for (const char* model : kModels) {
    auto done = run(model, m, {{0, 1, 1'000'000, 0}});
    EXPECT_EQ(done[0], 103'000'000) << model;
  }
}

TEST(Network, RouteBandwidthIsItsSlowestLinkAndLatencyTheSum) {
  Machine m = bare_machine(2);
  LinkId a = add_link(m, "a", 4e10, 1e-6);
  LinkId b = add_link(m, "b", 1e10, 2e-6);
  m.routes.push_back(RouteEntry{DeviceId(0), DeviceId(1), {a, b}});
  for (const char* model : kModels) {
    auto done = run(model, m, {{0, 1, 2'000'000, 0}});
    EXPECT_EQ(done[0], 3'000'000 + 200'000'000) << model;
  }
}

TEST(Network, FlowTwoTransfersThroughOneLinkEachGetHalf) {
  // Devices 0 and 1 both send 1 MB to device 2: its down link is shared.
  Machine m = switch_machine(3, 0, 1e10);
  auto done = run("flow", m, {{0, 2, 1'000'000, 0}, {1, 2, 1'000'000, 0}});
  EXPECT_EQ(done[0], 200'000'000);  // 1 MB at 5 GB/s
  EXPECT_EQ(done[1], 200'000'000);
}

TEST(Network, FlowSharingOnlyAWiderLinkIsNotSlowed) {
  // Two flows with their own 10 GB/s links meet on a 40 GB/s link.
  Machine m = bare_machine(4);
  LinkId a = add_link(m, "a", 1e10, 0), b = add_link(m, "b", 1e10, 0), wide = add_link(m, "wide", 4e10, 0);
  m.routes.push_back(RouteEntry{DeviceId(0), DeviceId(2), {a, wide}});
  m.routes.push_back(RouteEntry{DeviceId(1), DeviceId(3), {b, wide}});
  auto done = run("flow", m, {{0, 2, 1'000'000, 0}, {1, 3, 1'000'000, 0}});
  EXPECT_EQ(done[0], 100'000'000);
  EXPECT_EQ(done[1], 100'000'000);
}

TEST(Network, FlowRatesAreMaxMinFairAcrossLinks) {
  // L1 = 1 GB/s carries A and B; L2 = 2 GB/s carries B and C. Max-min: A = B = 0.5,
  // C = 1.5 GB/s. A and B (1 MB each) end at 2 ms; C (4 MB) has sent 3 MB by then and
  // sends the last 1 MB alone at 2 GB/s: 0.5 ms more.
  Machine m = bare_machine(4);
  LinkId l1 = add_link(m, "l1", 1e9, 0), l2 = add_link(m, "l2", 2e9, 0);
  m.routes.push_back(RouteEntry{DeviceId(0), DeviceId(1), {l1}});
  m.routes.push_back(RouteEntry{DeviceId(1), DeviceId(2), {l1, l2}});
  m.routes.push_back(RouteEntry{DeviceId(2), DeviceId(3), {l2}});
  auto done = run("flow", m, {{0, 1, 1'000'000, 0}, {1, 2, 1'000'000, 0}, {2, 3, 4'000'000, 0}});
  EXPECT_EQ(done[0], 2'000'000'000);
  EXPECT_EQ(done[1], 2'000'000'000);
  EXPECT_EQ(done[2], 2'500'000'000);
}

TEST(Network, FlowRateRisesWhenAFlowLeaves) {
  // Two flows share a 10 GB/s link; the 1 MB one ends at 200 µs, then the 3 MB one has
  // 2 MB left alone at 10 GB/s: 200 + 200 = 400 µs.
  Machine m = switch_machine(3, 0, 1e10);
  auto done = run("flow", m, {{0, 2, 1'000'000, 0}, {1, 2, 3'000'000, 0}});
  EXPECT_EQ(done[0], 200'000'000);
  EXPECT_EQ(done[1], 400'000'000);
}

TEST(Network, AlphaBetaLinkCarriesOneTransferAtATimeAndOverlapsTheLatency) {
  // The first holds the down link for its 100 µs of bytes, then finishes 1 µs later; the
  // second is granted at 100 µs.
  Machine m = switch_machine(3, 1e-6, 1e10);
  auto done = run("alpha-beta", m, {{0, 2, 1'000'000, 0}, {1, 2, 1'000'000, 0}});
  EXPECT_EQ(done[0], 101'000'000);
  EXPECT_EQ(done[1], 201'000'000);
  // Disjoint routes do not wait for each other.
  done = run("alpha-beta", m, {{0, 1, 1'000'000, 0}, {1, 2, 1'000'000, 0}});
  EXPECT_EQ(done[0], 101'000'000);
  EXPECT_EQ(done[1], 101'000'000);
}

TEST(Network, OnOneLinkBothModelsGiveTheSameFinishTimes) {
  // Transfers one after another get identical finish times; k at once finish, the last
  // of them, at latency + k·S/B under both (flow shares, alpha-beta serialises).
  Machine m = bare_machine(2);
  LinkId l = add_link(m, "l", 1e10, 2e-6);
  m.routes.push_back(RouteEntry{DeviceId(0), DeviceId(1), {l}});
  const std::vector<Transfer> apart = {{0, 1, 1'000'000, 0}, {0, 1, 3'000'000, 150'000'000}, {0, 1, 0, 500'000'000}};
  EXPECT_EQ(run("alpha-beta", m, apart), run("flow", m, apart));
  EXPECT_EQ(run("flow", m, apart), (std::vector<SimTime>{102'000'000, 452'000'000, 502'000'000}));
  for (int k : {2, 3, 5}) {
    std::vector<Transfer> together(static_cast<std::size_t>(k), Transfer{0, 1, 1'000'000, 0});
    for (const char* model : kModels) {
      auto done = run(model, m, together);
      EXPECT_EQ(*std::max_element(done.begin(), done.end()), 2'000'000 + k * 100'000'000) << model << " k=" << k;
    }
  }
}

TEST(Network, ManyToOneKeepsTheSharedLinkBusyUntilTheLastByte) {
  // Four senders, 1 MB each, into one 10 GB/s down link: it carries 4 MB back to back.
  Machine m = switch_machine(5, 1e-6, 1e10);
  std::vector<Transfer> xs;
  for (int i = 1; i <= 4; ++i) xs.push_back({i, 0, 1'000'000, 0});
  for (const char* model : kModels) {
    auto done = run(model, m, xs);
    EXPECT_EQ(*std::max_element(done.begin(), done.end()), 1'000'000 + 400'000'000) << model;
  }
}

TEST(Network, ATransferBlockedOnOneLinkLeavesTheOthersOfItsRouteFree) {
  // Started in this order: Y 1→2 (holds down2), X 0→2 (needs up0 and down2), Z 0→3 (needs
  // up0). A per-link FIFO would keep up0 idle behind X while X waits for down2, and Z would
  // finish after 300 µs. Work-conserving: up0 and down2 each carry 2 MB back to back, so
  // everything is done at 1 µs + 200 µs; under alpha-beta Z goes at once.
  Machine m = switch_machine(4, 1e-6, 1e10);
  const std::vector<Transfer> xs = {{1, 2, 1'000'000, 0}, {0, 2, 1'000'000, 0}, {0, 3, 1'000'000, 0}};
  for (const char* model : kModels) {
    auto done = run(model, m, xs);
    EXPECT_EQ(*std::max_element(done.begin(), done.end()), 201'000'000) << model;
  }
  auto done = run("alpha-beta", m, xs);
  EXPECT_EQ(done[0], 101'000'000);
  EXPECT_EQ(done[2], 101'000'000);
  EXPECT_EQ(done[1], 201'000'000);
}

TEST(Network, MultiHopTransfersShareNoMoreThanTheirCommonLink) {
  // A chain of three links a→b→c; transfers 0→3 (a, b, c), 0→1 (a), 2→3 (c), 1 MB each at
  // 10 GB/s: a and c carry 2 MB each; the busiest-link bound is 200 µs.
  Machine m = bare_machine(4);
  LinkId a = add_link(m, "a", 1e10, 0), b = add_link(m, "b", 1e10, 0), c = add_link(m, "c", 1e10, 0);
  m.routes.push_back(RouteEntry{DeviceId(0), DeviceId(3), {a, b, c}});
  m.routes.push_back(RouteEntry{DeviceId(0), DeviceId(1), {a}});
  m.routes.push_back(RouteEntry{DeviceId(2), DeviceId(3), {c}});
  const std::vector<Transfer> xs = {{0, 3, 1'000'000, 0}, {0, 1, 1'000'000, 0}, {2, 3, 1'000'000, 0}};
  for (const char* model : kModels) {
    auto done = run(model, m, xs);
    EXPECT_EQ(*std::max_element(done.begin(), done.end()), 200'000'000) << model;
  }
}

// One closed form per topology level of the presets: the busiest link's bytes over its
// bandwidth, plus the route's latency.
TEST(Network, NvswitchManyToOneTakesTheDownLinksBytesOverItsBandwidth) {
  Machine m = machine_preset("h100-sxm-8");  // NVLink 4: 450 GB/s per direction, 3.4 µs per hop
  std::vector<Transfer> xs;
  for (int i = 1; i < 8; ++i) xs.push_back({i, 0, 45'000'000, 0});
  for (const char* model : kModels) {
    auto done = run(model, m, xs);
    EXPECT_EQ(*std::max_element(done.begin(), done.end()), 3'400'000 + 7 * 100'000'000) << model;
  }
}

TEST(Network, CrossNodeTransfersIntoOneNicTakeItsBytesOverItsBandwidth) {
  // Two GPUs of node 0 send 50 MB each to GPU 0 of node 1: its NIC (50 GB/s, 14 µs) carries 100 MB.
  Machine m = machine_preset("cluster:2xh100-sxm-8");
  const std::vector<Transfer> xs = {{0, 8, 50'000'000, 0}, {1, 8, 50'000'000, 0}};
  for (const char* model : kModels) {
    auto done = run(model, m, xs);
    EXPECT_EQ(*std::max_element(done.begin(), done.end()), 14'000'000 + 2'000'000'000) << model;
  }
}

TEST(Network, OversubscribedSpineCarriesItsBandwidthNotTheNics) {
  // oversubscription=4: node 0's uplink carries 8 × 50 / 4 = 100 GB/s. Eight 50 MB
  // transfers, GPU i → GPU 8 + i (each its own NICs): 400 MB over 100 GB/s = 4 ms.
  Machine m = machine_preset("cluster:2xh100-sxm-8,oversubscription=4");
  std::vector<Transfer> xs;
  for (int i = 0; i < 8; ++i) xs.push_back({i, 8 + i, 50'000'000, 0});
  for (const char* model : kModels) {
    auto done = run(model, m, xs);
    EXPECT_EQ(*std::max_element(done.begin(), done.end()), 14'000'000 + 4'000'000'000) << model;
  }
}

TEST(Network, SlowdownStretchesATransfer) {
  Machine m = switch_machine(2, 0, 1e10);
  for (const char* model : kModels) {
    auto done = run(model, m, {{0, 1, 1'000'000, 0, 2.0}});
    EXPECT_EQ(done[0], 200'000'000) << model;
  }
}

TEST(Network, ZeroByteTransferTakesItsLatency) {
  Machine m = switch_machine(2, 5e-6, 1e10);
  for (const char* model : kModels) EXPECT_EQ(run(model, m, {{0, 1, 0, 0}})[0], 5'000'000) << model;
}

TEST(Network, UnknownModelIsAnErrorListingTheModels) {
  Machine m = switch_machine(2, 0, 1e10);
  RouteTable routes;
  try {
    (void)make_network_model("packet", NetworkContext{m, routes, 0});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("packet"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("alpha-beta"), std::string::npos);
  }
}

TEST(Network, RouteTableDropsRepeatedLinks) {
  Machine m = bare_machine(2);
  LinkId bus = add_link(m, "bus", 1e10, 1e-6);
  RouteTable r;
  auto i = r.add(m, {bus, bus});
  EXPECT_EQ(r.route(i).size(), 1u);
  EXPECT_EQ(r.latency(i), 1'000'000);
}

}  // namespace
}  // namespace tessel::sim
