// The baselines by their published definitions, weights resident at rest (replicas),
// workload annotations and the locality placement's bound.
#include "planner/baselines.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "planner/placement.h"
#include "planner/residency.h"
#include "runtime/cpu_executor.h"
#include "runtime/executor.h"
#include "sim/simulator.h"
#include "tests/support/error_of.h"

namespace tessel::planner {
namespace {

using testing::error_of;

Plan plan_of(const Graph& g, const std::string& strategy, int devices, Weights weights = Weights::resident,
             const std::string& placement = "round-robin") {
  PlanOptions o;
  o.devices = devices;
  o.weights = weights;
  o.placement = placement;
  return plan(g, strategy, o);
}

Parts parts_of(const Graph& g, const Plan& p, const char* node) { return p.decomposition.plan(g.at(node)).partition.parts(); }

TEST(Megatron, SplitsTheLlamaBlockByHeadsAndTheProjectionsByColumnThenRow) {
  const Graph g = build_workload("llama-block:model=7b");
  const Plan p = plan_of(g, "megatron", 8);
  // Join indices: q (b, s, h, k | d), scores (b, h, s, t | k), attn_out (b, s, d | h, k),
  // gate (b, s, f | d), down (b, s, d | f).
  EXPECT_EQ(parts_of(g, p, "q"), (Parts{1, 1, 8, 1, 1}));
  for (const char* n : {"masked", "softmax_sub", "softmax_exp", "softmax_sum", "softmax"})
    EXPECT_EQ(parts_of(g, p, n), (Parts{1, 8, 1, 1})) << n;  // (b, h, s, t), or (b, h, s | t)
  EXPECT_EQ(parts_of(g, p, "scores"), (Parts{1, 8, 1, 1, 1}));
  EXPECT_EQ(parts_of(g, p, "softmax_max"), (Parts{1, 8, 1, 1}));
  EXPECT_EQ(parts_of(g, p, "attn_out"), (Parts{1, 1, 1, 8, 1}));  // row-parallel over the heads
  EXPECT_EQ(parts_of(g, p, "gate"), (Parts{1, 1, 8, 1}));         // column-parallel W1
  EXPECT_EQ(parts_of(g, p, "down"), (Parts{1, 1, 1, 8}));         // row-parallel W2
  EXPECT_EQ(parts_of(g, p, "residual1"), (Parts{1, 8, 1}));       // sequence parallel in between
  // The sums of partials land in the sequence split (reduce-scatter).
  ASSERT_TRUE(p.decomposition.plan(g.at("attn_out")).output.has_value());
  EXPECT_EQ(p.decomposition.plan(g.at("attn_out")).output->parts(), (std::vector<int>{1, 8, 1}));
  EXPECT_TRUE(p.idle_devices.empty());
}

TEST(Megatron, TheSoftmaxHasNoCrossDeviceMoveAndPeakMemoryIsBalanced) {
  const Graph g = build_workload("llama-block:model=7b");
  const Plan p = plan_of(g, "megatron", 8);
  const TaskGraph tg = lower(g, p.decomposition);
  const std::set<std::string> softmax = {"masked", "softmax_max", "softmax_sub", "softmax_exp", "softmax_sum", "softmax"};
  std::int64_t moves = 0;
  for (const Task& t : tg.tasks) {
    if (t.kind != TaskKind::move) continue;
    ++moves;
    EXPECT_EQ(softmax.count(g.node(t.node).name), 0u) << "a move of " << g.node(t.node).name;
  }
  EXPECT_GT(moves, 0);  // the all-gathers and reduce-scatters around the regions
  const sim::SimResult r = sim::simulate(tg, machine_preset("h100-sxm-8"));
  std::int64_t lo = r.devices.front().peak_memory_bytes, hi = lo;
  for (const auto& d : r.devices) {
    lo = std::min(lo, d.peak_memory_bytes);
    hi = std::max(hi, d.peak_memory_bytes);
  }
  EXPECT_GT(lo, 0);
  EXPECT_LE(static_cast<double>(hi), 1.10 * static_cast<double>(lo)) << "peak " << hi << " vs " << lo;
}

TEST(DataParallel, WithResidentWeightsMovesNoBytesAtAll) {
  const Graph g = build_workload("llama-block:model=7b,batch=8");
  const TaskGraph resident = lower(g, plan_of(g, "data-parallel", 8).decomposition);
  EXPECT_EQ(resident.summary().bytes_moved, 0);
  EXPECT_EQ(resident.summary().count[static_cast<int>(TaskKind::move)], 0);
  // Every device holds every weight: 8 copies of each.
  const Plan p = plan_of(g, "data-parallel", 8);
  const auto held = resident_weight_bytes(g, p.decomposition);
  std::int64_t weights = 0;
  for (NodeId id : g.inputs())
    if (g.node(id).role == InputRole::weight) weights += elements(g.node(id).shape) * 4;
  for (std::int64_t b : held) EXPECT_EQ(b, weights);
  // Fetched (the first step), the same plan ships the weights from one device.
  const TaskGraph fetched = lower(g, plan_of(g, "data-parallel", 8, Weights::fetched).decomposition);
  EXPECT_GT(fetched.summary().bytes_moved, 7 * weights);
}

TEST(Residency, ReplicatedWeightsExecuteToTheReferenceOnTheCpuBackend) {
  for (const char* w : {"llama-block:model=tiny,seq=8", "ffn:tokens=16,dim=8,hidden=16"}) {
    const Graph g = build_workload(w);
    const runtime::TensorMap inputs = runtime::random_inputs(g, 3);
    const runtime::TensorMap want = runtime::evaluate_reference(g, inputs);
    for (const char* s : {"data-parallel", "megatron", "eindecomp", "split-largest"})
      for (int n : {1, 2, 4}) {
        const Plan p = plan_of(g, s, n);
        const TaskGraph tg = lower(g, p.decomposition);
        if (n > 1 && std::string(s) == "data-parallel") {  // the weights really are replicated
          std::int64_t copies = 0;
          for (const Task& t : tg.tasks) copies += t.kind == TaskKind::input && g.node(t.node).name == "w2";
          EXPECT_EQ(copies, n) << w;
        }
        runtime::CpuExecutor exec;
        const runtime::RunResult r = exec.run(g, tg, inputs);
        for (const auto& [name, t] : want)
          EXPECT_LE(compare(r.outputs.at(name), t).normwise_rel, 1e-5) << w << " " << s << " n=" << n;
      }
  }
}

TEST(Residency, ReplicasRoundTripThroughDecompositionJsonAndAreValidated) {
  const Graph g = build_workload("ffn:tokens=16,dim=8,hidden=16");
  const Plan p = plan_of(g, "data-parallel", 4);
  ASSERT_FALSE(p.decomposition.plan(g.at("w1")).replicas.empty());
  EXPECT_EQ(decomposition_from_json(to_json(p.decomposition, g), g), p.decomposition);
  Decomposition bad = p.decomposition;
  bad.nodes[g.at("w1").index()].replicas[0] = {bad.nodes[g.at("w1").index()].devices[0]};
  EXPECT_NE(error_of([&] { bad.validate(g); }).find("replica devices must ascend and differ"), std::string::npos);
  bad = p.decomposition;
  bad.nodes[g.at("gate").index()].replicas = {{DeviceId(1)}};
  EXPECT_NE(error_of([&] { bad.validate(g); }).find("only inputs and fills may be replicated"), std::string::npos);
}

TEST(Residency, WeightsBeyondADevicesMemoryAreAnErrorNamingDeviceAndBytes) {
  const Graph g = build_workload("llama-block:model=7b,batch=8");
  PlanOptions o;
  o.devices = 8;
  o.machine = machine_preset("h100-sxm-8");
  o.machine->device_types[0].memory_capacity_bytes = std::int64_t{1} << 29;  // 512 MiB
  const std::string e = error_of([&] { (void)plan(g, "data-parallel", o); });
  EXPECT_NE(e.find("device 0 of machine"), std::string::npos) << e;
  EXPECT_NE(e.find("(809533440 bytes)"), std::string::npos) << e;  // the 7B block's weights, f32
  EXPECT_NE(e.find("(536870912 bytes)"), std::string::npos) << e;
  // Sharded (megatron) they fit: an eighth each.
  EXPECT_NO_THROW((void)plan(g, "megatron", o));
  o.weights = Weights::fetched;
  EXPECT_NO_THROW((void)plan(g, "data-parallel", o));
}

TEST(Annotations, WorkloadsMarkTheirWeightsAndIndices) {
  const Graph g = build_workload("llama-block:model=7b");
  EXPECT_EQ(g.node(g.at("x")).role, InputRole::data);
  EXPECT_EQ(g.node(g.at("x")).index_roles, (IndexRoles{.batch = 0, .sequence = 1}));
  EXPECT_EQ(g.node(g.at("wq")).role, InputRole::weight);
  EXPECT_EQ(g.node(g.at("wq")).index_roles.heads, 1);
  EXPECT_EQ(g.node(g.at("wo")).index_roles.heads, 0);
  const auto w = weight_inputs(g);
  EXPECT_FALSE(w[g.at("x").index()]);
  EXPECT_TRUE(w[g.at("w2").index()]);
  // They survive the graph JSON.
  EXPECT_EQ(graph_from_json(to_json(g)), g);
  // The matrix chains hold data only; an unannotated graph: everything but the first input.
  const Graph chain = build_workload("chain:size=8");
  for (NodeId id : chain.inputs()) EXPECT_FALSE(weight_inputs(chain)[id.index()]);
  GraphBuilder b;
  NodeId x = b.input("x", {4, 4});
  NodeId y = b.input("y", {4, 4});
  b.output(b.matmul(x, y), "out");
  const auto plain = weight_inputs(b.build());
  EXPECT_FALSE(plain[x.index()]);
  EXPECT_TRUE(plain[y.index()]);
}

TEST(Annotations, AnIndexTheNodeLacksIsAnErrorNamingIt) {
  GraphBuilder b;
  NodeId w = b.input("wq", {8, 2, 4});
  EXPECT_NE(error_of([&] { b.annotate(w, InputRole::weight, {.heads = 3}); })
                .find("node 'wq' (shape [8,2,4]): the heads annotation names index 3, but the node has indices 0..2"),
            std::string::npos)
      << error_of([&] { b.annotate(w, InputRole::weight, {.heads = 3}); });
  NodeId y = b.map("exp(x0)", w, "y");
  EXPECT_NE(error_of([&] { b.annotate(y, InputRole::weight); }).find("only inputs take"), std::string::npos);
  const std::string json_text =
      R"({"nodes": [{"name": "x", "kind": "input", "shape": [4, 4], "role": "data", "index_roles": {"batch": 2}},
                    {"name": "out", "kind": "output", "inputs": ["x"]}]})";
  const std::string e = error_of([&] { (void)graph_from_json(parse_json(json_text, "g.json"), "g.json"); });
  EXPECT_NE(e.find("the batch annotation names index 2"), std::string::npos) << e;
  const std::string role = R"({"nodes": [{"name": "x", "kind": "input", "shape": [4], "role": "bias"}]})";
  EXPECT_NE(error_of([&] { (void)graph_from_json(parse_json(role, "g.json"), "g.json"); }).find("unknown role 'bias'"),
            std::string::npos);
}

TEST(DpTp, TensorParallelInsideANodeDataParallelAcrossNodes) {
  const Graph g = build_workload("llama-block:model=7b,batch=2");
  PlanOptions o;
  o.devices = 16;
  o.machine = machine_preset("cluster:2xh100-sxm-8");
  const Plan p = plan(g, "dp-tp", o);
  const NodePlan& scores = p.decomposition.plan(g.at("scores"));
  EXPECT_EQ(scores.partition.parts(), (std::vector<int>{2, 8, 1, 1, 1}));
  for (std::int64_t b = 0; b < scores.partition.num_blocks(); ++b) {
    const int node = static_cast<int>(scores.partition.block(b).offset[0]);  // batch 0 or 1
    EXPECT_EQ(scores.devices[static_cast<std::size_t>(b)].value / 8, node) << "block " << b;
  }
  // Every tensor-parallel group stays inside its node: no move between the two hosts
  // but for the data, and the weights are resident (no weight crosses).
  const TaskGraph tg = lower(g, p.decomposition);
  for (const Task& t : tg.tasks)
    if (t.kind == TaskKind::move) {
      EXPECT_EQ(t.device.value / 8, t.dst_device.value / 8) << g.node(t.node).name;
    }
  EXPECT_TRUE(p.idle_devices.empty());
}

TEST(DpTp, ARequestThatDoesNotFitSaysWhatWould) {
  PlanOptions o;
  o.devices = 16;
  const Graph g = build_workload("llama-block:model=7b,batch=1");
  EXPECT_NE(error_of([&] { (void)plan(g, "dp-tp", o); }).find("needs a machine (-m)"), std::string::npos);
  o.machine = machine_preset("cluster:4xh100-sxm-8");
  EXPECT_NE(error_of([&] { (void)plan(g, "dp-tp", o); })
                .find("batch 1 is smaller than the 2 nodes that 16 devices span on machine"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)plan(g, "dp-tp", o); }).find("use batch >= 2, or at most 8 devices"), std::string::npos);
  o.devices = 12;
  EXPECT_NE(error_of([&] { (void)plan(g, "dp-tp", o); }).find("12 devices are not whole nodes"), std::string::npos);
  o.devices = 8;  // one node: plain tensor parallelism
  EXPECT_NO_THROW((void)plan(g, "dp-tp", o));
}

// Locality puts a block where its operands are, but no device takes more than its share
// of a node's blocks and a node with at least n blocks uses every device.
TEST(Locality, NeverLeavesADeviceWithoutComputeOnTheBuiltInWorkloads) {
  for (const char* w : {"chain:size=64", "chain-sum:size=64", "chain-sum:size=64,skewed=1", "ffn", "ffn:tokens=16",
                        "llama-block:model=tiny", "llama-block:model=7b"})
    for (const char* s : {"eindecomp", "data-parallel", "megatron", "sqrt-split", "block-per-device", "split-largest"})
      for (int n : {2, 4, 8}) {
        const Graph g = build_workload(w);
        const Plan p = plan_of(g, s, n, Weights::resident, "locality");
        std::int64_t most = 0;
        for (NodeId id : g.ids())
          if (g.node(id).kind == NodeKind::einsum)
            most = std::max(most, p.decomposition.plan(id).partition.num_blocks());
        if (most >= n) {
          EXPECT_TRUE(p.idle_devices.empty()) << w << " " << s << " n=" << n;
        }
        // Per node: at most ⌈blocks / n⌉ blocks on one device.
        for (NodeId id : g.ids()) {
          if (g.node(id).kind != NodeKind::einsum) continue;
          const NodePlan& np = p.decomposition.plan(id);
          std::vector<std::int64_t> count(static_cast<std::size_t>(n), 0);
          for (DeviceId d : np.devices) ++count[d.index()];
          const std::int64_t cap = (np.partition.num_blocks() + n - 1) / n;
          EXPECT_LE(*std::max_element(count.begin(), count.end()), cap) << w << " " << s << " " << g.node(id).name;
        }
      }
}

TEST(Locality, IdleDevicesAreReported) {
  // One node of two blocks on four devices: two devices idle, and the plan says which.
  GraphBuilder b;
  b.output(b.matmul(b.input("x", {2, 4}), b.input("w", {4, 1})), "out");
  const Graph g = b.build();
  const Plan p = plan_of(g, "block-per-device", 4, Weights::resident, "locality");
  EXPECT_EQ(p.idle_devices, (std::vector<int>{2, 3}));
}

// X (data) times W (a weight), both 64 x 64: the graph of the two placement tests below.
struct DataTimesWeight {
  Graph g;
  NodeId x, w, mm;
};
DataTimesWeight data_times_weight() {
  GraphBuilder b;
  const NodeId x = b.input("X", {64, 64});
  b.annotate(x, InputRole::data);
  const NodeId w = b.weight("W", {64, 64});
  const NodeId mm = b.matmul(x, w);
  b.output(mm, "out");
  return {b.build(), x, w, mm};
}

// Fetched weights start where they are first read. W[j, k] split (4, 2) under a join
// (i, k, j) split (1, 2, 4): W's block (j, k) is number 2j + k, its reader's 4k + j, so
// round-robin alone put 6 of its 8 blocks on another device than their reader and every
// step moved them; now none moves, under every placement.
TEST(Placement, InputsAndFillsStartOnTheDeviceOfTheirFirstReader) {
  const auto [g, x, w, mm] = data_times_weight();
  Partitioning p;
  p.join = {{1, 4}, {4, 2}, {1, 2, 4}, {1, 2}};
  for (const char* placement : {"round-robin", "greedy", "locality"}) {
    const Decomposition d = place(g, p, 8, placement);
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 2; ++k)
        EXPECT_EQ(d.plan(w).devices[static_cast<std::size_t>(2 * j + k)],
                  d.plan(mm).devices[static_cast<std::size_t>(4 * k + j)])
            << placement << " W block (" << j << ", " << k << ")";
    // X's block j is read by the blocks (k, j) for both k: it starts on the first.
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(d.plan(x).devices[static_cast<std::size_t>(j)], d.plan(mm).devices[static_cast<std::size_t>(j)])
          << placement;
    // No move carries W: the moves carry X's replicas and the partials only.
    const TaskGraph tg = lower(g, d);
    std::int64_t moved_from_w = 0;
    for (const Task& t : tg.tasks)
      if (t.kind == TaskKind::move && t.node == w) moved_from_w += t.bytes;
    EXPECT_EQ(moved_from_w, 0) << placement;
  }
}

// An input every device of a group reads whole starts spread over that group, not all on
// its first reader. X[i, j] split (4, 1) under a join (i, k, j) split (1, 4, 1): each of
// the 4 blocks of the matmul (devices 0-3) reads all of X. At the first reader, device 0
// held all 4 blocks and sent 12 of the 12 moves; spread, each device holds one block and
// sends 3 (an all-gather), so no device is the one whose sends everyone waits for.
TEST(Placement, InputsReadByAGroupAreSpreadOverIt) {
  const auto [g, x, w, mm] = data_times_weight();
  Partitioning p;
  p.join = {{4, 1}, {1, 4}, {1, 4, 1}, {1, 4}};
  for (const char* placement : {"round-robin", "greedy", "locality"}) {
    const Decomposition d = place(g, p, 4, placement);
    std::set<int> readers, holders;
    for (DeviceId dev : d.plan(mm).devices) readers.insert(dev.value);
    ASSERT_EQ(readers.size(), 4u) << placement;
    for (DeviceId dev : d.plan(x).devices) {
      EXPECT_TRUE(readers.count(dev.value)) << placement << ": X on device " << dev.value << ", which reads none of it";
      holders.insert(dev.value);
    }
    EXPECT_EQ(holders.size(), 4u) << placement << ": X's 4 blocks on " << holders.size() << " devices";
    const TaskGraph tg = lower(g, d);
    std::vector<std::int64_t> sent(4, 0);
    for (const Task& t : tg.tasks)
      if (t.kind == TaskKind::move && t.node == x) sent[static_cast<std::size_t>(t.device.value)] += t.bytes;
    for (int dev = 0; dev < 4; ++dev)
      EXPECT_EQ(sent[static_cast<std::size_t>(dev)], 3 * 16 * 64 * 4) << placement << " device " << dev;
  }
}

// place(..., spread): under round-robin a node of B < n blocks, B dividing n, puts block
// b on device b·n/B instead of b; a node of n blocks, a B that does not divide n, and the
// other placements are as without it. The leaves follow their first reader as always.
TEST(Placement, SpreadPutsSmallNodesAmongAllDevices) {
  const auto [g, x, w, mm] = data_times_weight();
  Partitioning p;
  p.join = {{4, 1}, {1, 1}, {4, 1, 1}, {4, 1}};  // the matmul in 4 blocks on 8 devices
  const Decomposition plain = place(g, p, 8, "round-robin");
  const Decomposition spread = place(g, p, 8, "round-robin", 1000, true);
  for (std::size_t b = 0; b < 4; ++b) {
    EXPECT_EQ(plain.plan(mm).devices[b].value, static_cast<int>(b));
    EXPECT_EQ(spread.plan(mm).devices[b].value, static_cast<int>(2 * b));
    EXPECT_EQ(spread.plan(x).devices[b], spread.plan(mm).devices[b]);  // X's row block b starts at its reader
  }
  p.join = {{8, 1}, {1, 1}, {8, 1, 1}, {8, 1}};  // n blocks: nothing to spread
  EXPECT_EQ(place(g, p, 8, "round-robin", 1000, true), place(g, p, 8, "round-robin"));
  p.join = {{3, 1}, {1, 1}, {3, 1, 1}, {3, 1}};  // 3 does not divide 8
  EXPECT_EQ(place(g, p, 8, "round-robin", 1000, true), place(g, p, 8, "round-robin"));
  p.join = {{4, 1}, {1, 1}, {4, 1, 1}, {4, 1}};
  for (const char* placement : {"greedy", "locality"})
    EXPECT_EQ(place(g, p, 8, placement, 1000, true), place(g, p, 8, placement)) << placement;
}

TEST(Strategies, ResidentPlansAreDeterministic) {
  const Graph g = build_workload("llama-block:model=7b,batch=4");
  for (const char* s : {"data-parallel", "megatron", "eindecomp"})
    for (const char* pl : {"round-robin", "locality", "greedy"})
      EXPECT_EQ(plan_of(g, s, 8, Weights::resident, pl).decomposition, plan_of(g, s, 8, Weights::resident, pl).decomposition)
          << s << " " << pl;
}

}  // namespace
}  // namespace tessel::planner
