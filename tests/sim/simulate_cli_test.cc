// `tessel simulate` end to end: JSON fields, collectives, and bad input (message naming
// the field, non-zero exit, no trace file left behind).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli.h"

namespace {

struct Result {
  int status = -1;
  std::string output;  // stdout, then stderr
};

Result tessel(const std::string& args) {
  auto r = tessel::testing::run_tessel(args);
  return {r.status, r.output()};
}

const std::string kData = std::string(TESSEL_TEST_DATA_DIR) + "/sim/";

std::filesystem::path temp(const std::string& name) { return std::filesystem::temp_directory_path() / name; }

TEST(SimulateCli, JsonHasTheIssueFieldsAndTheTraceIsWritten) {
  auto trace = temp("tessel_sim_cli_trace.json");
  std::filesystem::remove(trace);
  Result r = tessel("simulate -w chain:size=512 -d 4 -m h100-sxm-8 --network flow --json --trace " + trace.string());
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  for (const char* key : {"makespan_s", "events", "sim_wall_s", "bytes_moved", "peak_memory_bytes", "devices"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["devices"].size(), 4u);
  EXPECT_GT(j["makespan_s"].get<double>(), 0);
  auto t = nlohmann::json::parse(std::ifstream(trace));
  EXPECT_FALSE(t["traceEvents"].empty());
  std::filesystem::remove(trace);
}

TEST(SimulateCli, CollectiveReportsAlgbwAndBusbw) {
  Result r = tessel("simulate --collective allreduce --bytes 64MiB -d 8 -m h100-sxm-8 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  const double algbw = j["algbw_bytes_per_s"].get<double>(), busbw = j["busbw_bytes_per_s"].get<double>();
  EXPECT_DOUBLE_EQ(algbw, 64.0 * 1024 * 1024 / j["makespan_s"].get<double>());
  EXPECT_DOUBLE_EQ(busbw, algbw * 2 * 7 / 8);
  EXPECT_LE(busbw, 450e9);  // one NVLink direction per rank
  EXPECT_EQ(j["algorithm"], "ring");
  EXPECT_FALSE(j["tuner_estimates"].empty());
  EXPECT_EQ(j["published_busbw"]["low_bytes_per_s"], 460e9);
  EXPECT_NE(j["published_busbw"]["source"].get<std::string>().find("nccl-tests"), std::string::npos);
}

TEST(SimulateCli, ARingCollectiveRunsOneNodeForAllUnlessToldNot) {
  const std::string cmd = "simulate --collective allreduce --bytes 64MiB -d 32 -m cluster:4xh100-sxm-8 --algorithm ring --json";
  Result r = tessel(cmd);
  ASSERT_EQ(r.status, 0) << r.output;
  auto red = nlohmann::json::parse(r.output);
  EXPECT_EQ(red["symmetry"], "reduced");
  EXPECT_EQ(red["symmetry_period"], 8);
  EXPECT_EQ(red["symmetry_note"], "");
  EXPECT_EQ(red["devices"].size(), 32u);
  r = tessel(cmd + " --no-symmetry");
  ASSERT_EQ(r.status, 0) << r.output;
  auto full = nlohmann::json::parse(r.output);
  EXPECT_EQ(full["symmetry"], "full");
  EXPECT_EQ(full["symmetry_note"], "turned off (--no-symmetry)");
  EXPECT_EQ(full["symmetry_period"], 0);
  EXPECT_EQ(full["events_unreduced"], full["events"]);
  EXPECT_EQ(red["makespan_s"], full["makespan_s"]);
  EXPECT_EQ(red["bytes_moved"], full["bytes_moved"]);
  EXPECT_EQ(red["links"], full["links"]);
  EXPECT_EQ(red["events_unreduced"], full["events"]);
  EXPECT_EQ(red["events"].get<std::int64_t>() * 4, full["events"].get<std::int64_t>());
  // The expanded form is never reduced, and says so.
  r = tessel(cmd + " --expand-collectives");
  ASSERT_EQ(r.status, 0) << r.output;
  auto expd = nlohmann::json::parse(r.output);
  EXPECT_EQ(expd["symmetry"], "full");
  EXPECT_EQ(expd["symmetry_note"], "expanded form (--expand-collectives)");
  // The text report: one node of eight ranks for all 32.
  r = tessel("simulate --collective allreduce --bytes 64MiB -d 32 -m cluster:4xh100-sxm-8 --algorithm ring");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ranks 0-7 simulated for all 32 (shifting the ranks by 8 maps the run onto itself"),
            std::string::npos)
      << r.output;
}

TEST(SimulateCli, NoSymmetryNeedsACollective) {
  // Refused as --expand-collectives without --collective is (a tessel::Error, exit code 1).
  const Result r = tessel("simulate -w chain -d 4 -m h100-sxm-8 --no-symmetry");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("tessel: error: --no-symmetry applies to --collective or a --task-graph file with a "
                          "collective node only"),
            std::string::npos)
      << r.output;
}

TEST(SimulateCli, FlowIsTheDefaultNetworkAndHierarchicalCanBeForced) {
  Result r = tessel("simulate -w chain:size=512 -d 4 -m h100-sxm-8 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["network"], "flow");
  r = tessel("simulate --collective allreduce --bytes 64MiB -d 16 -m cluster:2xh100-sxm-8 --algorithm hierarchical");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("hierarchical (forced)"), std::string::npos) << r.output;
  // Generated as it runs, as ring and all-to-all are; --expand-collectives gives the same finish.
  r = tessel("simulate --collective allreduce --bytes 64MiB -d 16 -m cluster:2xh100-sxm-8 --algorithm hierarchical --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json gen = nlohmann::json::parse(r.output);
  EXPECT_EQ(gen["collective_form"], "generated");
  r = tessel("simulate --collective allreduce --bytes 64MiB -d 16 -m cluster:2xh100-sxm-8 --algorithm hierarchical "
             "--expand-collectives --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json exp = nlohmann::json::parse(r.output);
  EXPECT_EQ(exp["collective_form"], "expanded");
  EXPECT_EQ(gen["makespan_s"].get<double>(), exp["makespan_s"].get<double>());
  EXPECT_EQ(gen["pieces_in_flight"], 8);  // 64 MiB over 2 nodes: 8 pieces hold the rail hop's product
}

TEST(SimulateCli, PiecesInFlightOverridesThePlannersWhereTheAlgorithmWindowsPieces) {
  // 64 MiB over 2 nodes in 16 pieces: a window of 2 makes the NICs wait, so the run is slower.
  const std::string cmd = "simulate --collective allreduce --bytes 64MiB -d 16 -m cluster:2xh100-sxm-8 --json";
  Result r = tessel(cmd);
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json planned = nlohmann::json::parse(r.output);
  r = tessel(cmd + " --pieces-in-flight 2");
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json two = nlohmann::json::parse(r.output);
  EXPECT_EQ(two["pieces_in_flight"], 2);
  EXPECT_EQ(two["slices"], planned["slices"]);
  EXPECT_GT(two["makespan_s"].get<double>(), planned["makespan_s"].get<double>());
  // A ring's own window, on one node; an all-gather's pieces are not windowed.
  r = tessel("simulate --collective allreduce --bytes 64MiB -d 8 -m h100-sxm-8 --pieces-in-flight 3 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["pieces_in_flight"], 3);
  r = tessel("simulate --collective allgather --bytes 64MiB -d 8 -m h100-sxm-8 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(nlohmann::json::parse(r.output).contains("pieces_in_flight"));
}

TEST(SimulateCli, TaskGraphAndMachineFiles) {
  Result r = tessel("simulate --task-graph " + kData + "shared_link.json -m " + kData + "switch3.json --network flow --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.output)["makespan_s"].get<double>(), 0.03);
}

void expect_bad(const std::string& args, const std::string& needle) {
  auto trace = temp("tessel_sim_cli_bad_trace.json");
  std::filesystem::remove(trace);
  Result r = tessel(args + " --trace " + trace.string());
  EXPECT_NE(r.status, 0) << args;
  EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
  EXPECT_FALSE(std::filesystem::exists(trace)) << args;
  EXPECT_FALSE(std::filesystem::exists(trace.string() + ".tmp-tessel")) << args;
}

TEST(SimulateCli, BadInputNamesTheFieldExitsNonZeroAndLeavesNoTrace) {
  expect_bad("simulate -w chain -d 4 -m h200-sxm-8", "unknown machine preset 'h200-sxm-8'");
  expect_bad("simulate -w chain -d 16 -m h100-sxm-8", "16 devices");
  expect_bad("simulate -w chain -d 4 -m h100-sxm-8 --network packet", "unknown network model 'packet'");
  expect_bad("simulate -w chain -d 4 -m h100-sxm-8 --policy gang", "unknown policy 'gang'");
  expect_bad("simulate --collective broadcast --bytes 1MB -d 4 -m h100-sxm-8", "unknown collective 'broadcast'");
  expect_bad("simulate --collective allreduce --bytes 1XB -d 4 -m h100-sxm-8", "unknown unit 'XB'");
  expect_bad("simulate --collective allreduce --bytes 1MB -d 8 -m h100-sxm-8 --algorithm hierarchical",
             "--algorithm: 'hierarchical' does not fit allreduce on 8 ranks of machine 'h100-sxm-8'");
  expect_bad("simulate --collective alltoall --bytes 1MB -d 8 -m h100-sxm-8 --algorithm tree",
             "--algorithm: 'tree' does not fit alltoall");
  expect_bad("simulate --collective allreduce --bytes 1MB -d 8 -m h100-sxm-8 --algorithm nvls",
             "--algorithm: unknown algorithm 'nvls'");
  expect_bad("simulate -w chain -d 4 -m h100-sxm-8 --algorithm ring", "--algorithm applies to --collective only");
  expect_bad("simulate -w chain -d 4 -m h100-sxm-8 --pieces-in-flight 8", "--pieces-in-flight applies to --collective only");
  expect_bad("simulate --collective allgather --bytes 1MB -d 8 -m h100-sxm-8 --pieces-in-flight 8",
             "this is allgather (ring), whose pieces are not windowed");
  expect_bad("simulate --collective alltoall --bytes 1MB -d 8 -m h100-sxm-8 --pieces-in-flight 8",
             "--pieces-in-flight applies to a ring reduce-scatter or all-reduce and to the hierarchical all-reduce");
  expect_bad("simulate --collective allreduce --bytes 1MB -d 16 -m cluster:2xh100-sxm-8 --pieces-in-flight 0",
             "--pieces-in-flight: Value 0 not in range 1 to 65536");

  auto machine = temp("tessel_sim_cli_bad_machine.json");
  auto j = nlohmann::json::parse(std::ifstream(kData + "switch3.json"));
  j["links"][3]["bytes_per_s"] = -1;
  std::ofstream(machine) << j.dump();
  expect_bad("simulate -w chain -d 3 -m " + machine.string(), "links[3].bytes_per_s");
  j = nlohmann::json::parse(std::ifstream(kData + "switch3.json"));
  j["links"][2]["bytes_per_s"] = 0;
  std::ofstream(machine) << j.dump();
  expect_bad("simulate -w chain -d 3 -m " + machine.string(), "links[2].bytes_per_s: must be a finite number > 0");
  j = nlohmann::json::parse(std::ifstream(kData + "switch3.json"));
  for (auto& d : j["devices"]) d["fabric_in"] = nlohmann::json::array();
  std::ofstream(machine) << j.dump();
  expect_bad("simulate -w chain -d 3 -m " + machine.string(), "no route from device 1 to device 0");
  j = nlohmann::json::parse(std::ifstream(kData + "switch3.json"));
  j["links"][0].erase("bytes_per_s");
  std::ofstream(machine) << j.dump();
  expect_bad("simulate -w chain -d 3 -m " + machine.string(), "links[0]: missing field \"bytes_per_s\"");
  j = nlohmann::json::parse(std::ifstream(kData + "switch3.json"));
  j["routes"] = {{{"src", 0}, {"dst", 7}, {"links", {"up0"}}}};
  std::ofstream(machine) << j.dump();
  expect_bad("simulate -w chain -d 3 -m " + machine.string(), "routes[0].dst: device 7 does not exist");
  std::filesystem::remove(machine);

  auto tg = temp("tessel_sim_cli_cycle.json");
  auto t = nlohmann::json::parse(std::ifstream(kData + "shared_link.json"));
  t["tasks"][2]["deps"] = {4};
  std::ofstream(tg) << t.dump();
  expect_bad("simulate --task-graph " + tg.string() + " -m " + kData + "switch3.json", "dependency cycle");
  std::filesystem::remove(tg);

  auto dec = temp("tessel_sim_cli_dec.json");
  std::ofstream(dec) << R"({"devices": 16, "nodes": []})";
  expect_bad("simulate -w chain --decomposition " + dec.string() + " -m h100-sxm-8", "16 devices");
  std::filesystem::remove(dec);
}

// One trace thread per overlapping track: moves on several comm channels (and a move's
// route latency after it frees its channel) never overlap on one (pid, tid).
TEST(SimulateCli, OverCapacityWarningSuggestsTheMemoryCapOnce) {
  // 200000² f32 matrices (160 GB each) on one 80 GB H100: over capacity.
  auto r = tessel::testing::run_tessel("simulate -w chain:size=200000 -d 1 -m h100-sxm-8");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("tessel: warning: device 0 exceeds its memory capacity"), std::string::npos) << r.err;
  const auto hint = r.err.find("--memory-cap BYTES|FRACTION");
  EXPECT_NE(hint, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--memory-cap", hint + 1), std::string::npos) << r.err;  // once, not per device
  // Eight devices over capacity: still one hint.
  r = tessel::testing::run_tessel("simulate -w chain:size=400000 -d 8 -m h100-sxm-8");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto first = r.err.find("--memory-cap");
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--memory-cap", first + 1), std::string::npos) << r.err;
}

TEST(SimulateCli, TraceSpansOfOneThreadNeverOverlap) {
  auto trace = temp("tessel_sim_cli_tracks.json");
  std::filesystem::remove(trace);
  Result r = tessel("simulate -w llama-block -d 8 -s eindecomp -m h100-sxm-8 --comm-channels 4 --trace " + trace.string());
  ASSERT_EQ(r.status, 0) << r.output;
  auto t = nlohmann::json::parse(std::ifstream(trace));
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> threads;
  std::set<std::pair<int, int>> named;
  for (const auto& e : t["traceEvents"]) {
    const std::pair<int, int> key{e["pid"].get<int>(), e.value("tid", -1)};
    if (e["ph"] == "M" && e["name"] == "thread_name") named.insert(key);
    if (e["ph"] != "X") continue;
    EXPECT_TRUE(named.count(key)) << "no thread_name before " << e.dump();
    const std::string kind = e["name"].get<std::string>().substr(0, e["name"].get<std::string>().find(' '));
    EXPECT_EQ(key.second % 3, kind == "move" ? 1 : kind == "touch" ? 2 : 0) << e.dump();
    threads[key].emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
  }
  int comm_tracks = 0;
  for (auto& [key, spans] : threads) {
    if (key.second % 3 == 1) ++comm_tracks;
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i)
      EXPECT_LE(spans[i - 1].second, spans[i].first + 1e-6)  // 1e-6 us: rounding of ts + dur
          << "device " << key.first << " tid " << key.second << ": [" << spans[i - 1].first << ", "
          << spans[i - 1].second << ") overlaps [" << spans[i].first << ", " << spans[i].second << ")";
  }
  EXPECT_GT(comm_tracks, 8) << "4 channels should give some device more than one comm thread";
  std::filesystem::remove(trace);
}

TEST(SimulateCli, TraceDevicesKeepsOnlyThoseDevices) {
  auto trace = temp("tessel_sim_cli_trace_devices.json");
  std::filesystem::remove(trace);
  Result r = tessel("simulate -w chain:size=512 -d 8 -m h100-sxm-8 --trace " + trace.string() + " --trace-devices 1-2,6");
  ASSERT_EQ(r.status, 0) << r.output;
  auto t = nlohmann::json::parse(std::ifstream(trace));
  std::set<int> pids;
  int spans = 0;
  for (const auto& e : t["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    spans += e["ph"] == "X";
  }
  EXPECT_EQ(pids, (std::set<int>{1, 2, 6}));
  EXPECT_GT(spans, 0);
  std::filesystem::remove(trace);

  expect_bad("simulate -w chain -d 8 -m h100-sxm-8 --trace-devices 0-x", "--trace-devices: bad piece '0-x' in '0-x'");
  expect_bad("simulate -w chain -d 8 -m h100-sxm-8 --trace-devices 0-3,,5", "--trace-devices: bad piece ''");
  expect_bad("simulate -w chain -d 8 -m h100-sxm-8 --trace-devices 6-2", "--trace-devices: bad piece '6-2'");
  expect_bad("simulate -w chain -d 8 -m h100-sxm-8 --trace-devices 0-7,64", "--trace-devices: device 64 in '0-7,64'");
  Result no_trace = tessel("simulate -w chain -d 8 -m h100-sxm-8 --trace-devices 0");
  EXPECT_NE(no_trace.status, 0);
  EXPECT_NE(no_trace.output.find("--trace-devices needs --trace"), std::string::npos) << no_trace.output;
}

}  // namespace
