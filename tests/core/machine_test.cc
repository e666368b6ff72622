#include "core/machine.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
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

TEST(Machine, H100Sxm8PresetCarriesTheDgxH100Figures) {
  Machine m = machine_preset("h100-sxm-8");
  ASSERT_EQ(m.num_devices(), 8);
  const DeviceType& t = m.type_of(DeviceId(0));
  EXPECT_DOUBLE_EQ(t.peak(DType::bf16), 989e12);
  EXPECT_DOUBLE_EQ(t.peak(DType::f32), 67e12);
  EXPECT_DOUBLE_EQ(t.memory_bytes_per_s, 3.35e12);
  EXPECT_EQ(t.memory_capacity_bytes, 80'000'000'000);
  EXPECT_EQ(t.sm_count, 132);
  // Intra-node: through the NVSwitch, 450 GB/s per direction, NCCL's NVLink hop latency.
  auto r = m.route(DeviceId(0), DeviceId(5));
  EXPECT_EQ(names(m, r), (std::vector<std::string>{"gpu0.nvlink.out", "gpu5.nvlink.in"}));
  EXPECT_DOUBLE_EQ(m.route_bytes_per_s(r), 450e9);
  EXPECT_DOUBLE_EQ(m.route_latency_s(r), 3.4e-6);
  EXPECT_TRUE(m.route(DeviceId(3), DeviceId(3)).empty());
  // Interference defaults: 18.9% average compute slowdown under communication.
  EXPECT_DOUBLE_EQ(m.interference.compute_slowdown(132), 1.189);
}

TEST(Machine, PresetsValidate) {
  for (const char* name : {"h100-sxm-8", "a100-sxm-8", "h100-pcie-4", "cpu", "cpu:3", "cluster:2xa100-sxm-8",
                           "cluster:3xh100-pcie-4,oversubscription=4"}) {
    Machine m = machine_preset(name);
    EXPECT_NO_THROW(m.validate()) << name;
    EXPECT_EQ(m.name, name);
  }
  EXPECT_EQ(machine_preset("cpu:3").num_devices(), 3);
  EXPECT_EQ(machine_preset("a100-sxm-8").type_of(DeviceId(0)).peak(DType::bf16), 312e12);
  EXPECT_EQ(machine_preset("h100-pcie-4").num_devices(), 4);
}

TEST(Machine, H100PcieGpusTalkOverThePcieTreeAndShareOneNic) {
  Machine m = machine_preset("cluster:2xh100-pcie-4");
  auto intra = m.route(DeviceId(0), DeviceId(1));
  EXPECT_EQ(names(m, intra), (std::vector<std::string>{"node0.gpu0.pcie.out", "node0.gpu1.pcie.in"}));
  EXPECT_DOUBLE_EQ(m.route_bytes_per_s(intra), 64e9);
  auto inter = m.route(DeviceId(2), DeviceId(5));
  EXPECT_EQ(names(m, inter), (std::vector<std::string>{"node0.gpu2.pcie.out", "node0.nic0.tx", "node1.nic0.rx",
                                                         "node1.gpu1.pcie.in"}));
  EXPECT_EQ(m.route(DeviceId(3), DeviceId(4))[1], m.route(DeviceId(0), DeviceId(4))[1]);  // one NIC per node
}

TEST(Machine, ClusterRoutesCrossNicsAndTheOversubscribedCore) {
  Machine full = machine_preset("cluster:128xh100-sxm-8");
  ASSERT_EQ(full.num_devices(), 1024);
  auto r = full.route(DeviceId(3), DeviceId(8 * 77 + 3));
  // Full bisection: the NICs are the only limit.
  EXPECT_EQ(names(full, r), (std::vector<std::string>{"node0.nic3.tx", "node77.nic3.rx"}));
  EXPECT_DOUBLE_EQ(full.route_bytes_per_s(r), 50e9);
  EXPECT_DOUBLE_EQ(full.route_latency_s(r), 14e-6);
  EXPECT_EQ(names(full, full.route(DeviceId(9), DeviceId(10))),
            (std::vector<std::string>{"node1.gpu1.nvlink.out", "node1.gpu2.nvlink.in"}));

  Machine over = machine_preset("cluster:4xh100-sxm-8,oversubscription=4");
  auto o = over.route(DeviceId(0), DeviceId(31));
  EXPECT_EQ(names(over, o), (std::vector<std::string>{"node0.nic0.tx", "node0.net.out", "node3.net.in", "node3.nic7.rx"}));
  EXPECT_DOUBLE_EQ(over.link(o[1]).bytes_per_s, 8 * 50e9 / 4);
}

TEST(Machine, JsonRoundTripsEveryPreset) {
  for (const char* name : {"h100-sxm-8", "a100-sxm-8", "h100-pcie-4", "cpu", "cluster:3xh100-sxm-8,oversubscription=2"}) {
    Machine m = machine_preset(name);
    m.device_types[0].efficiency = {{1e6, 0.25}, {1e12, 0.9}};
    m.interference.comm_priority = CommPriority::high;
    m.interference.comm_sms = 8;
    m.barrier_latency_s = 2.5e-6;
    m.device_types[0].copy_row_s = 4.5e-9;
    m.device_types[0].generic_row_s = 1.5e-8;
    m.links[0].bytes_per_s_by_size = {{65536, 4e10}, {1 << 26, 6e9}};
    Machine back = machine_from_json(json::parse(to_json(m).dump()), name);
    EXPECT_EQ(back, m) << name;
  }
}

json ring_json() {
  return json::parse(R"({
    "name": "ring3",
    "device_types": [{"name": "gpu", "peak_flops_per_s": {"f32": 1e12}, "memory_bytes_per_s": 1e11,
                      "memory_capacity_bytes": 1e10}],
    "links": [{"name": "l0", "bytes_per_s": 1e10, "latency_s": 1e-6},
              {"name": "l1", "bytes_per_s": 1e10},
              {"name": "l2", "bytes_per_s": 1e10}],
    "devices": [{"type": "gpu"}, {"type": "gpu"}, {"type": "gpu"}],
    "routes": [{"src": 0, "dst": 1, "links": ["l0"]}, {"src": 1, "dst": 2, "links": ["l1"]},
               {"src": 2, "dst": 0, "links": ["l2"]}]})");
}

TEST(Machine, HandWrittenJsonWithExplicitRoutes) {
  Machine m = machine_from_json(ring_json(), "ring3.json");
  EXPECT_EQ(m.num_devices(), 3);
  EXPECT_EQ(m.hosts.size(), 1u);
  EXPECT_EQ(names(m, m.route(DeviceId(2), DeviceId(0))), (std::vector<std::string>{"l2"}));
  EXPECT_DOUBLE_EQ(m.route_latency_s(m.route(DeviceId(0), DeviceId(1))), 1e-6);
  // Defaults: interference from the published measurements.
  EXPECT_DOUBLE_EQ(m.interference.normal.compute_slowdown, 1.189);
  EXPECT_EQ(m.barrier_latency_s, 0);  // barriers are free unless the JSON says otherwise
  std::string e = error_of([&] { (void)m.route(DeviceId(0), DeviceId(2)); });
  EXPECT_NE(e.find("no route from device 0 to device 2"), std::string::npos) << e;
}

TEST(Machine, BadJsonNamesTheField) {
  auto expect_error = [](json j, const std::string& needle) {
    std::string e = error_of([&] { (void)machine_from_json(j, "m.json"); });
    EXPECT_NE(e.find(needle), std::string::npos) << "got: " << e << "\nwant: " << needle;
  };
  json j = ring_json();
  j["links"][1].erase("bytes_per_s");
  expect_error(j, "m.json.links[1]: missing field \"bytes_per_s\"");
  j = ring_json();
  j["links"][2]["bytes_per_s"] = -5;
  expect_error(j, "m.json.links[2].bytes_per_s: must be a finite number > 0");
  j = ring_json();
  j["links"][0]["latency_s"] = -1;
  expect_error(j, "m.json.links[0].latency_s");
  j = ring_json();
  j["routes"][1]["dst"] = 9;
  expect_error(j, "m.json.routes[1].dst: device 9 does not exist (the machine has 3 devices)");
  j = ring_json();
  j["routes"][0]["links"] = {"l7"};
  expect_error(j, "m.json.routes[0].links[0]: unknown link 'l7'");
  j = ring_json();
  j["devices"][1]["type"] = "tpu";
  expect_error(j, "m.json.devices[1].type: unknown device type 'tpu'");
  j = ring_json();
  j["device_types"][0]["memory_bytes_per_s"] = 0;
  expect_error(j, "m.json.device_types[0].memory_bytes_per_s");
  j = ring_json();
  j["device_types"][0].erase("memory_capacity_bytes");
  expect_error(j, "m.json.device_types[0]: missing field \"memory_capacity_bytes\"");
  j = ring_json();
  j["device_types"][0]["peak_flops_per_s"] = {{"f17", 1e12}};
  expect_error(j, "f17");
  j = ring_json();
  j["devices"][0]["host"] = 2;
  expect_error(j, "m.json.devices[0].host: host 2 does not exist");
  j = ring_json();
  j["interference"] = {{"normal", {{"compute_slowdown", 0.5}}}};
  expect_error(j, "m.json.interference.normal.compute_slowdown: must be a finite number >= 1");
  j = ring_json();
  j["links"][1]["name"] = "l0";
  expect_error(j, "m.json.links[1].name: 'l0' is used by another link");
  j = ring_json();
  j["device_types"][0]["efficiency"] = {{1e9, 0.5}, {1e6, 0.9}};
  expect_error(j, "m.json.device_types[0].efficiency[1]");
  j = ring_json();
  j["barrier_latency_s"] = -1e-6;
  expect_error(j, "m.json.barrier_latency_s: must be a finite number >= 0");
  j = ring_json();
  j["device_types"][0]["copy_row_s"] = -1e-9;
  expect_error(j, "m.json.device_types[0].copy_row_s: must be a finite number >= 0");
  j = ring_json();
  j["device_types"][0]["generic_row_s"] = "fast";
  expect_error(j, "m.json.device_types[0].generic_row_s");
  j = ring_json();
  j["device_types"][0]["cache_capacity_bytes"] = 1 << 20;
  j["device_types"][0]["cache_bytes_per_s"] = 1e11;
  j["device_types"][0]["outer_cache_capacity_bytes"] = 1 << 20;
  j["device_types"][0]["outer_cache_bytes_per_s"] = 5e10;
  expect_error(j, "m.json.device_types[0].outer_cache_capacity_bytes: must exceed cache_capacity_bytes");
  // A link's rates by transfer size: objects of bytes > 0 rising and bytes_per_s > 0.
  j = ring_json();
  j["links"][0]["bytes_per_s_by_size"] = json::array({json::array({65536, 4e10})});
  expect_error(j, "m.json.links[0].bytes_per_s_by_size[0]: expected {\"bytes\": ..., \"bytes_per_s\": ...}");
  j = ring_json();
  j["links"][1]["bytes_per_s_by_size"] = {{{"bytes", 65536}, {"bytes_per_s", 4e10}}, {{"bytes", 1e6}}};
  expect_error(j, "m.json.links[1].bytes_per_s_by_size[1]: missing field \"bytes_per_s\"");
  j = ring_json();
  j["links"][1]["bytes_per_s_by_size"] = {{{"bytes", 65536}, {"bytes_per_s", -1}}};
  expect_error(j, "m.json.links[1].bytes_per_s_by_size[0].bytes_per_s: must be a finite number > 0, got -1");
  j = ring_json();
  j["links"][1]["bytes_per_s_by_size"] = {{{"bytes", 0}, {"bytes_per_s", 1e9}}};
  expect_error(j, "m.json.links[1].bytes_per_s_by_size[0].bytes: must be a finite number > 0, got 0");
  j = ring_json();
  j["links"][2]["bytes_per_s_by_size"] = {{{"bytes", 1e6}, {"bytes_per_s", 1e9}}, {{"bytes", 1e6}, {"bytes_per_s", 2e9}}};
  expect_error(j, "m.json.links[2].bytes_per_s_by_size[1].bytes: must be larger than the point before it (1e+06)");
  j = ring_json();
  j["links"][2]["bytes_per_s_by_size"] = "fast";
  expect_error(j, "m.json.links[2].bytes_per_s_by_size");
}

// host_copy_lane (a CPU worker's evicts and loads on a copy lane of their own): written,
// read back, false when left out, a boolean, and only on a single-lane device type.
TEST(Machine, HostCopyLaneRoundTripsAndNeedsASingleLaneType) {
  Machine m = machine_preset("cpu:2");
  m.device_types[0].single_lane = true;
  m.device_types[0].host_copy_lane = true;
  const json j = to_json(m);
  EXPECT_EQ(j["device_types"][0]["host_copy_lane"], true);
  const Machine back = machine_from_json(j, "m.json");
  EXPECT_TRUE(back.device_types[0].host_copy_lane);
  EXPECT_EQ(back, m);
  json absent = j;
  absent["device_types"][0].erase("host_copy_lane");
  EXPECT_FALSE(machine_from_json(absent, "m.json").device_types[0].host_copy_lane);
  json bad = j;
  bad["device_types"][0]["host_copy_lane"] = "yes";
  std::string e = error_of([&] { (void)machine_from_json(bad, "m.json"); });
  EXPECT_NE(e.find("m.json.device_types[0].host_copy_lane: expected true or false, got"), std::string::npos) << e;
  json gpu = j;
  gpu["device_types"][0]["single_lane"] = false;
  e = error_of([&] { (void)machine_from_json(gpu, "m.json"); });
  EXPECT_NE(e.find("m.json.device_types[0].host_copy_lane: needs single_lane"), std::string::npos) << e;
}

TEST(Machine, ALinksRateBySizeIsLogLinearBetweenPointsAndFlatBeyond) {
  Link l{"l", LinkKind::memory, 5e9, 0};
  EXPECT_DOUBLE_EQ(l.bytes_per_s_at(1e3), 5e9);  // no table: bytes_per_s at every size
  l.bytes_per_s_by_size = {{1e4, 4e10}, {1e6, 2e10}, {1e8, 6e9}};
  EXPECT_DOUBLE_EQ(l.bytes_per_s_at(1e3), 4e10);
  EXPECT_DOUBLE_EQ(l.bytes_per_s_at(1e4), 4e10);
  EXPECT_NEAR(l.bytes_per_s_at(1e5), 3e10, 1e-3);  // halfway in log(bytes) between 1e4 and 1e6
  EXPECT_DOUBLE_EQ(l.bytes_per_s_at(1e6), 2e10);
  EXPECT_NEAR(l.bytes_per_s_at(1e7), 1.3e10, 1e-3);
  EXPECT_DOUBLE_EQ(l.bytes_per_s_at(1e9), 6e9);
  // A route's rate for one transfer is its slowest link's at that size.
  Machine m = machine_preset("cpu:2");
  m.links[0].bytes_per_s_by_size = l.bytes_per_s_by_size;
  const double other = m.links[1].bytes_per_s;
  EXPECT_DOUBLE_EQ(m.route_bytes_per_s({LinkId(0), LinkId(1)}, 1e5), std::min(3e10, other));
  EXPECT_DOUBLE_EQ(m.route_bytes_per_s({LinkId(0)}, 1e9), 6e9);
  EXPECT_DOUBLE_EQ(m.route_bytes_per_s({LinkId(0)}), m.links[0].bytes_per_s);  // moves: the capacity
}

TEST(Machine, UnknownPresetListsThePresets) {
  std::string e = error_of([] { (void)machine_preset("h200-sxm-8"); });
  EXPECT_NE(e.find("unknown machine preset 'h200-sxm-8'"), std::string::npos) << e;
  EXPECT_NE(e.find("cluster:NODESxPRESET"), std::string::npos) << e;
  EXPECT_NE(error_of([] { (void)machine_preset("cluster:0xh100-sxm-8"); }).find("NODES"), std::string::npos);
  EXPECT_NE(error_of([] { (void)machine_preset("cluster:2xh200"); }).find("h200"), std::string::npos);
  EXPECT_NE(error_of([] { (void)machine_preset("cluster:2xcpu,oversubscription=0.5"); }).find("oversubscription"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)load_machine("no-such-machine.json"); }).find("no-such-machine.json"),
            std::string::npos);
}

TEST(Machine, LoadMachineReadsPresetsAndFiles) {
  auto path = std::filesystem::temp_directory_path() / "tessel_machine_test_ring3.json";
  {
    std::ofstream out(path);
    out << ring_json().dump();
  }
  EXPECT_EQ(load_machine(path.string()).name, "ring3");
  EXPECT_EQ(load_machine("a100-sxm-8").name, "a100-sxm-8");
  std::filesystem::remove(path);
}

TEST(Machine, EfficiencyIsLogLinearBetweenPointsAndFlatBeyond) {
  DeviceType t;
  EXPECT_DOUBLE_EQ(t.efficiency_at(123), 1.0);
  t.efficiency = {{1e6, 0.2}, {1e9, 0.8}};
  EXPECT_DOUBLE_EQ(t.efficiency_at(1e3), 0.2);
  EXPECT_DOUBLE_EQ(t.efficiency_at(1e12), 0.8);
  EXPECT_NEAR(t.efficiency_at(1e7), 0.4, 1e-12);
}

TEST(Machine, ReservedSmsSetAFloorUnderTheComputeSlowdown) {
  Interference f;
  f.normal = {1.1, 1.0, "test"};
  EXPECT_DOUBLE_EQ(f.compute_slowdown(100), 1.1);
  f.comm_sms = 20;
  EXPECT_DOUBLE_EQ(f.compute_slowdown(100), 1.25);
  EXPECT_DOUBLE_EQ(Interference::none().compute_slowdown(100), 1.0);
}

}  // namespace
}  // namespace tessel
