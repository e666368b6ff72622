// Graph topologies under load: closed forms per level through both network models, and
// `tessel simulate` on graph presets (same answers as cluster: where the graph is the
// same network; bad graphs rejected with exit 1 and no trace).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/io.h"
#include "core/machine.h"
#include "sim/network.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"
#include "tests/support/cli.h"

namespace tessel::sim {
namespace {

struct Transfer {
  int src = 0, dst = 0;
  std::int64_t bytes = 0;
};

// All transfers start at 0; returns when the last one finishes (latency included).
SimTime last_finish(const std::string& model_name, const Machine& m, const std::vector<Transfer>& xs) {
  RouteTable routes;  // complete before the model sees it (flow sizes its state by the longest route)
  std::vector<std::int32_t> route_of;
  for (const Transfer& x : xs) route_of.push_back(routes.add(m, m.route(DeviceId(x.src), DeviceId(x.dst))));
  auto model = make_network_model(model_name, NetworkContext{m, routes, static_cast<std::int32_t>(xs.size())});
  for (std::size_t i = 0; i < xs.size(); ++i) model->start(static_cast<std::int32_t>(i), route_of[i], xs[i].bytes, 1, 0);
  SimTime last = 0;
  std::vector<std::int32_t> finished;
  for (SimTime t = model->next_time(); t != kNever; t = model->next_time()) {
    model->advance(t, finished);
    last = t;
  }
  EXPECT_EQ(finished.size(), xs.size());
  return last;
}

const char* const kModels[] = {"alpha-beta", "flow"};

void expect_seconds(SimTime t, double s, const char* what) {
  EXPECT_NEAR(static_cast<double>(t) * 1e-12, s, s * 1e-9) << what;
}

TEST(TopologySim, ClosedFormPerLevel) {
  // 8 nodes of 8 H100s; 2 nodes per leaf, 4 per pod, 4:1 between the 2 pods; one spine.
  const Machine m = machine_preset("fat-tree:8xh100-sxm-8,leaf=2,pod=4,oversubscription=4");
  constexpr std::int64_t kBytes = 1'000'000'000;
  for (const char* model : kModels) {
    // Within a node: 8 GPUs in a ring over the NVSwitch, 450 GB/s each, 3.4 µs.
    std::vector<Transfer> xs;
    for (int g = 0; g < 8; ++g) xs.push_back({g, (g + 1) % 8, kBytes});
    expect_seconds(last_finish(model, m, xs), 3.4e-6 + 1e9 / 450e9, model);
    // Across a leaf: node 0's 8 GPUs to node 1's, each over its own NIC: 50 GB/s, 14 µs.
    xs.clear();
    for (int g = 0; g < 8; ++g) xs.push_back({g, 8 + g, kBytes});
    expect_seconds(last_finish(model, m, xs), 14e-6 + 1e9 / 50e9, model);
    // Across leaves in a pod, all 16 GPUs of leaf 0 at once: full bisection, still 50 GB/s.
    xs.clear();
    for (int g = 0; g < 16; ++g) xs.push_back({g, 16 + g, kBytes});
    expect_seconds(last_finish(model, m, xs), 14e-6 + 1e9 / 50e9, model);
    // Across pods under load: pod 0's 32 GPUs to pod 1's share the pod's 1,600 GB/s / 4 =
    // 400 GB/s uplink: 12.5 GB/s = NIC / 4 each (flow shares, alpha-beta runs 8 at a time).
    xs.clear();
    for (int g = 0; g < 32; ++g) xs.push_back({g, 32 + g, kBytes});
    expect_seconds(last_finish(model, m, xs), 14e-6 + 32e9 / 400e9, model);
    // One pair alone across pods is not limited by the oversubscription.
    expect_seconds(last_finish(model, m, {{0, 63, kBytes}}), 14e-6 + 1e9 / 50e9, model);
  }
}

TEST(TopologySim, TorusRingContentionClosedForm) {
  // A 4×2 torus of nodes with 25 GB/s router links: node 0's 8 GPUs all send 1 GB to
  // node 2, two hops along x either way (the y detour is longer). ECMP sends k of them
  // over x+ and 8 − k over x-; each side's 25 GB/s links carry its transfers one after
  // another (alpha-beta) or shared (flow): the last ends at 14 µs + max(k, 8 − k) × 40 ms.
  const Machine m = machine_preset("torus:4x2xh100-sxm-8,link_bytes_per_s=25e9");
  std::vector<Transfer> xs;
  int plus = 0;
  for (int g = 0; g < 8; ++g) {
    xs.push_back({g, 2 * 8 + g, 1'000'000'000});
    const auto r = m.route(DeviceId(g), DeviceId(2 * 8 + g));
    ASSERT_EQ(r.size(), 6u);
    plus += m.link(r[2]).name == "r0.0.x+";
  }
  EXPECT_GT(plus, 0);  // both directions used
  EXPECT_LT(plus, 8);
  for (const char* model : kModels)
    expect_seconds(last_finish(model, m, xs), 14e-6 + std::max(plus, 8 - plus) * 0.04, model);
}

TEST(TopologySim, ChannelsOfOnePairSpreadOverEqualCostPaths) {
  // Two nodes on two leaves, two spines, 8:1 oversubscribed: each leaf–spine link carries
  // 400 / 2 / 8 = 25 GB/s, half a NIC. One GPU sends two 1 GB moves to a GPU of the other
  // node over two channels: ECMP per channel puts them on different spines, 25 GB/s each
  // (the 50 GB/s NICs carry both), so both end at 14 µs + 40 ms; on one spine they would
  // share its 25 GB/s and end at 80 ms.
  const Machine m = machine_preset("fat-tree:2xh100-sxm-8,leaf=1,spines=2,oversubscription=8");
  const auto spine_of = [&](int a, int b, std::uint32_t c) {
    const auto r = m.route(DeviceId(a), DeviceId(b), c);
    return r.size() >= 3 ? m.link(r[2]).name : std::string();
  };
  int src = -1, dst = -1;
  for (int a = 0; a < 8 && src < 0; ++a)
    for (int b = 8; b < 16 && src < 0; ++b)
      if (spine_of(a, b, 0) != spine_of(a, b, 1)) src = a, dst = b;
  ASSERT_GE(src, 0) << "no pair whose channels 0 and 1 hash to different spines";
  testing::TgBuilder b(16);
  const BufferId x = b.input(src, 1'000'000'000);
  const BufferId y = b.input(src, 1'000'000'000);
  b.move(x, dst);
  b.move(y, dst);
  for (const char* model : kModels) {
    SimOptions o;
    o.network = model;
    o.interference = false;
    o.comm_channels = 2;
    const SimResult r = simulate(b.graph(), m, o);
    EXPECT_NEAR(r.makespan_s, 14e-6 + 1e9 / 25e9, 1e-12) << model;
    // Each spine's links carry one move's bytes.
    for (std::size_t l = 0; l < m.links.size(); ++l)
      if (m.links[l].name.find("spine") != std::string::npos && r.link_bytes[l] != 0) {
        EXPECT_EQ(r.link_bytes[l], 1'000'000'000) << m.links[l].name << " " << model;
      }
  }
}

struct Cli {
  int status;
  std::string output;
};
Cli tessel_cli(const std::string& args) {
  auto r = tessel::testing::run_tessel(args);
  return {r.status, r.output()};
}

double makespan(const std::string& args) {
  Cli r = tessel_cli(args + " --json");
  EXPECT_EQ(r.status, 0) << args << "\n" << r.output;
  if (r.status != 0) return -1;
  return nlohmann::json::parse(r.output)["makespan_s"].get<double>();
}

TEST(TopologySim, OneLeafFatTreeSimulatesAsClusterBitForBit) {
  for (const char* network : {"flow", "alpha-beta"}) {
    const std::string net = std::string(" --network ") + network;
    EXPECT_EQ(makespan("simulate -w llama-block:model=7b -s eindecomp -d 32 -m cluster:4xh100-sxm-8" + net),
              makespan("simulate -w llama-block:model=7b -s eindecomp -d 32 -m fat-tree:4xh100-sxm-8,leaf=4" + net))
        << network;
    EXPECT_EQ(makespan("simulate --collective allreduce --bytes 256MB -d 32 -m cluster:4xh100-sxm-8" + net),
              makespan("simulate --collective allreduce --bytes 256MB -d 32 -m fat-tree:4xh100-sxm-8,leaf=4" + net))
        << network;
  }
}

TEST(TopologySim, BadGraphsExitOneWithoutTrace) {
  const std::string data = std::string(TESSEL_TEST_DATA_DIR) + "/sim/";
  const auto trace = std::filesystem::temp_directory_path() / "tessel_topology_bad_trace.json";
  const auto machine = std::filesystem::temp_directory_path() / "tessel_topology_bad_machine.json";
  const auto expect_bad = [&](const std::string& m, const std::string& needle) {
    std::filesystem::remove(trace);
    Cli r = tessel_cli("simulate -w chain -d 4 -m " + m + " --trace " + trace.string());
    EXPECT_EQ(r.status, 1) << m << "\n" << r.output;
    EXPECT_NE(r.output.find("tessel: error: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(trace));
  };
  auto j = read_json_file(data + "leaf_spine4.json");
  nlohmann::json links = nlohmann::json::array();
  for (int i = 0; i < 12; ++i) links.push_back(j["links"][i]);
  j["links"] = links;  // leaf 1 cut off
  std::ofstream(machine) << j.dump();
  expect_bad(machine.string(), "no route from device 2 ('g2') to device 0 ('g0')");
  j = read_json_file(data + "leaf_spine4.json");
  j["links"][5]["from"] = "leaf7";
  std::ofstream(machine) << j.dump();
  expect_bad(machine.string(), "links[5].from: unknown node 'leaf7'");
  j = read_json_file(data + "leaf_spine4.json");
  j["links"][11]["bytes_per_s"] = 0;
  std::ofstream(machine) << j.dump();
  expect_bad(machine.string(), "links[11].bytes_per_s: must be a finite number > 0");
  j = read_json_file(data + "leaf_spine4.json");
  j["links"][8]["to"] = "leaf0";
  std::ofstream(machine) << j.dump();
  expect_bad(machine.string(), "links[8].to: a link from 'leaf0' to itself is a loop");
  std::filesystem::remove(machine);
  expect_bad("fat-tree:2xh100-sxm-8,spines=0", "spines '0' must be a positive integer");
}

}  // namespace
}  // namespace tessel::sim
