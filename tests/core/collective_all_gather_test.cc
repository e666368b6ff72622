// LowerOptions::collectives: a repartition that is an all-gather lowered as one collective
// node (Collective::allgather), run by the executors (CPU copies, block executor as moves)
// and simulated as NCCL's ring all-gather on the graph's own buffers (sim/collectives.h).
#include <gtest/gtest.h>

#include "core/collective_rewrite.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "planner/strategy.h"
#include "runtime/cpu_executor.h"
#include "runtime/executor.h"
#include "sim/collectives.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace tessel {
namespace {

// Megatron's column-parallel pair without the row-parallel half: y = x·w with w's columns
// split n ways (block i of y on device i), then z = y·v with v's columns split n ways on
// `z_devices` devices (z block i on device i), so every one of them reads the whole y.
struct Case {
  Graph g;
  Decomposition d;
  NodeId y, z;
};
Case column_parallel_case(int n, int z_devices, std::int64_t rows, std::int64_t inner, std::int64_t cols,
                          DType dtype = DType::f64) {
  GraphBuilder b(dtype);
  const NodeId x = b.input("x", {rows, inner});
  const NodeId w = b.input("w", {inner, cols});
  const NodeId v = b.input("v", {cols, cols});
  const NodeId y = b.einsum("ij,jk->ik", {x, w});
  const NodeId z = b.einsum("ik,kl->il", {y, v});
  b.output(z, "out");
  Case c{b.build(), {}, y, z};
  c.d.num_devices = n;
  c.d.nodes.resize(c.g.size());
  for (NodeId id : c.g.ids()) {
    NodePlan& p = c.d.nodes[id.index()];
    const Shape js = c.g.join_shape(id);
    const int split = id == z || id == v ? z_devices : n;
    if (id == w || id == v)
      p.partition = Partition::even(js, {1, split});
    else if (id == y || id == z)
      p.partition = Partition::even(js, {1, split, 1});  // join (i, k|l, j|k): output columns
    else
      p.partition = Partition::even(js, std::vector<int>(js.size(), 1));
    const auto blocks = static_cast<std::size_t>(p.partition.num_blocks());
    p.devices.assign(blocks, DeviceId(0));
    for (std::size_t i = 0; i < blocks; ++i) p.devices[i] = DeviceId(static_cast<std::int32_t>(i));
  }
  c.d.validate(c.g);
  return c;
}

std::int64_t count(const TaskGraph& tg, TaskKind k) { return tg.summary().count[static_cast<int>(k)]; }

TEST(AllGatherLowering, AColumnParallelOutputReadWholeByEveryHolderBecomesOneNode) {
  const int n = 4;
  const Case c = column_parallel_case(n, n, 6, 5, 8);
  const TaskGraph moves = lower(c.g, c.d);
  const TaskGraph nodes = lower(c.g, c.d, LowerOptions{true});
  nodes.validate();
  EXPECT_EQ(count(moves, TaskKind::collective), 0);
  ASSERT_EQ(count(nodes, TaskKind::collective), 1);
  ASSERT_EQ(nodes.collectives.size(), 1u);
  const CollectiveSpec& s = nodes.collectives[0];
  EXPECT_EQ(s.collective, Collective::allgather);
  EXPECT_EQ(s.ranks, n);
  EXPECT_EQ(s.bytes, 6 * 8 * 8);  // the whole y, f64
  EXPECT_EQ(s.agg, Agg::none);
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    EXPECT_EQ(s.devices[ur], DeviceId(r));
    EXPECT_EQ(s.regions[ur], (Rect{2, {0, 2 * r}, {6, 2}}));  // block r of y in the whole y
    EXPECT_EQ(nodes.buffer(s.outputs[ur]).shape, (Shape{6, 8}));
  }
  // The n(n−1) moves of y's blocks are gone; the moves form brings back the same bytes.
  EXPECT_EQ(moves.summary().bytes_moved - nodes.summary().bytes_moved, std::int64_t{n - 1} * 6 * 8 * 8);
  const TaskGraph back = collectives_as_moves(nodes);
  back.validate();
  EXPECT_FALSE(back.has_collectives());
  EXPECT_EQ(back.summary().bytes_moved, moves.summary().bytes_moved);
  EXPECT_EQ(count(back, TaskKind::move), count(moves, TaskKind::move));
  EXPECT_EQ(count(back, TaskKind::touch), count(moves, TaskKind::touch));
}

TEST(AllGatherLowering, OtherRepartitionsStayMoves) {
  // z on devices 0 and 1 only: the holders of y's blocks 2 and 3 do not read y.
  const Case half = column_parallel_case(4, 2, 6, 5, 8);
  EXPECT_FALSE(lower(half.g, half.d, LowerOptions{true}).has_collectives());
  // Two of y's blocks on one device: not one block per rank.
  Case dup = column_parallel_case(4, 4, 6, 5, 8);
  dup.d.nodes[dup.y.index()].devices[1] = DeviceId(0);
  EXPECT_FALSE(lower(dup.g, dup.d, LowerOptions{true}).has_collectives());
  // z's rows split: every block reads half of each of y's blocks, none whole (and the
  // whole v, which is an all-gather when v is split: one block on device 0 here).
  Case rows = column_parallel_case(2, 2, 6, 5, 8);
  rows.d.nodes[rows.z.index()].partition = Partition::even(rows.g.join_shape(rows.z), {2, 1, 1});
  const TaskGraph of_v = lower(rows.g, rows.d, LowerOptions{true});
  ASSERT_EQ(of_v.collectives.size(), 1u);
  const NodeId v = rows.g.node(rows.z).inputs[1];
  for (const Task& t : of_v.tasks)
    if (t.kind == TaskKind::collective) {
      EXPECT_EQ(t.node, v) << "the all-gather is v's, not y's";
    }
  rows.d.nodes[v.index()].partition = Partition::even(rows.g.join_shape(v), {1, 1});
  rows.d.nodes[v.index()].devices = {DeviceId(0)};
  rows.d.validate(rows.g);
  EXPECT_FALSE(lower(rows.g, rows.d, LowerOptions{true}).has_collectives());
}

TEST(AllGatherLowering, RunsToTheReferenceOn1To4Devices) {
  for (int n : {1, 2, 4}) {
    const Case c = column_parallel_case(n, n, 6, 5, 8);
    const TaskGraph nodes = lower(c.g, c.d, LowerOptions{true});
    EXPECT_EQ(count(nodes, TaskKind::collective), n > 1 ? 1 : 0) << n;
    const runtime::TensorMap inputs = runtime::random_inputs(c.g, 7);
    const runtime::TensorMap want = runtime::evaluate_reference(c.g, inputs);
    auto check = [&](const runtime::RunResult& r, const std::string& what) {
      const Difference d = compare(r.outputs.at("out"), want.at("out"));
      EXPECT_LE(d.normwise_rel, 1e-12) << what << " n=" << n << ": max abs error " << d.max_abs;
    };
    for (runtime::Policy p : {runtime::Policy::async, runtime::Policy::bsp})
      check(runtime::CpuExecutor({p, false}).run(c.g, nodes, inputs), "cpu " + std::string(runtime::to_string(p)));
    check(runtime::BlockExecutor().run(c.g, nodes, inputs), "block (as moves)");
    check(runtime::CpuExecutor({runtime::Policy::async, false}).run(c.g, sim::expand_collectives(nodes), inputs),
          "cpu on the ring form");
  }
}

TEST(AllGatherLowering, MegatronOnTheLlamaBlockGathersAndRunsToTheReference) {
  // Megatron's column-parallel projections are gathered where the next operator reads
  // them whole (attention scores, the FFN's second input): all-gather nodes next to the
  // row-parallel reduce-scatters, and no move left on 2 and 4 devices.
  const Graph g = build_workload("llama-block:model=tiny,seq=8");
  const runtime::TensorMap inputs = runtime::random_inputs(g, 3);
  const runtime::TensorMap want = runtime::evaluate_reference(g, inputs);
  for (int n : {1, 2, 4}) {
    planner::PlanOptions o;
    o.devices = n;
    const TaskGraph tg = lower(g, planner::plan(g, "megatron", o).decomposition, LowerOptions{true});
    int gathers = 0;
    for (const CollectiveSpec& s : tg.collectives) gathers += s.collective == Collective::allgather;
    EXPECT_EQ(gathers, n > 1 ? 2 : 0) << n;
    EXPECT_EQ(count(tg, TaskKind::move), 0) << n;
    for (runtime::Policy p : {runtime::Policy::async, runtime::Policy::bsp}) {
      const runtime::RunResult r = runtime::CpuExecutor({p, false}).run(g, tg, inputs);
      for (NodeId id : g.outputs()) {
        const std::string& name = g.node(id).name;
        const Difference d = compare(r.outputs.at(name), want.at(name));
        EXPECT_LE(d.normwise_rel, 1e-5) << "n=" << n << " " << runtime::to_string(p) << " " << name;
      }
    }
  }
}

// n ranks, rank r holding block r (`block_elements` f32) of a tensor every rank gathers:
// the lowered node alone, after its input tasks.
TaskGraph lowered_all_gather(int n, std::int64_t block_elements) {
  TaskGraph tg;
  tg.num_devices = n;
  CollectiveSpec s;
  s.collective = Collective::allgather;
  s.ranks = n;
  s.bytes = n * block_elements * 4;
  s.agg = Agg::none;
  Task c;
  c.kind = TaskKind::collective;
  c.device = c.dst_device = DeviceId(0);
  c.node = NodeId(0);
  c.block = 0;
  c.bytes = s.bytes;
  for (int r = 0; r < n; ++r) {
    tg.buffers.push_back(Buffer{DeviceId(r), Shape{block_elements}, DType::f32, Agg::none, NodeId(0)});
    tg.buffers.push_back(Buffer{DeviceId(r), Shape{n * block_elements}, DType::f32, Agg::none, NodeId(0)});
    const BufferId in(2 * r), out(2 * r + 1);
    Task t;
    t.kind = TaskKind::input;
    t.device = t.dst_device = DeviceId(r);
    t.node = NodeId(0);
    t.block = r;
    t.writes = in;
    t.src = Rect{1, {r * block_elements}, {block_elements}};
    t.bytes = block_elements * 4;
    tg.tasks.push_back(t);
    c.reads.push_back(in);
    c.deps.emplace_back(r);
    s.devices.emplace_back(r);
    s.outputs.push_back(out);
    s.regions.push_back(Rect{1, {r * block_elements}, {block_elements}});
  }
  tg.tasks.push_back(c);
  tg.collectives.push_back(s);
  tg.validate();
  return tg;
}

TEST(AllGatherLowering, SimulatedRingMatchesTheGeneratedNodeAndTheClosedForm) {
  // A switch, 10 GB/s per link and direction, 2 µs per route: the lowered node expands into the ring all-gather
  // on its own buffers, the generated node (collective_engine.h) runs the same ring.
  constexpr double kAlpha = 2e-6, kB = 1e10;
  for (int n : {2, 4, 8}) {
    const std::int64_t block = 16 * 1024;  // 64 KiB per rank: one piece
    const Machine m = sim::testing::switch_machine(n, kAlpha, kB);
    for (const char* model : {"alpha-beta", "flow"}) {
      sim::SimOptions o;
      o.network = model;
      const sim::SimResult lowered = sim::simulate(lowered_all_gather(n, block), m, o);
      CollectiveSpec g;
      g.collective = Collective::allgather;
      g.ranks = n;
      g.bytes = n * block * 4;
      const sim::SimResult generated = sim::simulate(sim::collective_node_graph(g), m, o);
      const sim::SimResult expanded = sim::simulate(sim::collective_task_graph(g), m, o);
      const double want =
          sim::collective_closed_form_s(Collective::allgather, n, static_cast<double>(g.bytes), kAlpha, kB);
      EXPECT_EQ(lowered.makespan_s, generated.makespan_s) << n << " " << model;
      EXPECT_EQ(lowered.makespan_s, expanded.makespan_s) << n << " " << model;
      EXPECT_NEAR(lowered.makespan_s, want, 2e-12 * n) << n << " " << model;
      EXPECT_EQ(lowered.bytes_moved, g.bytes / n * (n - 1) * n);
    }
  }
}

}  // namespace
}  // namespace tessel
