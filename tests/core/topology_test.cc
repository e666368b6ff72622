// Topology graphs: routes per level against closed forms, ECMP determinism and spread,
// the presets against cluster:, memory at 8,192 devices, and bad input naming the field.
#include "core/topology.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"
#include "tests/support/error_of.h"

namespace tessel {
namespace {

using nlohmann::json;

using testing::error_of;

std::vector<std::string> names(const Machine& m, const std::vector<LinkId>& route) {
  std::vector<std::string> out;
  for (LinkId l : route) out.push_back(m.link(l).name);
  return out;
}

// A route over the graph is a connected path from src to dst through switches only.
void expect_path(const Machine& m, int src, int dst, const std::vector<LinkId>& r) {
  ASSERT_FALSE(r.empty());
  std::int32_t at = src;
  for (std::size_t k = 0; k < r.size(); ++k) {
    const Link& l = m.link(r[k]);
    ASSERT_EQ(l.from, at) << src << "->" << dst << " link " << l.name;
    at = l.to;
    if (k + 1 < r.size()) {
      ASSERT_GE(at, m.num_devices()) << "the route passes through device " << at;
    }
  }
  EXPECT_EQ(at, dst);
}

const std::string kData = std::string(TESSEL_TEST_DATA_DIR) + "/sim/";

TEST(Topology, HandWrittenLeafSpineRoutesByHops) {
  Machine m = load_machine(kData + "leaf_spine4.json");
  ASSERT_TRUE(m.has_topology());
  EXPECT_EQ(m.node_name(4), "leaf0");
  // Across a leaf: 2 links, the up link's latency.
  auto r = m.route(DeviceId(0), DeviceId(1));
  EXPECT_EQ(names(m, r), (std::vector<std::string>{"g0.up", "g1.down"}));
  EXPECT_DOUBLE_EQ(m.route_latency_s(r), 1e-6);
  EXPECT_DOUBLE_EQ(m.route_bytes_per_s(r), 1e10);
  // Across the spine: 4 links, through one of two spines (ECMP), 5 GB/s bottleneck.
  std::set<std::string> spines;
  for (std::uint32_t ch = 0; ch < 16; ++ch) {
    auto x = m.route(DeviceId(0), DeviceId(3), ch);
    expect_path(m, 0, 3, x);
    ASSERT_EQ(x.size(), 4u);
    EXPECT_DOUBLE_EQ(m.route_bytes_per_s(x), 5e9);
    spines.insert(m.link(x[1]).name);
  }
  EXPECT_EQ(spines, (std::set<std::string>{"leaf0-spine0.up", "leaf0-spine1.up"}));
  // JSON round trip keeps the graph (names of devices and switches, link ends).
  Machine back = machine_from_json(json::parse(to_json(m).dump()), "back");
  EXPECT_EQ(back, m);
  EXPECT_EQ(back.route(DeviceId(2), DeviceId(1), 5), m.route(DeviceId(2), DeviceId(1), 5));
}

TEST(Topology, FatTreeLevelsAndOversubscribedPods) {
  // 8 nodes of 8 H100s, 2 nodes per leaf, 4 nodes per pod (2 pods), 4:1 between pods.
  Machine m = machine_preset("fat-tree:8xh100-sxm-8,leaf=2,pod=4,oversubscription=4");
  EXPECT_NO_THROW(m.validate());
  ASSERT_EQ(m.num_devices(), 64);
  ASSERT_EQ(m.hosts.size(), 8u);
  // Within a node: NVSwitch, as on cluster: (450 GB/s, 3.4 µs).
  auto in_node = m.route(DeviceId(0), DeviceId(5));
  EXPECT_EQ(names(m, in_node), (std::vector<std::string>{"node0.gpu0.nvlink.out", "node0.gpu5.nvlink.in"}));
  EXPECT_DOUBLE_EQ(m.route_bytes_per_s(in_node), 450e9);
  EXPECT_DOUBLE_EQ(m.route_latency_s(in_node), 3.4e-6);
  // Across a leaf: the two NICs only.
  auto leaf = m.route(DeviceId(3), DeviceId(8 + 6));
  EXPECT_EQ(names(m, leaf), (std::vector<std::string>{"node0.nic3.tx", "node0.nic3.port.up", "node1.nic6.port.down",
                                                       "node1.nic6.rx"}));
  EXPECT_DOUBLE_EQ(m.route_latency_s(leaf), 14e-6);
  // Across leaves in a pod: up to the pod's spine and down, full bisection (2 × 400 GB/s).
  auto pod = m.route(DeviceId(0), DeviceId(2 * 8));
  EXPECT_EQ(names(m, pod), (std::vector<std::string>{"node0.nic0.tx", "node0.nic0.port.up", "leaf0-spine0.up",
                                                      "leaf1-spine0.down", "node2.nic0.port.down", "node2.nic0.rx"}));
  EXPECT_DOUBLE_EQ(m.link(pod[2]).bytes_per_s, 2 * 400e9);
  // Across pods: through the core, whose links carry the pod's 1,600 GB/s / 4.
  auto core = m.route(DeviceId(0), DeviceId(4 * 8 + 1));
  EXPECT_EQ(names(m, core),
            (std::vector<std::string>{"node0.nic0.tx", "node0.nic0.port.up", "leaf0-spine0.up",
                                      "pod0.spine0-core0.up", "pod1.spine0-core0.down", "leaf2-spine0.down",
                                      "node4.nic1.port.down", "node4.nic1.rx"}));
  EXPECT_DOUBLE_EQ(m.link(core[3]).bytes_per_s, 4 * 400e9 / 4);
  EXPECT_DOUBLE_EQ(m.route_bytes_per_s(core), 50e9);
  EXPECT_DOUBLE_EQ(m.route_latency_s(core), 14e-6);
  // The preset round-trips through machine JSON, routes included.
  Machine back = machine_from_json(json::parse(to_json(m).dump()), "back");
  EXPECT_EQ(back, m);
  EXPECT_EQ(back.route(DeviceId(0), DeviceId(4 * 8 + 1), 3), m.route(DeviceId(0), DeviceId(4 * 8 + 1), 3));
}

TEST(Topology, FatTreeWithAPartlyFilledLastLeafOrPod) {
  // 5 nodes on leaves of 4 (the default): two leaves, the second holding one node, both
  // under the one pod's spine. (It once indexed a second pod that does not exist: found
  // by the machine_json fuzzer.) And 9 nodes on leaves of 2 in pods of 4: 5 leaves, 3 pods.
  for (const char* name : {"fat-tree:5xh100-sxm-8", "fat-tree:9xh100-sxm-8,leaf=2,pod=4"}) {
    Machine m = machine_preset(name);
    EXPECT_NO_THROW(m.validate()) << name;
    const int n = m.num_devices();
    ASSERT_EQ(n % 8, 0);
    for (int a = 0; a < n; a += 7)
      for (int b = 0; b < n; b += 5)
        if (a != b) expect_path(m, a, b, m.route(DeviceId(a), DeviceId(b)));
  }
  Machine m = machine_preset("fat-tree:5xh100-sxm-8");
  auto across = m.route(DeviceId(0), DeviceId(4 * 8));
  EXPECT_EQ(names(m, across), (std::vector<std::string>{"node0.nic0.tx", "node0.nic0.port.up", "leaf0-spine0.up",
                                                         "leaf1-spine0.down", "node4.nic0.port.down", "node4.nic0.rx"}));
}

TEST(Topology, OneLeafFatTreeRoutesExactlyAsClusterDoes) {
  // Same links (names, bandwidths, latencies) on every route, beside the NIC cables:
  // cluster: stays the model of a full-bisection network, and a graph preset with one
  // leaf reproduces it.
  for (const auto& [graph, cluster] : {std::pair{"fat-tree:3xh100-sxm-8,leaf=3", "cluster:3xh100-sxm-8"},
                                       std::pair{"fat-tree:2xh100-pcie-4,leaf=2", "cluster:2xh100-pcie-4"},
                                       std::pair{"rail:1xa100-sxm-8", "cluster:1xa100-sxm-8"}}) {
    Machine g = machine_preset(graph);
    Machine c = machine_preset(cluster);
    ASSERT_EQ(g.num_devices(), c.num_devices()) << graph;
    for (int a = 0; a < g.num_devices(); ++a)
      for (int b = 0; b < g.num_devices(); ++b) {
        auto rg = g.route(DeviceId(a), DeviceId(b));
        auto rc = c.route(DeviceId(a), DeviceId(b));
        // The graph adds each NIC's cable to the switch (the NIC's bandwidth, no latency).
        EXPECT_EQ(g.route_bytes_per_s(rg), c.route_bytes_per_s(rc));
        std::erase_if(rg, [&](LinkId l) { return g.link(l).name.find(".port.") != std::string::npos; });
        ASSERT_EQ(names(g, rg), names(c, rc)) << graph << " " << a << "->" << b;
        for (std::size_t k = 0; k < rg.size(); ++k) EXPECT_EQ(g.link(rg[k]).bytes_per_s, c.link(rc[k]).bytes_per_s);
        EXPECT_EQ(g.route_latency_s(rg), c.route_latency_s(rc));
      }
  }
}

TEST(Topology, RailOptimisedSameRailCrossesOneSwitchCrossRailASpine) {
  Machine m = machine_preset("rail:4xh100-sxm-8");
  EXPECT_NO_THROW(m.validate());
  auto same = m.route(DeviceId(2), DeviceId(3 * 8 + 2));
  EXPECT_EQ(names(m, same), (std::vector<std::string>{"node0.nic2.tx", "node0.nic2.port.up", "node3.nic2.port.down",
                                                       "node3.nic2.rx"}));
  EXPECT_EQ(m.node_name(m.link(same[1]).to), "group0.rail2");
  auto cross = m.route(DeviceId(2), DeviceId(3 * 8 + 5));
  expect_path(m, 2, 3 * 8 + 5, cross);
  ASSERT_EQ(cross.size(), 6u);
  EXPECT_EQ(m.node_name(m.link(cross[2]).to).substr(0, 5), "spine");
  // A spine link of rail i carries the rail's 4 × 50 GB/s over its 8 spines.
  EXPECT_DOUBLE_EQ(m.link(cross[2]).bytes_per_s, 4 * 50e9 / 8);
}

TEST(Topology, TorusRoutesAreShortestWithWrapAround) {
  const int dims[3] = {4, 3, 2};
  Machine m = machine_preset("torus:4x3x2xh100-sxm-8");
  EXPECT_NO_THROW(m.validate());
  ASSERT_EQ(m.num_devices(), 24 * 8);
  const auto torus_hops = [&](int a, int b) {
    int h = 0;
    for (int k = 0; k < 3; ++k) {
      int d = std::abs(a % dims[k] - b % dims[k]);
      h += std::min(d, dims[k] - d);
      a /= dims[k];
      b /= dims[k];
    }
    return h;
  };
  for (int a = 0; a < 24; ++a)
    for (int b = 0; b < 24; ++b) {
      if (a == b) continue;
      const int src = a * 8 + 3, dst = b * 8 + 5;
      auto r = m.route(DeviceId(src), DeviceId(dst), static_cast<std::uint32_t>(a + b));
      expect_path(m, src, dst, r);
      // GPU to NIC to the router, one link per torus hop, router to NIC to GPU.
      EXPECT_EQ(static_cast<int>(r.size()), 4 + torus_hops(a, b)) << a << "->" << b;
    }
  // (0,0,0) -> (3,0,0) wraps around: one hop, on the x- link.
  auto wrap = m.route(DeviceId(0), DeviceId(3 * 8));
  EXPECT_EQ(names(m, wrap), (std::vector<std::string>{"node0.nic0.tx", "node0.nic0.port.up", "r0.0.0.x-",
                                                       "node3.nic0.port.down", "node3.nic0.rx"}));
  EXPECT_NE(error_of([] { (void)machine_preset("torus:4xh100-sxm-8"); }).find("2 or 3 dimensions"), std::string::npos);
}

TEST(Topology, EcmpIsDeterministicAndSpreadsOverEqualPaths) {
  // 2 pods of 8 nodes, 4 spines per pod and 4 cores: 16 spine–core uplinks per pod.
  const std::string name = "fat-tree:16xh100-sxm-8,leaf=2,pod=8,spines=4";
  Machine m = machine_preset(name);
  Machine again = machine_preset(name);
  std::map<std::string, int> uses;
  for (int a = 0; a < 64; ++a)
    for (int b = 64; b < 128; ++b) {
      auto r = m.route(DeviceId(a), DeviceId(b));
      ASSERT_EQ(r.size(), 8u);
      ASSERT_EQ(r, again.route(DeviceId(a), DeviceId(b))) << "routes differ between two builds";
      ASSERT_EQ(r, m.route(DeviceId(a), DeviceId(b))) << "routes differ between two calls";
      ++uses[m.link(r[3]).name];
    }
  ASSERT_EQ(uses.size(), 16u);  // every uplink of pod 0 is used
  for (const auto& [link, n] : uses) {
    EXPECT_GT(n, 4096 / 16 * 3 / 4) << link;  // within 25% of the even share
    EXPECT_LT(n, 4096 / 16 * 5 / 4) << link;
  }
  // The channel picks among equal paths too: 16 channels of one pair take several uplinks.
  std::set<std::int32_t> up;
  for (std::uint32_t ch = 0; ch < 16; ++ch) up.insert(m.route(DeviceId(0), DeviceId(100), ch)[3].value);
  EXPECT_GT(up.size(), 4u);
}

TEST(Topology, RoutesAt8192DevicesAreComputedLazilyInBoundedMemory) {
  for (const char* name : {"fat-tree:1024xh100-sxm-8,leaf=8,pod=128,spines=4,oversubscription=2",
                           "torus:16x8x8xh100-sxm-8", "rail:1024xh100-sxm-8,group=32"}) {
    Machine m = machine_preset(name);
    ASSERT_EQ(m.num_devices(), 8192) << name;
    EXPECT_NO_THROW(m.validate()) << name;
    std::size_t links = 0;
    std::uint64_t x = 1;
    for (int i = 0; i < 20000; ++i) {  // random pairs
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const auto a = static_cast<std::int32_t>((x >> 20) % 8192), b = static_cast<std::int32_t>((x >> 40) % 8192);
      links += m.route(DeviceId(a), DeviceId(b)).size();
    }
    EXPECT_GT(links, 0u);
    auto router = m.router.get(m);
    // One 16-bit distance per switch per switch that devices hang off, within the cap.
    EXPECT_LE(router->cache_bytes(), kRouterCacheBytes) << name;
    EXPECT_LE(router->cache_bytes(), m.switches.size() * m.switches.size() * 2) << name;
    std::printf("%s: %zu switches, %zu links, route cache %.1f MiB after %lld searches\n", name,
                m.switches.size(), m.links.size(), static_cast<double>(router->cache_bytes()) / (1 << 20),
                static_cast<long long>(router->searches()));
  }
}

json leaf_spine() { return read_json_file(kData + "leaf_spine4.json"); }

TEST(Topology, BadGraphsNameTheField) {
  const auto expect_error = [](const json& j, const std::string& needle) {
    std::string e = error_of([&] { (void)machine_from_json(j, "m.json"); });
    EXPECT_NE(e.find(needle), std::string::npos) << "got: " << e << "\nwant: " << needle;
  };
  json j = leaf_spine();
  j["links"][4]["to"] = "leaf9";
  expect_error(j, "m.json.links[4].to: unknown node 'leaf9' (not the name of a device or a switch)");
  j = leaf_spine();
  j["links"][8]["bytes_per_s"] = 0;
  expect_error(j, "m.json.links[8].bytes_per_s: must be a finite number > 0");
  j = leaf_spine();
  j["links"][9]["bytes_per_s"] = -5e9;
  expect_error(j, "m.json.links[9].bytes_per_s: must be a finite number > 0");
  j = leaf_spine();
  j["links"][3].erase("from");
  expect_error(j, "m.json.links[3].from: on a topology graph (a machine with switches, or links with from and to) "
                  "every link needs both ends");
  j = leaf_spine();
  j["links"][10]["to"] = "leaf0";
  expect_error(j, "m.json.links[10].to: a link from 'leaf0' to itself is a loop that no route can use");
  j = leaf_spine();
  j["devices"][3]["name"] = "g1";
  j["links"][6]["from"] = j["links"][7]["to"] = "g1";
  expect_error(j, "m.json.devices[3].name: 'g1' is also the name of m.json.devices[1]");
  j = leaf_spine();
  j["switches"].push_back({{"name", "g2"}});
  expect_error(j, "m.json.switches[4].name: 'g2' is also the name of m.json.devices[2]");
  // Leaf 1 has no uplink left: g0 and g1 cannot reach g2 (the first pair is named).
  j = leaf_spine();
  {
    json links = json::array();
    for (int i = 0; i < 12; ++i) links.push_back(j["links"][i]);  // without leaf1's uplinks
    j["links"] = links;
  }
  expect_error(j, "m.json: no route from device 2 ('g2') to device 0 ('g0')");
  // An explicit route covers the pair ... but an explicit route with a loop is refused.
  j["routes"] = {{{"src", 2}, {"dst", 0}, {"links", {"g2.up", "g2.down", "g2.up"}}}};
  expect_error(j, "m.json.routes[0].links[1]: the route comes back to 'g2': a routing loop");
  j["routes"] = {{{"src", 2}, {"dst", 0}, {"links", {"g2.up", "g0.down"}}}};
  expect_error(j, "m.json.routes[0].links[1]: link 'g0.down' starts at 'leaf0', not at 'leaf1'");
  // A switch with no links at all is no obstacle (the slow check finds every pair).
  j = leaf_spine();
  j["switches"].push_back({{"name", "spare"}});
  EXPECT_NO_THROW((void)machine_from_json(j, "m.json"));
}

TEST(Topology, BadPresetsNameTheOption) {
  const auto e = [](const char* p) { return error_of([p] { (void)machine_preset(p); }); };
  EXPECT_NE(e("fat-tree:8xh100-sxm-8,leaf=3,pod=4").find("pod=4 must be a multiple of leaf=3"), std::string::npos);
  EXPECT_NE(e("fat-tree:8xh100-sxm-8,racks=2").find("unknown option 'racks=2'"), std::string::npos);
  EXPECT_NE(e("fat-tree:8xh100-sxm-8,oversubscription=0.5").find("oversubscription '0.5' must be a number >= 1"),
            std::string::npos);
  EXPECT_NE(e("fat-tree:0xh100-sxm-8").find("count '0' must be a positive integer"), std::string::npos);
  EXPECT_NE(e("fat-tree:2xcpu").find("has no NIC"), std::string::npos);
  EXPECT_NE(e("rail:2xh200").find("unknown machine preset"), std::string::npos);
  EXPECT_NE(e("torus:2x2xh100-sxm-8,link_bytes_per_s=0").find("link_bytes_per_s '0' must be a number > 0"),
            std::string::npos);
  EXPECT_NE(e("fat-tree:2xcluster:2xh100-sxm-8").find("must be a single node"), std::string::npos);
  EXPECT_NE(e("fat-tree:9000xh100-sxm-8").find("exceed the maximum"), std::string::npos);
}

}  // namespace
}  // namespace tessel
