// --memory-cap on simulate and run, end to end: the JSON reports the cap, the offload and
// the slowdown; a cap below one task's needs and the bsp policy are refused with exit 1.
// --offload-order fixed on simulate, run and compare: the same plan in the ZeRO-Offload-style
// fixed order, never faster, still correct, and refused without a cap.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/cli.h"

namespace {

TEST(MemoryCapCli, SimulateReportsPeakOffloadAndSlowdown) {
  auto r = tessel::testing::run_tessel("simulate -w llama-block:model=tiny -d 2 -m cpu:2 --memory-cap 50% --json");
  ASSERT_EQ(r.status, 0) << r.output();
  const auto j = nlohmann::json::parse(r.out);
  const auto& mc = j["memory_cap"];
  for (const char* key : {"memory_cap_bytes", "uncapped_peak_bytes", "bytes_evicted", "bytes_loaded", "uncapped_makespan_s",
                          "uncapped_peak_memory_bytes", "slowdown"})
    EXPECT_TRUE(mc.contains(key)) << key;
  for (std::size_t d = 0; d < j["devices"].size(); ++d)
    EXPECT_LE(j["devices"][d]["peak_memory_bytes"].get<std::int64_t>(), mc["memory_cap_bytes"][d].get<std::int64_t>());
  EXPECT_GT(mc["bytes_loaded"].get<std::int64_t>(), 0);
  EXPECT_GE(mc["slowdown"].get<double>(), 1.0);  // the same work plus copies, under fewer bytes
}

// --prefetch fastest (simulate's default) plans with every rule and keeps the fastest.
// At 60% on the tiny block packed is strictly the fastest and one-range and dry-run tie
// behind it: the winner is neither the first rule tried nor the last, so keeping either
// end (or the first among equals) would fail here. The run kept is the single-rule run
// of the chosen rule: same makespan, tasks, loads, evicts, bytes and peaks.
TEST(MemoryCapCli, SimulateKeepsTheFastestPrefetchRule) {
  const std::string cmd = "simulate -w llama-block:model=tiny -d 2 -m cpu:2 --memory-cap 60% --json";
  auto r = tessel::testing::run_tessel(cmd);
  ASSERT_EQ(r.status, 0) << r.output();
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["memory_cap"]["prefetch_tried"].size(), 3u) << j["memory_cap"].dump();
  std::map<std::string, nlohmann::json> tried;  // rule -> its makespan
  for (const auto& t : j["memory_cap"]["prefetch_tried"]) tried[t["prefetch"].get<std::string>()] = t["makespan_s"];
  ASSERT_EQ(tried.size(), 3u);
  double least = 1e300;
  for (const auto& [rule, s] : tried) least = std::min(least, s.get<double>());
  const std::string chosen = j["memory_cap"]["prefetch"].get<std::string>();
  EXPECT_EQ(chosen, "packed") << j["memory_cap"].dump();
  // The case this test is for: the other two rules strictly slower than the kept one.
  for (const char* rule : {"one-range", "dry-run"}) EXPECT_GT(tried[rule].get<double>(), least) << rule;
  EXPECT_DOUBLE_EQ(j["makespan_s"].get<double>(), least);
  EXPECT_DOUBLE_EQ(tried[chosen].get<double>(), least);
  EXPECT_GE(j["memory_cap"]["memory_plan_wall_s"].get<double>(), 0.0);
  for (const char* rule : {"one-range", "packed", "dry-run"}) {
    auto one = tessel::testing::run_tessel(cmd + " --prefetch " + rule);
    ASSERT_EQ(one.status, 0) << one.output();
    const auto jo = nlohmann::json::parse(one.out);
    EXPECT_EQ(jo["memory_cap"]["prefetch"].get<std::string>(), rule);
    EXPECT_FALSE(jo["memory_cap"].contains("prefetch_tried"));
    EXPECT_DOUBLE_EQ(jo["makespan_s"].get<double>(), tried[rule].get<double>()) << rule;
    if (rule != chosen) continue;
    EXPECT_EQ(jo["tasks"], j["tasks"]);
    EXPECT_EQ(jo["peak_memory_bytes"], j["peak_memory_bytes"]);
    for (const char* key : {"loads", "evicts", "drops", "bytes_loaded", "bytes_evicted", "planned_peak_bytes"})
      EXPECT_EQ(jo["memory_cap"][key], j["memory_cap"][key]) << key;
  }
  auto bad = tessel::testing::run_tessel(cmd + " --prefetch soonest");
  EXPECT_EQ(bad.status, 2) << bad.output();
  // --prefetch without --memory-cap, any value (fastest too): an input error naming --memory-cap.
  for (const char* rule : {"packed", "fastest"}) {
    auto uncapped = tessel::testing::run_tessel(std::string("simulate -w llama-block:model=tiny -d 2 -m cpu:2 --prefetch ") + rule);
    EXPECT_EQ(uncapped.status, 1) << uncapped.output();
    EXPECT_NE(uncapped.output().find("--memory-cap"), std::string::npos) << uncapped.output();
  }
}

TEST(MemoryCapCli, RunComputesTheReferenceUnderTheCap) {
  auto r = tessel::testing::run_tessel("run -w llama-block:model=tiny -d 2 --memory-cap 0.5 --json");
  ASSERT_EQ(r.status, 0) << r.output();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["correct"].get<bool>());
  const auto& mc = j["memory_cap"];
  std::int64_t cap = 0;
  for (const auto& c : mc["memory_cap_bytes"]) cap = std::max(cap, c.get<std::int64_t>());
  EXPECT_LE(mc["measured_peak_memory_bytes"].get<std::int64_t>(), cap);
}

TEST(MemoryCapCli, ImpossibleCapsAndBspAreRefused) {
  auto tiny = tessel::testing::run_tessel("simulate -w chain:size=256 -d 1 -m cpu:1 --memory-cap 1000");
  EXPECT_EQ(tiny.status, 1) << tiny.output();
  EXPECT_NE(tiny.output().find("no schedule fits"), std::string::npos) << tiny.output();
  EXPECT_NE(tiny.output().find("task "), std::string::npos) << tiny.output();
  auto bsp = tessel::testing::run_tessel("simulate -w chain:size=256 -d 2 -m cpu:2 --policy bsp --memory-cap 50%");
  EXPECT_EQ(bsp.status, 1) << bsp.output();
  EXPECT_NE(bsp.output().find("--policy async"), std::string::npos) << bsp.output();
  auto bad = tessel::testing::run_tessel("run -w chain:size=64 --memory-cap 150%");
  EXPECT_EQ(bad.status, 2) << bad.output();  // a malformed value on the command line
  EXPECT_NE(bad.output().find("--memory-cap"), std::string::npos) << bad.output();
}

// Errors say what is wrong once: the graph node's name beside its number, the option's
// name once (CLI11 puts it before the message; it was doubled), and a value past 9e18
// bytes (or a double's range) is too large, not a malformed byte count.
TEST(MemoryCapCli, ErrorsNameTheNodeAndTheRuleBroken) {
  auto small = tessel::testing::run_tessel("simulate -w llama-block:model=tiny -d 1 -m cpu:1 --memory-cap 100");
  EXPECT_EQ(small.status, 1) << small.output();
  EXPECT_NE(small.err.find("(input of graph node 0 'x', block 0)"), std::string::npos) << small.err;
  struct Case {
    const char* value;
    const char* says;
  };
  for (const Case& c : {Case{"0", "'0': a fraction of the uncapped peak must be in (0, 1]"},
                        Case{"1e99", "'1e99': too large"}, Case{"1e999", "'1e999': too large"},
                        Case{"99999999999999999999999TiB", "'99999999999999999999999TiB': too large"},
                        Case{"1.5", "'1.5': without a unit a number up to 1 is a fraction"},
                        Case{"0.5B", "'0.5B': below 1 byte"}}) {
    for (const char* cmd : {"simulate -w chain:size=64 -d 2 -m cpu:2", "run -w chain:size=64 -d 2"}) {
      auto r = tessel::testing::run_tessel(std::string(cmd) + " --memory-cap " + c.value);
      EXPECT_EQ(r.status, 2) << c.value << ": " << r.output();  // a malformed value on the command line
      EXPECT_NE(r.err.find(std::string("tessel: error: --memory-cap: ") + c.says), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("--memory-cap: --memory-cap"), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("whole number of bytes >= 2"), std::string::npos) << r.err;
    }
  }
}

// The help says where fractions end and byte counts begin, what the fraction is of, and
// how each command chooses the prefetch rule.
TEST(MemoryCapCli, HelpSaysWhatTheCapIsOfAndHowEachCommandPlans) {
  for (const char* cmd : {"simulate", "run", "compare"}) {
    auto r = tessel::testing::run_tessel(std::string(cmd) + " --help");
    ASSERT_EQ(r.status, 0) << r.output();
    for (const char* says : {"1 is 100%", "a whole number above 1", "(1.5, 2.5) is neither", "tasks one at a time",
                             "order_peak_bytes", "not the peak simulate reports"})
      EXPECT_NE(r.out.find(says), std::string::npos) << cmd << ": " << says;
    const bool simulate = std::string(cmd) == "simulate";
    EXPECT_EQ(r.out.find("Planned once, with the one-range prefetch rule") != std::string::npos, !simulate) << cmd;
    EXPECT_EQ(r.out.find("the plan that simulates fastest kept") != std::string::npos, simulate) << cmd;
  }
}

// --collectives nodes: simulate expands each collective node into the ring it simulates
// before planning, so the plan covers every buffer the ring uses and the cap holds; run
// refuses (its executors run a node as one primitive or as its moves, neither planned).
TEST(MemoryCapCli, SimulatePlansTheRingsOfCollectiveNodesAndRunRefusesThem) {
  const std::string graph = "-w llama-block -d 4 -s megatron --collectives nodes --memory-cap 50%";
  auto sim = tessel::testing::run_tessel("simulate -m h100-sxm-8 --json " + graph);
  ASSERT_EQ(sim.status, 0) << sim.output();
  const auto j = nlohmann::json::parse(sim.out);
  const auto& mc = j["memory_cap"];
  EXPECT_GT(mc["loads"].get<std::int64_t>(), 0);
  for (std::size_t d = 0; d < 4; ++d)
    EXPECT_LE(j["devices"][d]["peak_memory_bytes"].get<std::int64_t>(), mc["memory_cap_bytes"][d].get<std::int64_t>())
        << d;
  // The rings, not moves: the same graph as moves has other tasks.
  auto moves = tessel::testing::run_tessel("simulate -m h100-sxm-8 --json -w llama-block -d 4 -s megatron "
                                           "--collectives moves --memory-cap 50%");
  ASSERT_EQ(moves.status, 0) << moves.output();
  EXPECT_NE(nlohmann::json::parse(moves.out)["tasks"], j["tasks"]);
  auto run = tessel::testing::run_tessel("run " + graph);
  EXPECT_EQ(run.status, 1) << run.output();
  EXPECT_NE(run.err.find("tessel: error: --memory-cap: not with --collectives nodes yet: the executors run a "
                         "collective node as one primitive or as its moves"),
            std::string::npos)
      << run.err;
}

// compare's default policies hold bsp, which cannot run a capped graph: with a cap and no
// --policy it compares async alone and says so once; --policy bsp with a cap stays an error.
TEST(MemoryCapCli, CompareWithACapAndNoPolicyComparesAsyncAlone) {
  const auto machine = std::filesystem::temp_directory_path() / ("tessel_memcap_cpu2_" + std::to_string(::getpid()) + ".json");
  ASSERT_EQ(tessel::testing::run_tessel("simulate -w chain:size=64 -d 2 -m cpu:2 --write-machine " + machine.string()).status, 0);
  const std::string cmd = "compare -w llama-block:model=tiny -d 2 -s eindecomp,data-parallel --memory-cap 50% --repeat 1 "
                          "--warmup 0 --compute-model analytic --json -m " + machine.string();
  auto r = tessel::testing::run_tessel(cmd);
  auto bsp = tessel::testing::run_tessel(cmd + " --policy bsp");
  auto both = tessel::testing::run_tessel(cmd + " --policy async,bsp");
  std::filesystem::remove(machine);
  ASSERT_EQ(r.status, 0) << r.output();
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 2u) << r.out;
  for (const auto& row : j["rows"]) EXPECT_EQ(row["policy"], "async") << row.dump();
  const std::string note = "tessel: note: --memory-cap: comparing the async policy only";
  const auto first = r.err.find(note);
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(note, first + 1), std::string::npos) << r.err;  // once, not per strategy
  for (const auto* refused : {&bsp, &both}) {
    EXPECT_EQ(refused->status, 1) << refused->output();
    EXPECT_NE(refused->err.find("--memory-cap needs --policy async"), std::string::npos) << refused->err;
    EXPECT_EQ(refused->err.find(note), std::string::npos) << refused->err;
  }
}

// A host whose RAM cannot hold what must be evicted: exit 1, naming the host and the bytes.
TEST(MemoryCapCli, HostWithoutRoomIsRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("tessel_memcap_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto machine = dir / "small_host.json";
  std::ofstream(machine) << R"({"name": "small-host",
    "device_types": [{"name": "gpu", "peak_flops_per_s": {"f32": 1e12}, "memory_bytes_per_s": 1e11,
                      "memory_capacity_bytes": 10000000000, "launch_latency_s": 1e-6, "sm_count": 100}],
    "links": [{"name": "a_to_b", "kind": "nvlink", "bytes_per_s": 1e10, "latency_s": 2e-6},
              {"name": "b_to_a", "kind": "nvlink", "bytes_per_s": 1e10, "latency_s": 2e-6}],
    "devices": [{"type": "gpu"}, {"type": "gpu"}],
    "routes": [{"src": 0, "dst": 1, "links": ["a_to_b"]}, {"src": 1, "dst": 0, "links": ["b_to_a"]}],
    "hosts": [{"name": "node0", "memory_capacity_bytes": 1000}]})";
  auto r = tessel::testing::run_tessel("simulate -w llama-block:model=tiny -d 2 -m " + machine.string() + " --memory-cap 50%");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.status, 1) << r.output();
  EXPECT_NE(r.err.find("tessel: error: memory cap: host 0 must hold "), std::string::npos) << r.output();
  EXPECT_NE(r.err.find("memory_capacity_bytes (1000)"), std::string::npos) << r.output();
}

// --prefetch fastest skips a rule whose plan fails: at 60% on the tiny block packed
// evicts one buffer and must keep 90,112 bytes on the host, one-range and dry-run 88,064.
// With 89,000 bytes of host RAM packed is skipped with a warning naming it and the others
// are compared; with too little for any rule the first rule's error is the command's.
TEST(MemoryCapCli, FastestSkipsARuleWhosePlanFails) {
  const auto dir = std::filesystem::temp_directory_path() / ("tessel_memcap_skip_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto written = dir / "cpu2.json";
  auto w = tessel::testing::run_tessel("simulate -w llama-block:model=tiny -d 2 -m cpu:2 --write-machine " + written.string());
  ASSERT_EQ(w.status, 0) << w.output();
  nlohmann::json m;
  std::ifstream(written) >> m;
  m["hosts"][0]["memory_capacity_bytes"] = 89000;
  const auto machine = dir / "cpu2_small_host.json";
  std::ofstream(machine) << m.dump();
  const std::string cmd = "simulate -w llama-block:model=tiny -d 2 -m " + machine.string() + " --json --memory-cap ";
  auto r = tessel::testing::run_tessel(cmd + "60%");
  auto all_fail = tessel::testing::run_tessel(cmd + "30%");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.status, 0) << r.output();
  EXPECT_NE(r.err.find("tessel: warning: --prefetch fastest: rule packed skipped"), std::string::npos) << r.output();
  const auto j = nlohmann::json::parse(r.out);
  const auto& mc = j["memory_cap"];
  ASSERT_EQ(mc["prefetch_skipped"].size(), 1u) << mc.dump();
  EXPECT_EQ(mc["prefetch_skipped"][0]["prefetch"], "packed") << mc.dump();
  EXPECT_FALSE(mc["prefetch_skipped"][0]["error"].get<std::string>().empty()) << mc.dump();
  EXPECT_EQ(mc["prefetch_tried"].size(), 2u) << mc.dump();
  EXPECT_NE(mc["prefetch"].get<std::string>(), "packed");
  EXPECT_LE(mc["host_bytes"][0].get<std::int64_t>(), 89000);
  EXPECT_EQ(all_fail.status, 1) << all_fail.output();
  EXPECT_NE(all_fail.err.find("tessel: error: memory cap: host 0 must hold "), std::string::npos) << all_fail.output();
  EXPECT_EQ(all_fail.err.find("warning"), std::string::npos) << all_fail.output();
}

// --memory-cap with --fuse-collectives: the fused kernels' per-task times are indexed by
// the task ids before the memory planner adds evicts and loads, so the pair is refused up
// front, naming both options, with no trace file left behind (it once failed after
// planning with "task_seconds has N entries for M tasks").
TEST(MemoryCapCli, SimulateRefusesMemoryCapWithFuseCollectives) {
  const auto trace = std::filesystem::temp_directory_path() / ("tessel_memcap_fuse_" + std::to_string(::getpid()) + ".json");
  auto r = tessel::testing::run_tessel("simulate -w gemm-alltoall -d 8 -m h100-sxm-8 --fuse-collectives --memory-cap 50% --trace " +
                                       trace.string());
  const bool left = std::filesystem::exists(trace);
  std::filesystem::remove(trace);
  EXPECT_EQ(r.status, 1) << r.output();
  EXPECT_NE(r.err.find("tessel: error: --memory-cap and --fuse-collectives cannot be combined"), std::string::npos)
      << r.output();
  EXPECT_FALSE(left);
}

// compare refuses a cap below one task's needs before it makes --trace-dir: no empty
// folder is left behind.
TEST(MemoryCapCli, CompareWithAnImpossibleCapLeavesNoTraceDir) {
  const auto dir = std::filesystem::temp_directory_path() / ("tessel_memcap_tracedir_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto r = tessel::testing::run_tessel("compare -w chain:size=256 -d 1 --repeat 1 --policy async --memory-cap 1000 --trace-dir " +
                                       dir.string());
  const bool left = std::filesystem::exists(dir);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.status, 1) << r.output();
  EXPECT_NE(r.err.find("tessel: error: "), std::string::npos) << r.output();
  EXPECT_FALSE(left) << dir;
}

// --offload-order fixed simulates core's fixed_order() of the same plan: the same tasks,
// evicts, loads and bytes, never faster than the free order (a load holds up the kernel
// behind it), and slower here, where loads overlap kernels in free order. The free
// order's makespan of that plan, reported beside it, is the free run's own. With
// --prefetch fastest (the default) both orders keep the rule whose free order is fastest.
TEST(MemoryCapCli, SimulateFixedOrderRunsTheSamePlanNoFaster) {
  const std::string base = "simulate -w llama-block:model=tiny -d 2 -m cpu:2 --memory-cap 50% --json";
  for (const std::string prefetch : {" --prefetch one-range", ""}) {
    auto free = tessel::testing::run_tessel(base + prefetch);
    auto fixed = tessel::testing::run_tessel(base + prefetch + " --offload-order fixed");
    ASSERT_EQ(free.status, 0) << free.output();
    ASSERT_EQ(fixed.status, 0) << fixed.output();
    const auto jf = nlohmann::json::parse(free.out), jx = nlohmann::json::parse(fixed.out);
    EXPECT_EQ(jf["memory_cap"]["offload_order"], "free");
    EXPECT_EQ(jx["memory_cap"]["offload_order"], "fixed");
    EXPECT_FALSE(jf["memory_cap"].contains("free_order_makespan_s"));
    EXPECT_EQ(jx["tasks"], jf["tasks"]);
    for (const char* key : {"prefetch", "loads", "evicts", "drops", "bytes_loaded", "bytes_evicted", "planned_peak_bytes",
                            "memory_cap_bytes", "uncapped_makespan_s"})
      EXPECT_EQ(jx["memory_cap"][key], jf["memory_cap"][key]) << key << prefetch;
    ASSERT_GT(jf["memory_cap"]["loads"].get<std::int64_t>(), 0) << "nothing to order: the test shows nothing";
    const double free_s = jf["makespan_s"].get<double>(), fixed_s = jx["makespan_s"].get<double>();
    EXPECT_GT(fixed_s, free_s) << prefetch;
    EXPECT_EQ(jx["memory_cap"]["free_order_makespan_s"].get<double>(), free_s) << prefetch;
    EXPECT_DOUBLE_EQ(jx["memory_cap"]["slowdown"].get<double>(),
                     fixed_s / jx["memory_cap"]["uncapped_makespan_s"].get<double>());
    for (std::size_t d = 0; d < jx["devices"].size(); ++d)
      EXPECT_LE(jx["devices"][d]["peak_memory_bytes"].get<std::int64_t>(),
                jx["memory_cap"]["memory_cap_bytes"][d].get<std::int64_t>());
  }
}

TEST(MemoryCapCli, RunInFixedOrderComputesTheReference) {
  auto r = tessel::testing::run_tessel("run -w llama-block:model=tiny -d 2 --memory-cap 50% --offload-order fixed --json");
  ASSERT_EQ(r.status, 0) << r.output();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["correct"].get<bool>()) << j["check"].dump();
  const auto& mc = j["memory_cap"];
  EXPECT_EQ(mc["offload_order"], "fixed");
  EXPECT_GT(mc["loads"].get<std::int64_t>(), 0);
  std::int64_t cap = 0;
  for (const auto& c : mc["memory_cap_bytes"]) cap = std::max(cap, c.get<std::int64_t>());
  EXPECT_LE(mc["measured_peak_memory_bytes"].get<std::int64_t>(), cap);
  auto human = tessel::testing::run_tessel("run -w llama-block:model=tiny -d 2 --memory-cap 50% --offload-order fixed");
  ASSERT_EQ(human.status, 0) << human.output();
  EXPECT_NE(human.out.find("offload order fixed"), std::string::npos) << human.out;
}

// compare --offload-order fixed runs and simulates the fixed graph: on a given machine with
// the analytic compute model its simulated makespan is simulate's with fixed (and not with
// free), and every run computes the reference.
TEST(MemoryCapCli, CompareSimulatesAndRunsTheFixedOrderGraph) {
  const std::string workload = "-w llama-block:model=tiny -d 2 -s eindecomp -m cpu:2 --memory-cap 50% --json";
  auto fixed = tessel::testing::run_tessel("compare " + workload +
                                           " --policy async --repeat 1 --warmup 0 --compute-model analytic --offload-order fixed");
  auto sim_fixed = tessel::testing::run_tessel("simulate " + workload + " --prefetch one-range --offload-order fixed");
  auto sim_free = tessel::testing::run_tessel("simulate " + workload + " --prefetch one-range");
  ASSERT_EQ(fixed.status, 0) << fixed.output();
  ASSERT_EQ(sim_fixed.status, 0) << sim_fixed.output();
  ASSERT_EQ(sim_free.status, 0) << sim_free.output();
  const auto j = nlohmann::json::parse(fixed.out);
  const auto sx = nlohmann::json::parse(sim_fixed.out), sf = nlohmann::json::parse(sim_free.out);
  EXPECT_TRUE(j["correct"].get<bool>());
  ASSERT_EQ(j["rows"].size(), 1u);
  ASSERT_EQ(j["memory_cap"].size(), 1u);
  EXPECT_EQ(j["memory_cap"][0]["offload_order"], "fixed");
  EXPECT_EQ(j["memory_cap"][0]["loads"], sx["memory_cap"]["loads"]);
  EXPECT_EQ(j["rows"][0]["tasks"], sx["tasks"]);
  ASSERT_NE(sx["makespan_s"].get<double>(), sf["makespan_s"].get<double>()) << "the orders tie: the test shows nothing";
  EXPECT_DOUBLE_EQ(j["rows"][0]["simulated_s"].get<double>(), sx["makespan_s"].get<double>());
}

// Without a cap there are no evicts or loads to order: every command refuses fixed with
// an input error naming both options, before writing anything.
TEST(MemoryCapCli, FixedOffloadOrderWithoutACapIsRefused) {
  const auto trace = tessel::testing::temp_path("tessel_offload_order_trace");
  const auto dir = tessel::testing::temp_path("tessel_offload_order_dir");
  std::filesystem::remove_all(dir);
  for (const std::string cmd :
       {"simulate -w chain:size=64 -d 2 -m cpu:2 --offload-order fixed --trace " + trace.string(),
        "run -w chain:size=64 -d 2 --offload-order fixed --trace " + trace.string(),
        "compare -w chain:size=64 -d 2 --repeat 1 --policy async --offload-order fixed --trace-dir " + dir.string()}) {
    auto r = tessel::testing::run_tessel(cmd);
    const bool left = std::filesystem::exists(trace) || std::filesystem::exists(dir);
    std::filesystem::remove(trace);
    std::filesystem::remove_all(dir);
    EXPECT_EQ(r.status, 1) << cmd << "\n" << r.output();
    EXPECT_NE(r.err.find("tessel: error: --offload-order fixed needs --memory-cap"), std::string::npos) << r.output();
    EXPECT_FALSE(left) << cmd;
  }
  auto bad = tessel::testing::run_tessel("simulate -w chain:size=64 -d 2 -m cpu:2 --memory-cap 50% --offload-order soonest");
  EXPECT_EQ(bad.status, 2) << bad.output();
  EXPECT_NE(bad.output().find("--offload-order"), std::string::npos) << bad.output();
}

// --copy-lane on run: thread runs the capped graph right with its evicts and loads on copy
// lanes and says so in the JSON (worker by default); without --memory-cap it warns; with a
// backend other than cpu it is refused before anything runs; an unknown value is a usage
// error.
TEST(MemoryCapCli, RunTakesTheCopyLane) {
  auto thread = tessel::testing::run_tessel("run -w llama-block:model=tiny -d 2 --memory-cap 50% --copy-lane thread --json");
  ASSERT_EQ(thread.status, 0) << thread.output();
  const auto j = nlohmann::json::parse(thread.out);
  EXPECT_TRUE(j["correct"].get<bool>());
  EXPECT_EQ(j["copy_lane"], "thread");
  auto worker = tessel::testing::run_tessel("run -w llama-block:model=tiny -d 2 --memory-cap 50% --json");
  ASSERT_EQ(worker.status, 0) << worker.output();
  EXPECT_EQ(nlohmann::json::parse(worker.out)["copy_lane"], "worker");
  auto uncapped = tessel::testing::run_tessel("run -w chain:size=64 -d 1 --copy-lane thread --json");
  ASSERT_EQ(uncapped.status, 0) << uncapped.output();
  EXPECT_NE(uncapped.err.find("tessel: warning: --copy-lane thread without --memory-cap"), std::string::npos)
      << uncapped.output();
  for (const char* backend : {"cuda", "block", "mpi"}) {
    auto refused = tessel::testing::run_tessel(std::string("run -w chain:size=64 -d 1 --memory-cap 50% --copy-lane thread --backend ") + backend);
    EXPECT_EQ(refused.status, 1) << refused.output();
    EXPECT_NE(refused.err.find("tessel: error: --copy-lane thread: "), std::string::npos) << refused.output();
    EXPECT_NE(refused.err.find("--copy-lane applies to --backend cpu"), std::string::npos) << refused.output();
  }
  auto bad = tessel::testing::run_tessel("run -w chain:size=64 --copy-lane stream");
  EXPECT_EQ(bad.status, 2) << bad.output();
  EXPECT_NE(bad.output().find("--copy-lane"), std::string::npos) << bad.output();
}

// compare simulates the copy lane it runs: on a machine of single-lane workers, the
// thread lane's simulation overlaps loads with compute (host_copy_lane), so its simulated
// time is below the worker lane's for the same plan; the JSON echoes the choice.
TEST(MemoryCapCli, CompareSimulatesTheCopyLaneItRuns) {
  const auto dir = std::filesystem::temp_directory_path() / ("tessel_copy_lane_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto written = dir / "cpu2.json";
  auto w = tessel::testing::run_tessel("simulate -w chain:size=64 -d 2 -m cpu:2 --write-machine " + written.string());
  ASSERT_EQ(w.status, 0) << w.output();
  nlohmann::json m;
  std::ifstream(written) >> m;
  m["device_types"][0]["single_lane"] = true;
  const auto machine = dir / "cpu2_single_lane.json";
  std::ofstream(machine) << m.dump();
  const std::string cmd = "compare -w llama-block:model=tiny -d 2 -s data-parallel --policy async --repeat 1 --warmup 0 "
                          "--compute-model analytic --memory-cap 50% --json -m " + machine.string() + " --copy-lane ";
  auto worker = tessel::testing::run_tessel(cmd + "worker");
  auto thread = tessel::testing::run_tessel(cmd + "thread");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(worker.status, 0) << worker.output();
  ASSERT_EQ(thread.status, 0) << thread.output();
  const auto jw = nlohmann::json::parse(worker.out), jt = nlohmann::json::parse(thread.out);
  EXPECT_EQ(jw["copy_lane"], "worker");
  EXPECT_EQ(jt["copy_lane"], "thread");
  EXPECT_TRUE(jt["correct"].get<bool>());
  EXPECT_GT(jt["memory_cap"][0]["loads"].get<std::int64_t>(), 0) << jt["memory_cap"].dump();
  EXPECT_LT(jt["rows"][0]["simulated_s"].get<double>(), jw["rows"][0]["simulated_s"].get<double>());
}

}  // namespace
