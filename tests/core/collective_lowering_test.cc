// LowerOptions::collectives: an aggregation that is a reduce-scatter lowered as one
// collective node, run by the executors (CPU primitive, block executor and MPI as moves)
// and simulated as NCCL's pipelined ring (sim/collectives.h).
#include <gtest/gtest.h>

#include "core/collective_rewrite.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "runtime/cpu_executor.h"
#include "runtime/executor.h"
#include "sim/collectives.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace tessel {
namespace {

// y = x·w with the contraction index split n ways (partial i on device i), aggregated
// into n row blocks, block i on device i: a reduce-scatter; then tanh(y) row-split the
// other way round (block i on device n − 1 − i), so the outputs are read elsewhere too.
struct Case {
  Graph g;
  Decomposition d;
};
Case reduce_scatter_case(int n, std::int64_t rows, std::int64_t inner, std::int64_t cols, DType dtype = DType::f64) {
  GraphBuilder b(dtype);
  const NodeId x = b.input("x", {rows, inner});
  const NodeId w = b.input("w", {inner, cols});
  const NodeId y = b.einsum("ij,jk->ik", {x, w});
  const NodeId t = b.map("tanh(x0)", {y});
  b.output(t, "out");
  Case c{b.build(), {}};
  c.d.num_devices = n;
  c.d.nodes.resize(c.g.size());
  auto devices = [n](bool reversed) {
    std::vector<DeviceId> v;
    for (int i = 0; i < n; ++i) v.emplace_back(reversed ? n - 1 - i : i);
    return v;
  };
  for (NodeId id : c.g.ids()) {
    NodePlan& p = c.d.nodes[id.index()];
    const Shape js = c.g.join_shape(id);
    if (id == x) p.partition = Partition::even(js, {1, n});
    else if (id == w) p.partition = Partition::even(js, {n, 1});
    else if (id == y) p.partition = Partition::even(js, {1, 1, n});
    else if (id == t) p.partition = Partition::even(js, {n, 1});
    else p.partition = Partition::even(js, std::vector<int>(js.size(), 1));
    p.devices = p.partition.num_blocks() == n ? devices(id == t) : std::vector<DeviceId>(static_cast<std::size_t>(p.partition.num_blocks()), DeviceId(0));
    if (id == y && n > 1) {
      p.output = Partition::even(c.g.node(y).shape, {n, 1});
      p.agg_devices = devices(false);
    }
  }
  c.d.validate(c.g);
  return c;
}

TEST(CollectiveLowering, AReduceScatterAggregationBecomesOneNodeThatRunsToTheReference) {
  for (int n : {1, 2, 4}) {
    const Case c = reduce_scatter_case(n, 12, 8, 6);
    const TaskGraph moves = lower(c.g, c.d);
    const TaskGraph nodes = lower(c.g, c.d, LowerOptions{true});
    nodes.validate();
    const auto sm = moves.summary(), sn = nodes.summary();
    EXPECT_EQ(sm.count[static_cast<int>(TaskKind::collective)], 0);
    EXPECT_EQ(sn.count[static_cast<int>(TaskKind::collective)], n > 1 ? 1 : 0) << n;
    if (n > 1) {
      ASSERT_EQ(nodes.collectives.size(), 1u);
      const CollectiveSpec& s = nodes.collectives[0];
      EXPECT_EQ(s.collective, Collective::reducescatter);
      EXPECT_EQ(s.ranks, n);
      EXPECT_EQ(s.bytes, 12 * 6 * 8);  // one partial of y, f64
      // The n(n−1) moves of the aggregation are gone; the moves form brings them back.
      EXPECT_EQ(sm.bytes_moved - sn.bytes_moved, static_cast<std::int64_t>(n - 1) * 12 * 6 * 8);
      const TaskGraph back = collectives_as_moves(nodes);
      back.validate();
      EXPECT_FALSE(back.has_collectives() && has_lowered_collectives(back));
      EXPECT_EQ(back.summary().bytes_moved, sm.bytes_moved);
      EXPECT_EQ(back.summary().count[static_cast<int>(TaskKind::touch)], sm.count[static_cast<int>(TaskKind::touch)]);
    }
    const runtime::TensorMap inputs = runtime::random_inputs(c.g, 5);
    const runtime::TensorMap want = runtime::evaluate_reference(c.g, inputs);
    auto check = [&](const runtime::RunResult& r, const std::string& what) {
      const Difference d = compare(r.outputs.at("out"), want.at("out"));
      EXPECT_LE(d.normwise_rel, 1e-12) << what << " n=" << n << ": max abs error " << d.max_abs;
    };
    for (runtime::Policy p : {runtime::Policy::async, runtime::Policy::bsp}) {
      runtime::RunResult r = runtime::CpuExecutor({p, false}).run(c.g, nodes, inputs);
      check(r, "cpu " + std::string(runtime::to_string(p)));
      EXPECT_EQ(r.timeline.spans.size(), nodes.tasks.size());
    }
    check(runtime::BlockExecutor().run(c.g, nodes, inputs), "block (as moves)");
    // The simulator's ring form is a task graph too: it computes the same sums.
    check(runtime::CpuExecutor({runtime::Policy::async, false}).run(c.g, sim::expand_collectives(nodes), inputs),
          "cpu on the ring form");
  }
}

TEST(CollectiveLowering, OtherAggregationsStayMovesAndTouches) {
  // Aggregated on device 0 whole (a reduce, not a reduce-scatter): nothing to replace.
  Case c = reduce_scatter_case(4, 12, 8, 6);
  for (NodePlan& p : c.d.nodes)
    if (p.output) {
      p.output.reset();
      p.agg_devices.clear();
    }
  EXPECT_FALSE(lower(c.g, c.d, LowerOptions{true}).has_collectives());
  // Two partials on one device: not one partial per rank.
  Case dup = reduce_scatter_case(4, 12, 8, 6);
  for (NodeId id : dup.g.ids())
    if (dup.d.nodes[id.index()].output) dup.d.nodes[id.index()].devices[1] = DeviceId(0);
  EXPECT_FALSE(lower(dup.g, dup.d, LowerOptions{true}).has_collectives());
}

TEST(CollectiveLowering, SimulatedRingMatchesTheMovesFormAndTheClosedForm) {
  // 4 ranks on a switch, 10 GB/s per direction, 2 µs per hop: both forms send (n−1)/n·S
  // per rank, the ring in n − 1 pipelined steps, the moves form all at once.
  const int n = 4;
  const Case c = reduce_scatter_case(n, 1024, 8, 1024, DType::f32);
  const double S = 1024.0 * 1024 * 4, B = 1e10;
  const double bound = (n - 1.0) / n * S / B;
  const Machine m = sim::testing::switch_machine(n, 2e-6, B, 3.35e12);
  sim::SimOptions o;
  o.comm_channels = n - 1;
  const TaskGraph nodes = lower(c.g, c.d, LowerOptions{true});
  const TaskGraph moves = lower(c.g, c.d);
  const sim::SimResult rn = sim::simulate(nodes, m, o);
  const sim::SimResult rm = sim::simulate(moves, m, o);
  const sim::SimResult rx = sim::simulate(sim::expand_collectives(nodes), m, o);
  EXPECT_EQ(rn.makespan_s, rx.makespan_s);  // simulate() expands the node the same way
  // Only the aggregation differs: compare the communication of the node y.
  EXPECT_EQ(rn.bytes_moved, rm.bytes_moved);
  EXPECT_NEAR(rn.makespan_s / rm.makespan_s, 1.0, 0.10) << rn.makespan_s << " against " << rm.makespan_s;
  EXPECT_GT(rn.makespan_s, bound);
}

}  // namespace
}  // namespace tessel
