// Trace threads (one per overlapping track of a lane), device lists and the streamed
// Chrome-trace writer.
#include "core/timeline.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tessel {
namespace {

Span span(int task, int dev, Lane lane, double a, double b) { return Span{TaskId(task), DeviceId(dev), lane, a, b}; }

TEST(Timeline, OverlappingSpansOfALaneGetTracksAndTrack0KeepsTheLaneTid) {
  Timeline tl;
  tl.spans = {span(0, 0, Lane::comm, 0, 10), span(1, 0, Lane::comm, 2, 5), span(2, 0, Lane::comm, 5, 8),
              span(3, 0, Lane::comm, 3, 4), span(4, 0, Lane::compute, 0, 1), span(5, 1, Lane::comm, 1, 2),
              span(6, 0, Lane::copy, 0, 1), span(7, 0, Lane::comm, 10, 11)};
  const std::vector<int> tids = trace_tids(tl);
  // comm: [0,10) track 0; [2,5) track 1; [3,4) track 2; [5,8) track 1 again; [10,11) track 0.
  EXPECT_EQ(tids, (std::vector<int>{1, 4, 4, 7, 0, 1, 2, 1}));
  EXPECT_EQ(trace_thread_name(1), "comm");
  EXPECT_EQ(trace_thread_name(4), "comm 1");
  EXPECT_EQ(trace_thread_name(0), "compute");
  EXPECT_EQ(trace_thread_name(5), "copy 1");
}

TEST(Timeline, DeviceListsAndTheirErrors) {
  std::vector<bool> on = parse_device_list("0-2,5", 8, "--trace-devices");
  EXPECT_EQ(on, (std::vector<bool>{true, true, true, false, false, true, false, false}));
  auto message = [](std::string_view text) {
    try {
      (void)parse_device_list(text, 8, "--trace-devices");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("0-x").find("--trace-devices: bad piece '0-x'"), std::string::npos) << message("0-x");
  EXPECT_NE(message("1,,2").find("bad piece ''"), std::string::npos) << message("1,,2");
  EXPECT_NE(message("5-2").find("bad piece '5-2'"), std::string::npos) << message("5-2");
  EXPECT_NE(message("0-8").find("device 8"), std::string::npos) << message("0-8");
  EXPECT_NE(message("-1").find("bad piece '-1'"), std::string::npos) << message("-1");
  EXPECT_NE(message("").find("empty device list"), std::string::npos);
}

TEST(Timeline, ChromeTraceIsValidJsonWithThreadNamesAndTheDeviceFilter) {
  Timeline tl;
  tl.source = "sim \"quoted\"";
  tl.spans = {span(0, 0, Lane::comm, 0, 1e-5), span(1, 0, Lane::comm, 2e-6, 3e-6), span(2, 3, Lane::compute, 0, 1e-6)};
  std::ostringstream os;
  write_chrome_trace(os, tl);
  auto j = nlohmann::json::parse(os.str());
  EXPECT_EQ(j["otherData"]["source"], tl.source);
  std::map<std::pair<int, int>, std::string> names;
  int spans = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    ++spans;
    EXPECT_TRUE(names.count({e["pid"].get<int>(), e["tid"].get<int>()})) << e.dump();  // metadata comes first
  }
  EXPECT_EQ(spans, 3);
  EXPECT_EQ((names[{0, 4}]), "comm 1");
  EXPECT_DOUBLE_EQ(j["traceEvents"].back()["dur"].get<double>(), 1.0);

  std::vector<bool> only3 = {false, false, false, true};
  std::ostringstream filtered;
  write_chrome_trace(filtered, tl, nullptr, nullptr, &only3);
  j = nlohmann::json::parse(filtered.str());
  for (const auto& e : j["traceEvents"]) EXPECT_EQ(e["pid"], 3) << e.dump();
}

}  // namespace
}  // namespace tessel
