// The network models against closed forms, driven directly through NetworkModel.
#include "sim/network.h"

#include <gtest/gtest.h>

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

TEST(Network, AlphaBetaLinkServesOneTransferAtATimeInOrder) {
  Machine m = switch_machine(3, 1e-6, 1e10);
  auto done = run("alpha-beta", m, {{0, 2, 1'000'000, 0}, {1, 2, 1'000'000, 0}});
  EXPECT_EQ(done[0], 101'000'000);
  EXPECT_EQ(done[1], 202'000'000);
  // Disjoint routes do not wait for each other.
  done = run("alpha-beta", m, {{0, 1, 1'000'000, 0}, {1, 2, 1'000'000, 0}});
  EXPECT_EQ(done[0], 101'000'000);
  EXPECT_EQ(done[1], 101'000'000);
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
