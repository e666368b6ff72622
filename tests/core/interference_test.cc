// The machine JSON's interference object (core/interference.h): round trip, defaults,
// and bad values named by field.
#include "core/interference.h"

#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tests/support/error_of.h"

namespace tessel {
namespace {

using nlohmann::json;

using testing::error_of;

json one_gpu(json interference) {
  json j = json::parse(R"({"name": "one", "device_types": [{"name": "gpu", "peak_flops_per_s": {"f32": 1e12},
    "memory_bytes_per_s": 1e11, "memory_capacity_bytes": 1e10, "sm_count": 100}], "devices": [{"type": "gpu"}]})");
  j["interference"] = std::move(interference);
  return j;
}

TEST(InterferenceJson, RoundTripsEveryField) {
  Machine m = machine_preset("h100-sxm-8");
  Interference& f = m.interference;
  f.comm_mechanism = CommMechanism::copy_engine;
  f.comm_priority = CommPriority::high;
  f.comm_sms = 16;
  f.measured = true;
  f.copy_engine_normal = {1.02, 1.1, "measured: test"};
  f.copy_engine_high = {1.03, 1.05, "measured: test"};
  f.reserved = {{CommPriority::high, 16, {1.2, 1.1, "measured: test"}}};
  f.fused = {32, 0.1};
  const Machine back = machine_from_json(json::parse(to_json(m).dump()), "m.json");
  EXPECT_EQ(back, m);
}

TEST(InterferenceJson, LegacyRowsAndDefaults) {
  // The form written before copy-engine rows existed still reads, each figure keeping its
  // published default where left out; a row given without a source is named as the JSON's.
  const Machine m = machine_from_json(one_gpu({{"comm_priority", "high"}, {"high", {{"comm_slowdown", 1.5}}}}), "m.json");
  EXPECT_EQ(m.interference.comm_priority, CommPriority::high);
  EXPECT_DOUBLE_EQ(m.interference.high.compute_slowdown, 1.40);
  EXPECT_DOUBLE_EQ(m.interference.high.comm_slowdown, 1.5);
  EXPECT_EQ(m.interference.high.source, "machine JSON");
  EXPECT_NE(m.interference.normal.source.find("2507.03114"), std::string::npos);
  EXPECT_EQ(m.interference.comm_mechanism, CommMechanism::sm_kernels);
  EXPECT_EQ(m.interference.fused, FusedModel{});
  EXPECT_DOUBLE_EQ(m.interference.fused.comm_occupancy, 0.125);
}

TEST(InterferenceJson, BadValuesNameTheField) {
  auto expect_error = [](json interference, const std::string& needle) {
    std::string e = error_of([&] { (void)machine_from_json(one_gpu(std::move(interference)), "m.json"); });
    EXPECT_NE(e.find(needle), std::string::npos) << "got: " << e << "\nwant: " << needle;
  };
  expect_error({{"copy_engine", {{"high", {{"comm_slowdown", 0.9}}}}}},
               "m.json.interference.copy_engine.high.comm_slowdown: must be a finite number >= 1");
  expect_error({{"copy_engine", {{"fast", {{"comm_slowdown", 1.1}}}}}}, "m.json.interference.copy_engine.fast: unknown row");
  expect_error({{"normal", {{"compute_slowdown", "x"}}}}, "m.json.interference.normal.compute_slowdown");
  expect_error({{"comm_mechanism", "dma"}}, "m.json.interference.comm_mechanism: expected \"sm_kernels\"");
  expect_error({{"comm_priority", "urgent"}}, "m.json.interference.comm_priority: expected \"normal\" or \"high\"");
  expect_error({{"comm_sms", 100}}, "m.json.interference.comm_sms: 100 SMs for communication leave none of the 100");
  expect_error({{"comm_sms", -1}}, "m.json.interference.comm_sms: must be 0 to 1000000");
  expect_error({{"reserved", {{{"comm_priority", "high"}, {"comm_sms", 0}, {"compute_slowdown", 1.1}, {"comm_slowdown", 1.1}}}}},
               "m.json.interference.reserved[0].comm_sms: must be 1 to 1000000");
  expect_error({{"reserved", {{{"comm_priority", "high"}, {"comm_sms", 8}, {"compute_slowdown", 1.1}}}}},
               "m.json.interference.reserved[0]: needs compute_slowdown and comm_slowdown");
  expect_error({{"reserved", {{{"comm_priority", "high"}, {"comm_sms", 8}, {"compute_slowdown", 1.1}, {"comm_slowdown", 1.0}},
                              {{"comm_priority", "high"}, {"comm_sms", 8}, {"compute_slowdown", 1.2}, {"comm_slowdown", 1.0}}}}},
               "m.json.interference.reserved[1]: the same comm_priority and comm_sms as reserved[0]");
  expect_error({{"fused", {{"comm_occupancy", 1.0}}}}, "m.json.interference.fused.comm_occupancy: must be a number in [0, 1)");
  expect_error({{"fused", {{"tiles", 0}}}}, "m.json.interference.fused.tiles: must be 1 to 4096");
  expect_error({{"measured", "yes"}}, "m.json.interference.measured: expected true or false");
  // A measured machine fills no gap with a published figure.
  expect_error({{"measured", true}, {"high", {{"compute_slowdown", 1.1}, {"comm_slowdown", 1.1}}}},
               "m.json.interference.normal: missing");
  expect_error({{"measured", true},
                {"normal", {{"compute_slowdown", 1.1}, {"comm_slowdown", 1.1}}},
                {"high", {{"compute_slowdown", 1.1}, {"comm_slowdown", 1.1}}},
                {"comm_mechanism", "copy_engine"}},
               "m.json.interference.copy_engine.normal: missing, and the run uses copy-engine communication");
}

TEST(InterferenceSettingsTest, CommSmsAboveTheDeviceIsAnErrorNamingTheOption) {
  Machine m = machine_preset("h100-sxm-8");
  InterferenceSettings s;
  s.set_sms = true;
  s.comm_sms = 200;
  std::string e = error_of([&] { s.apply(m); });
  EXPECT_NE(e.find("--comm-sms 200: device type"), std::string::npos) << e;
  EXPECT_NE(e.find("has 132 SMs"), std::string::npos) << e;
  s.comm_sms = 16;
  s.set_priority = true;
  s.comm_priority = CommPriority::high;
  s.apply(m);
  EXPECT_EQ(m.interference.comm_sms, 16);
  EXPECT_EQ(m.interference.comm_priority, CommPriority::high);
  Machine cpu = machine_preset("cpu:2");
  e = error_of([&] { s.apply(cpu); });
  EXPECT_NE(e.find("no SM count"), std::string::npos) << e;
}

}  // namespace
}  // namespace tessel
