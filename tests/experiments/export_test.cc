// tessel export: graph JSON and task-graph JSON read back by -g and simulate
// --task-graph, and Chakra traces read back with the protobuf library.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "experiments/chakra.h"
#include "experiments/cli.h"
#include "sim/compute_model.h"
#include "tests/support/cli.h"

namespace tessel::experiments {
namespace {

using nlohmann::json;
using testing::run_tessel;
using testing::temp_path;

TEST(ExportCli, GraphJsonReadsBackAsTheSameGraph) {
  auto file = temp_path("tessel_export_graph.json");
  auto r = run_tessel("export -w ffn:tokens=32,dim=16,hidden=64 --graph-out " + file.string());
  ASSERT_EQ(r.status, 0) << r.output();
  const Graph back = graph_from_json(read_json_file(file.string()));
  EXPECT_EQ(to_json(back), to_json(build_workload("ffn:tokens=32,dim=16,hidden=64")));
  // ... and the CLI takes it where it takes -w.
  auto a = run_tessel("lower -g " + file.string() + " -d 4 --json");
  auto b = run_tessel("lower -w ffn:tokens=32,dim=16,hidden=64 -d 4 --json");
  ASSERT_EQ(a.status, 0) << a.output();
  EXPECT_EQ(json::parse(a.out)["tasks"], json::parse(b.out)["tasks"]);
  std::filesystem::remove(file);
}

TEST(ExportCli, TaskGraphJsonSimulatesToTheSameMakespan) {
  auto file = temp_path("tessel_export_tg.json");
  // With nodes, Megatron's all-gathers and reduce-scatters are written as the rings the
  // simulator expands them to.
  for (const char* collectives : {"moves", "nodes"}) {
    const std::string w = std::string("-w llama-block -d 4 -s megatron --collectives ") + collectives;
    auto r = run_tessel("export " + w + " --task-graph " + file.string() + " --json");
    ASSERT_EQ(r.status, 0) << r.output();
    EXPECT_GT(json::parse(r.out)["tasks"].get<int>(), 0);
    for (const char* net : {"alpha-beta", "flow"}) {
      auto direct = run_tessel("simulate " + w + " -m h100-sxm-8 --network " + net + " --json");
      auto from_file = run_tessel("simulate --task-graph " + file.string() + " -m h100-sxm-8 --network " + net + " --json");
      ASSERT_EQ(direct.status, 0) << direct.output();
      ASSERT_EQ(from_file.status, 0) << from_file.output();
      const json a = json::parse(direct.out), b = json::parse(from_file.out);
      EXPECT_EQ(a["makespan_s"].get<double>(), b["makespan_s"].get<double>()) << net << " " << collectives;
      EXPECT_EQ(a["bytes_moved"], b["bytes_moved"]) << net << " " << collectives;
      EXPECT_EQ(a["tasks"], b["tasks"]) << net << " " << collectives;
    }
  }
  std::filesystem::remove(file);
}

TEST(ExportCli, NothingToWriteOrChakraWithoutAMachineIsAnError) {
  auto r = run_tessel("export -w chain");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("nothing to write"), std::string::npos) << r.err;
  auto dir = temp_path("tessel_export_nomachine");
  auto g = temp_path("tessel_export_nomachine.json");
  std::filesystem::remove_all(dir);
  r = run_tessel("export -w chain --graph-out " + g.string() + " --chakra " + dir.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("-m MACHINE"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_FALSE(std::filesystem::exists(g));  // nothing written when the export fails
  r = run_tessel("export -w chain --graph-out " + g.string() + " -s nope");
  EXPECT_NE(r.status, 0);
  EXPECT_FALSE(std::filesystem::exists(g));
}

TEST(ChakraExport, TracesReadBackWithProtobufMatchTheTaskGraph) {
  if (!chakra_available()) GTEST_SKIP() << "built without protobuf";
  const Graph g = build_workload("llama-block");
  const TaskGraph tg = lower(g, cli::decompose(g, "megatron", 4));
  const Machine m = machine_preset("h100-sxm-8");
  auto dir = temp_path("tessel_chakra");
  std::filesystem::remove_all(dir);
  const auto files = write_chakra(tg, g, m, dir.string());
  ASSERT_EQ(files.size(), 4u);

  std::int64_t comp = 0, moves = 0;
  for (const Task& t : tg.tasks) {
    comp += t.kind == TaskKind::compute || t.kind == TaskKind::touch;
    moves += t.kind == TaskKind::move;
  }
  ASSERT_GT(moves, 0);
  std::int64_t comp_seen = 0;
  std::map<std::int64_t, std::pair<int, int>> sends, recvs;  // tag -> (src, dst) as seen
  std::map<std::int64_t, std::int64_t> send_size;
  for (int d = 0; d < 4; ++d) {
    ChakraTrace tr = read_chakra(files[static_cast<std::size_t>(d)]);
    EXPECT_EQ(tr.version, "0.0.4");
    std::set<std::uint64_t> ids;
    for (const ChakraNode& n : tr.nodes) EXPECT_TRUE(ids.insert(n.id).second) << "duplicate id " << n.id;
    for (const ChakraNode& n : tr.nodes) {
      for (std::uint64_t dep : n.data_deps) EXPECT_TRUE(ids.count(dep)) << n.name << " depends on " << dep;
      const Task& t = tg.tasks[n.id];
      if (n.type == 4) {  // COMP_NODE
        ++comp_seen;
        EXPECT_EQ(t.device.value, d);
        const double s = sim::compute_seconds(t, tg, m.type_of(t.device));
        EXPECT_EQ(n.duration_micros, static_cast<std::uint64_t>(std::llround(s * 1e6))) << n.name;
        ASSERT_NE(n.attr("num_ops"), nullptr);
        EXPECT_EQ(n.attr("num_ops")->int_value, std::llround(t.flops));
        continue;
      }
      ASSERT_TRUE(n.type == 5 || n.type == 6) << n.type;
      ASSERT_EQ(t.kind, TaskKind::move);
      for (const char* a : {"comm_src", "comm_dst", "comm_tag", "comm_size"}) {
        ASSERT_NE(n.attr(a), nullptr) << a;
        EXPECT_EQ(n.attr(a)->kind, ChakraAttr::Kind::int64) << a;  // ASTRA-sim reads comm_size as int64
      }
      EXPECT_EQ(n.attr("comm_size")->int_value, t.bytes);
      EXPECT_EQ(n.attr("comm_src")->int_value, t.device.value);
      EXPECT_EQ(n.attr("comm_dst")->int_value, t.dst_device.value);
      const std::int64_t tag = n.attr("comm_tag")->int_value;
      if (n.type == 5) {
        EXPECT_EQ(t.device.value, d);
        sends[tag] = {t.device.value, t.dst_device.value};
        send_size[tag] = n.attr("comm_size")->int_value;
      } else {
        EXPECT_EQ(t.dst_device.value, d);
        recvs[tag] = {t.device.value, t.dst_device.value};
        EXPECT_TRUE(n.data_deps.empty());
      }
    }
  }
  EXPECT_EQ(comp_seen, comp);
  EXPECT_EQ(static_cast<std::int64_t>(sends.size()), moves);
  EXPECT_EQ(sends, recvs);  // every send has its receive, same tag, same ends
  std::filesystem::remove_all(dir);
}

TEST(ChakraExport, CollectiveNodesAreOneCollNodePerRankWithTypeAndSize) {
  if (!chakra_available()) GTEST_SKIP() << "built without protobuf";
  const Graph g = build_workload("llama-block");
  const TaskGraph tg = lower(g, cli::decompose(g, "eindecomp", 4), LowerOptions{true});
  ASSERT_TRUE(tg.has_collectives());
  const Machine m = machine_preset("h100-sxm-8");
  auto dir = temp_path("tessel_chakra_coll");
  std::filesystem::remove_all(dir);
  const auto files = write_chakra(tg, g, m, dir.string());
  std::map<std::uint64_t, int> ranks_seen;  // collective task id -> files holding its node
  std::map<std::int64_t, int> types_seen;   // comm_type -> nodes
  for (std::size_t d = 0; d < files.size(); ++d) {
    const ChakraTrace tr = read_chakra(files[d]);
    std::set<std::uint64_t> ids;
    for (const ChakraNode& n : tr.nodes) {
      for (std::uint64_t dep : n.data_deps) EXPECT_TRUE(ids.count(dep)) << "node " << n.id << " depends on " << dep;
      ids.insert(n.id);
      if (n.type != 7) continue;  // COMM_COLL_NODE
      const Task& t = tg.tasks[n.id];
      ASSERT_EQ(t.kind, TaskKind::collective);
      const CollectiveSpec& s = tg.collectives[static_cast<std::size_t>(t.block)];
      EXPECT_NE(std::find(s.devices.begin(), s.devices.end(), DeviceId(static_cast<int>(d))), s.devices.end());
      ASSERT_NE(n.attr("comm_type"), nullptr);
      EXPECT_EQ(n.attr("comm_type")->kind, ChakraAttr::Kind::int64);
      // Chakra's CollectiveCommType: ALL_GATHER = 2, REDUCE_SCATTER = 7.
      EXPECT_EQ(n.attr("comm_type")->int_value, s.collective == Collective::allgather ? 2 : 7);
      ++types_seen[n.attr("comm_type")->int_value];
      ASSERT_NE(n.attr("comm_size"), nullptr);
      EXPECT_EQ(n.attr("comm_size")->int_value, s.bytes);
      ++ranks_seen[n.id];
    }
  }
  std::size_t collectives = 0;
  for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
    if (tg.tasks[i].kind != TaskKind::collective) continue;
    ++collectives;
    EXPECT_EQ(ranks_seen[i], tg.collectives[static_cast<std::size_t>(tg.tasks[i].block)].ranks) << "task " << i;
  }
  EXPECT_GT(collectives, 0u);
  EXPECT_GT(types_seen[2], 0) << "eindecomp on 4 devices gathers two operands (all-gather nodes)";
  EXPECT_GT(types_seen[7], 0) << "and reduce-scatters aggregations";
  std::filesystem::remove_all(dir);
}

TEST(ChakraExport, ADependencyAcrossDevicesWithoutAMoveIsRefusedNamingTheTaskAndNode) {
  if (!chakra_available()) GTEST_SKIP() << "built without protobuf";
  const Graph g = build_workload("chain:size=64");
  TaskGraph tg = lower(g, cli::decompose(g, "split-largest", 2));
  // Make a compute task on device 1 wait for a compute task on device 0 directly.
  std::int32_t on0 = -1, on1 = -1;
  for (std::size_t i = 0; i < tg.tasks.size(); ++i)
    if (tg.tasks[i].kind == TaskKind::compute) (tg.tasks[i].device.value == 0 ? on0 : on1) = static_cast<std::int32_t>(i);
  ASSERT_GE(on0, 0);
  ASSERT_GE(on1, 0);
  tg.tasks[static_cast<std::size_t>(on1)].deps.push_back(TaskId{on0});
  auto dir = temp_path("tessel_chakra_bad");
  std::filesystem::remove_all(dir);
  try {
    (void)write_chakra(tg, g, machine_preset("h100-sxm-8"), dir.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("task " + std::to_string(on1)), std::string::npos) << m;
    EXPECT_NE(m.find("node '" + g.node(tg.tasks[static_cast<std::size_t>(on1)].node).name + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("without a move"), std::string::npos) << m;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "tessel.0.et"));
  EXPECT_FALSE(std::filesystem::exists(dir / "tessel.1.et"));
  std::filesystem::remove_all(dir);
}

TEST(ChakraExport, CliWritesOneFilePerDevice) {
  if (!chakra_available()) GTEST_SKIP() << "built without protobuf";
  auto dir = temp_path("tessel_chakra_cli");
  std::filesystem::remove_all(dir);
  auto r = run_tessel("export -w chain -d 8 -s eindecomp -m h100-sxm-8 --chakra " + dir.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.output();
  EXPECT_EQ(json::parse(r.out)["chakra_files"].size(), 8u);
  for (int d = 0; d < 8; ++d) EXPECT_TRUE(std::filesystem::exists(dir / ("tessel." + std::to_string(d) + ".et")));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessel::experiments
