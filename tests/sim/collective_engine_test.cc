// Collectives as one task graph node: the generated form against the expanded form.
#include "sim/collective_engine.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/machine.h"
#include "sim/collectives.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace tessel::sim {
namespace {

using testing::error_of;

SimOptions collective_options(int channels = 1) {
  SimOptions o;
  o.channels_per_link = true;  // as simulate --collective runs them
  o.comm_channels = channels;
  o.symmetry = false;  // every rank (the reduction: collective_symmetry_test.cc)
  return o;
}

CollectiveSpec spec_for(Collective c, int n, std::int64_t bytes, const Machine& m, std::optional<Algorithm> a,
                        int channels) {
  CollectivePlan p = plan_collective(c, n, bytes, DType::f32, m, a);
  p.spec.window = p.spec.ranks_per_node > 0 ? 0 : channels;
  return p.spec;
}

// The generated form runs the expanded form's tasks with the same lane rules and, for
// these programs, the same order: finish times agree bit for bit, and so do the events,
// bytes per link and per-device busy times.
void expect_same(const CollectiveSpec& s, const Machine& m, int channels) {
  const SimOptions o = collective_options(channels);
  ASSERT_EQ(generated_form_unsupported(s, m, o), "");
  const SimResult gen = simulate(collective_node_graph(s), m, o);
  const SimResult exp = simulate(collective_task_graph(s), m, o);
  const std::string what = std::string(to_string(s.collective)) + " n=" + std::to_string(s.ranks) +
                           " bytes=" + std::to_string(s.bytes) + " slices=" + std::to_string(s.slices) +
                           " ranks_per_node=" + std::to_string(s.ranks_per_node) +
                           " rail_window=" + std::to_string(s.rail_window) +
                           " ring_window=" + std::to_string(s.ring_window) + " on " +
                           m.name + " channels=" + std::to_string(channels);
  EXPECT_EQ(gen.makespan_s, exp.makespan_s) << what;
  EXPECT_EQ(gen.events, exp.events) << what;
  EXPECT_EQ(gen.bytes_moved, exp.bytes_moved) << what;
  EXPECT_EQ(gen.link_bytes, exp.link_bytes) << what;
  ASSERT_EQ(gen.devices.size(), exp.devices.size()) << what;
  for (std::size_t d = 0; d < gen.devices.size(); ++d) {
    EXPECT_EQ(gen.devices[d].comm_busy_s, exp.devices[d].comm_busy_s) << what << " device " << d;
    EXPECT_EQ(gen.devices[d].copy_busy_s, exp.devices[d].copy_busy_s) << what << " device " << d;
    EXPECT_EQ(gen.devices[d].tasks, exp.devices[d].tasks - 1) << what << " device " << d;  // its input task
  }
}

TEST(CollectiveEngine, RingCollectivesMatchTheExpandedFormBitForBit) {
  const Machine one = machine_preset("h100-sxm-8");
  const Machine two = machine_preset("cluster:2xh100-sxm-8");
  for (Collective c : {Collective::allreduce, Collective::reducescatter, Collective::allgather}) {
    // 64 MiB on one node: 16 to 32 pieces, so the 8-piece window binds.
    for (int n : {2, 3, 5, 8})
      for (std::int64_t bytes : {std::int64_t{1} << 20, std::int64_t{64} << 20})
        expect_same(spec_for(c, n, bytes, one, Algorithm::ring, 1), one, 1);
    expect_same(spec_for(c, 16, std::int64_t{48} << 20, two, Algorithm::ring, 1), two, 1);
    expect_same(spec_for(c, 16, std::int64_t{48} << 20, two, Algorithm::ring, 4), two, 4);
  }
  // A ring window other than 8 that binds: 16 pieces, 10 in flight; and the planner's 21
  // of 32 on 1 ms hops through a switch (collectives_test.cc has them on a ring).
  for (Collective c : {Collective::allreduce, Collective::reducescatter}) {
    CollectiveSpec s = spec_for(c, 8, std::int64_t{64} << 20, one, Algorithm::ring, 1);
    ASSERT_EQ(s.slices, 16);
    s.ring_window = 10;
    expect_same(s, one, 1);
    const Machine slow = testing::switch_machine(4, 1e-3, 1e10);
    const CollectiveSpec planned = spec_for(c, 4, std::int64_t{64} << 20, slow, Algorithm::ring, 1);
    ASSERT_EQ(planned.ring_window, 21);
    expect_same(planned, slow, 1);
  }
}

TEST(CollectiveEngine, AllToAllMatchesTheExpandedFormBitForBit) {
  const Machine one = machine_preset("h100-sxm-8");
  const Machine four = machine_preset("cluster:4xh100-sxm-8");
  for (int n : {2, 5, 8})
    for (int channels : {1, 3}) expect_same(spec_for(Collective::alltoall, n, std::int64_t{16} << 20, one, {}, channels), one, channels);
  // Two levels, every send posted at once.
  expect_same(spec_for(Collective::alltoall, 32, std::int64_t{64} << 20, four, {}, 1), four, 1);
  expect_same(spec_for(Collective::alltoall, 16, std::int64_t{64} << 20, four, {}, 2), four, 2);
  // One level with every send posted (window 0).
  CollectiveSpec s = spec_for(Collective::alltoall, 8, std::int64_t{8} << 20, one, {}, 1);
  s.window = 0;
  expect_same(s, one, 1);
}

TEST(CollectiveEngine, HierarchicalAllReduceMatchesTheExpandedFormBitForBit) {
  // Its priorities are the expanded form's longest paths in closed form: the same choices
  // on every lane, so the same finish times, events, bytes per link and busy times. Sizes:
  // one piece; 12 pieces with the window binding, chunks even and (+ 37 elements) of two
  // sizes; 32 pieces. Layouts: 2 nodes of 8 (NVLink-bound), 3 of 4 over PCIe, 16 of 8
  // (NIC-bound), a fat-tree with two nodes per leaf.
  const std::int64_t mib48 = std::int64_t{48} << 20, uneven = mib48 + 4 * 37;
  const Machine two = machine_preset("cluster:2xh100-sxm-8");
  for (std::int64_t bytes : {std::int64_t{1} << 20, mib48, uneven, std::int64_t{1} << 30})
    for (int channels : {1, 4}) expect_same(spec_for(Collective::allreduce, 16, bytes, two, Algorithm::hierarchical, channels), two, channels);
  const Machine pcie = machine_preset("cluster:3xh100-pcie-4");
  for (int channels : {1, 4}) expect_same(spec_for(Collective::allreduce, 12, uneven, pcie, Algorithm::hierarchical, channels), pcie, channels);
  const Machine sixteen = machine_preset("cluster:16xh100-sxm-8");
  expect_same(spec_for(Collective::allreduce, 128, mib48, sixteen, Algorithm::hierarchical, 1), sixteen, 1);
  const Machine tree = machine_preset("fat-tree:4xh100-sxm-8,leaf=2");
  expect_same(spec_for(Collective::allreduce, 32, uneven, tree, Algorithm::hierarchical, 4), tree, 4);
  // Several spines: a rank's NVLink and rail moves that start at one instant take the
  // channels, so the ECMP spines, best first across its two pools, as in the expanded form.
  const Machine spines = machine_preset("fat-tree:4xh100-sxm-8,leaf=1,spines=4");
  expect_same(spec_for(Collective::allreduce, 32, mib48, spines, Algorithm::hierarchical, 2), spines, 2);
  const Machine rail = machine_preset("rail:2xh100-sxm-8,group=1");
  expect_same(spec_for(Collective::allreduce, 16, std::int64_t{3} << 20, rail, Algorithm::hierarchical, 1), rail, 1);
  // A rail window wider than 8 that still binds (12 pieces, 10 in flight along the rails),
  // as plan_collective() sets it where 8 pieces' rail chunks are too small.
  for (int channels : {1, 4}) {
    CollectiveSpec s = spec_for(Collective::allreduce, 16, uneven, two, Algorithm::hierarchical, channels);
    ASSERT_EQ(s.slices, 12);
    s.rail_window = 10;
    expect_same(s, two, channels);
  }
  CollectiveSpec wide = spec_for(Collective::allreduce, 128, mib48, sixteen, Algorithm::hierarchical, 1);
  wide.rail_window = 10;
  expect_same(wide, sixteen, 1);
  // Layouts the machine does not have: one rank per "node" (a ring over the nodes, phases
  // 0 and 3 empty) and four. Equal here, not in general: the priorities are taken on rank
  // 0's routes, and with one rank per node every rank's B touches in rank 0's order.
  // (Four per "node" with a rail window of 10 is one where they differ: the same
  // makespan, busy times up to 0.5% apart.)
  for (auto [per_node, rail_window] : {std::pair{1, kPiecesInFlight}, {1, 10}, {4, kPiecesInFlight}}) {
    CollectiveSpec s = spec_for(Collective::allreduce, 16, uneven, two, Algorithm::hierarchical, 1);
    s.ranks_per_node = per_node;
    s.rail_window = rail_window;
    expect_same(s, two, 1);
  }
}

TEST(CollectiveEngine, IsDeterministic) {
  const Machine m = machine_preset("cluster:4xh100-sxm-8");
  for (Collective c : {Collective::allreduce, Collective::alltoall}) {
    const CollectiveSpec s = spec_for(c, 32, std::int64_t{32} << 20, m, c == Collective::alltoall ? std::nullopt
                                                                                             : std::optional{Algorithm::ring}, 1);
    const TaskGraph tg = collective_node_graph(s);
    const SimResult a = simulate(tg, m, collective_options());
    const SimResult b = simulate(tg, m, collective_options());
    EXPECT_EQ(a.makespan_s, b.makespan_s);
    EXPECT_EQ(a.events, b.events);
    EXPECT_EQ(a.link_bytes, b.link_bytes);
    for (std::size_t d = 0; d < a.devices.size(); ++d) EXPECT_EQ(a.devices[d].busy_s, b.devices[d].busy_s);
  }
}

TEST(CollectiveEngine, ManyRanksKeepAFewTasksPerRank) {
  // 256 ranks: the expanded form would hold 4 · 255 · 256 tasks; the generated one keeps
  // per rank its ready tasks only, and still finishes every one of them.
  const Machine m = machine_preset("cluster:32xh100-sxm-8");
  const CollectiveSpec s = spec_for(Collective::allreduce, 256, std::int64_t{1} << 20, m, Algorithm::ring, 1);
  const SimResult r = simulate(collective_node_graph(s), m, collective_options());
  std::int64_t tasks = 0;
  for (const auto& d : r.devices) tasks += d.tasks;
  EXPECT_EQ(tasks, std::int64_t{4} * 255 * 256 * s.slices);  // moves + two touches per reduce-scatter step
  EXPECT_GT(r.makespan_s, 0);
  EXPECT_TRUE(r.timeline.spans.empty());
  // Hierarchical, 32 nodes of 8: per piece and rank 3(g − 1) tasks inside the node, 4(N − 1)
  // along its rail (reduce-scatter: move and two touches; all-gather: a move) and (g − 1)·N
  // moves of the node's all-gather, one per rail chunk.
  const CollectiveSpec h = spec_for(Collective::allreduce, 256, std::int64_t{1} << 20, m, Algorithm::hierarchical, 1);
  const SimResult rh = simulate(collective_node_graph(h), m, collective_options());
  tasks = 0;
  for (const auto& d : rh.devices) tasks += d.tasks;
  EXPECT_EQ(tasks, std::int64_t{256} * (3 * 7 + 4 * 31 + 7 * 32) * h.slices);
  EXPECT_GT(rh.makespan_s, 0);
}

TEST(CollectiveEngine, WhatItDoesNotGenerateRunsExpanded) {
  const Machine m = machine_preset("cluster:2xh100-sxm-8");
  const SimOptions o = collective_options();
  {
    const CollectiveSpec s = spec_for(Collective::allreduce, 16, std::int64_t{16} << 20, m, Algorithm::tree, 1);
    EXPECT_NE(generated_form_unsupported(s, m, o), "");
    EXPECT_EQ(simulate(collective_node_graph(s), m, o).makespan_s, simulate(collective_task_graph(s), m, o).makespan_s);
  }
  SimOptions ab = o;
  ab.network = "alpha-beta";
  const CollectiveSpec ring = spec_for(Collective::allreduce, 16, std::int64_t{16} << 20, m, Algorithm::ring, 1);
  EXPECT_NE(generated_form_unsupported(ring, m, ab), "");
  EXPECT_EQ(simulate(collective_node_graph(ring), m, ab).makespan_s, simulate(collective_task_graph(ring), m, ab).makespan_s);
}

TEST(CollectiveEngine, ACollectiveNodeBesideOtherTasksIsAnError) {
  const Machine m = machine_preset("h100-sxm-8");
  TaskGraph tg = collective_node_graph(spec_for(Collective::allreduce, 4, 1 << 20, m, Algorithm::ring, 1));
  tg.tasks.push_back(tg.tasks[0]);
  EXPECT_NE(error_of([&] { (void)simulate(tg, m, collective_options()); }).find("only task"), std::string::npos);
  TaskGraph bad = collective_node_graph(spec_for(Collective::allreduce, 4, 1 << 20, m, Algorithm::ring, 1));
  bad.tasks[0].block = 3;
  EXPECT_NE(error_of([&] { bad.validate(); }).find("names collective 3"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)collective_node_graph(CollectiveSpec{Collective::allreduce, Algorithm::ring, 0, 64}); })
                .find("ranks"),
            std::string::npos);
  CollectiveSpec no_window = spec_for(Collective::allreduce, 16, 1 << 20, machine_preset("cluster:2xh100-sxm-8"),
                                      Algorithm::hierarchical, 1);
  no_window.rail_window = 0;
  EXPECT_NE(error_of([&] { (void)collective_node_graph(no_window); }).find("rail_window must be >= 1, got 0"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel::sim
