// The symmetry reduction of a collective running alone (sim/collective_symmetry.h): the
// run on one period of ranks against the run on every rank, and the checks that refuse it.
#include "sim/collective_symmetry.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "core/machine.h"
#include "sim/collective_engine.h"
#include "sim/collectives.h"
#include "sim/simulator.h"

namespace tessel::sim {
namespace {

SimOptions options(bool symmetry, int channels) {
  SimOptions o;
  o.channels_per_link = true;  // as simulate --collective runs them
  o.comm_channels = channels;
  o.symmetry = symmetry;
  return o;
}

CollectiveSpec ring_spec(Collective c, int n, std::int64_t bytes, const Machine& m) {
  return plan_collective(c, n, bytes, DType::f32, m, Algorithm::ring).spec;
}

// The reduced run reports what the full run does: makespan, bytes per link, per-device busy
// times and tasks bit for bit, and events n / period times fewer.
void expect_reduced_equals_full(const CollectiveSpec& s, const Machine& m, int channels, int period) {
  const TaskGraph tg = collective_node_graph(s);
  const SimResult red = simulate(tg, m, options(true, channels));
  const SimResult full = simulate(tg, m, options(false, channels));
  const std::string what = std::string(to_string(s.collective)) + " n=" + std::to_string(s.ranks) +
                           " bytes=" + std::to_string(s.bytes) + " slices=" + std::to_string(s.slices) + " on " +
                           m.name + " channels=" + std::to_string(channels);
  ASSERT_EQ(red.symmetry_period, period) << what << ": " << red.symmetry_note;
  EXPECT_EQ(full.symmetry_period, 0) << what;
  EXPECT_EQ(full.symmetry_note, "turned off (--no-symmetry)");
  EXPECT_EQ(red.makespan_s, full.makespan_s) << what;
  EXPECT_EQ(red.events * (s.ranks / period), full.events) << what;
  EXPECT_EQ(red.events_unreduced, full.events) << what;
  EXPECT_EQ(full.events_unreduced, full.events) << what;
  EXPECT_EQ(red.bytes_moved, full.bytes_moved) << what;
  EXPECT_EQ(red.link_bytes, full.link_bytes) << what;
  ASSERT_EQ(red.devices.size(), full.devices.size()) << what;
  for (std::size_t d = 0; d < red.devices.size(); ++d) {
    EXPECT_EQ(red.devices[d].comm_busy_s, full.devices[d].comm_busy_s) << what << " device " << d;
    EXPECT_EQ(red.devices[d].copy_busy_s, full.devices[d].copy_busy_s) << what << " device " << d;
    EXPECT_EQ(red.devices[d].busy_s, full.devices[d].busy_s) << what << " device " << d;
    EXPECT_EQ(red.devices[d].tasks, full.devices[d].tasks) << what << " device " << d;
  }
}

TEST(CollectiveSymmetry, OneNodeStandsForEveryNodeOfACluster) {
  // 16, 64 and 256 ranks, 8 per node: the ring's inter-node hop leaves one NIC and enters
  // the next node's, a link no other transfer crosses.
  for (Collective c : {Collective::allreduce, Collective::reducescatter, Collective::allgather}) {
    const Machine two = machine_preset("cluster:2xh100-sxm-8");
    expect_reduced_equals_full(ring_spec(c, 16, std::int64_t{48} << 20, two), two, 1, 8);
    expect_reduced_equals_full(ring_spec(c, 16, std::int64_t{48} << 20, two), two, 4, 8);
    const Machine eight = machine_preset("cluster:8xh100-sxm-8");
    expect_reduced_equals_full(ring_spec(c, 64, std::int64_t{64} << 20, eight), eight, 8, 8);
    const Machine many = machine_preset("cluster:32xh100-sxm-8");
    expect_reduced_equals_full(ring_spec(c, 256, std::int64_t{8} << 20, many), many, 1, 8);
  }
}

TEST(CollectiveSymmetry, OneRankStandsForAllOnOneSwitch) {
  // Eight GPUs on one NVSwitch: shifting by one rank maps every NVLink onto the next.
  const Machine one = machine_preset("h100-sxm-8");
  for (Collective c : {Collective::allreduce, Collective::reducescatter, Collective::allgather})
    expect_reduced_equals_full(ring_spec(c, 8, std::int64_t{64} << 20, one), one, 2, 1);
}

TEST(CollectiveSymmetry, TopologyGraphsRepeatLeafByLeafOrNotAtAll) {
  // Two nodes per leaf: the ring leaves a leaf every second node, so the period is a leaf
  // (16 ranks), the ECMP routes of each channel checked one by one.
  const Machine leaves = machine_preset("fat-tree:4xh100-sxm-8,leaf=2");
  for (Collective c : {Collective::allreduce, Collective::reducescatter, Collective::allgather})
    expect_reduced_equals_full(ring_spec(c, 32, std::int64_t{64} << 20, leaves), leaves, 4, 16);
  // An oversubscribed two-spine core, a rail cluster and a torus: the shifted routes take
  // other spines or directions, so every rank runs, with the full run's result.
  for (const char* name : {"fat-tree:8xh100-sxm-8,leaf=2,pod=4,spines=2,oversubscription=4",
                           "rail:4xh100-sxm-8,group=2", "torus:2x2x2xh100-sxm-8"}) {
    const Machine m = machine_preset(name);
    const CollectiveSpec s = ring_spec(Collective::allreduce, 32, std::int64_t{64} << 20, m);
    const SimResult red = simulate(collective_node_graph(s), m, options(true, 4));
    const SimResult full = simulate(collective_node_graph(s), m, options(false, 4));
    EXPECT_EQ(red.symmetry_period, 0) << name;
    EXPECT_NE(red.symmetry_note.find("stand for"), std::string::npos) << name << ": " << red.symmetry_note;
    // Fallback check (not a check of the reduction): refused, the run is the full engine's.
    EXPECT_EQ(red.makespan_s, full.makespan_s) << name;
    EXPECT_EQ(red.events, full.events) << name;
  }
}

TEST(CollectiveSymmetry, AMachineFileReducesWithOneChannelOnly) {
  // tests/data/sim/leaf_spine4.json: four GPUs, two per leaf, two spines. With one channel
  // every route takes the same spine and two ranks stand for four; with three, ECMP sends
  // the shifted channels over other spines than the originals, so every rank runs.
  const Machine m = load_machine(std::string(TESSEL_TEST_DATA_DIR) + "/sim/leaf_spine4.json");
  const CollectiveSpec s = ring_spec(Collective::allreduce, 4, std::int64_t{16} << 20, m);
  expect_reduced_equals_full(s, m, 1, 2);
  const SimResult red = simulate(collective_node_graph(s), m, options(true, 3));
  EXPECT_EQ(red.symmetry_period, 0);
  EXPECT_NE(red.symmetry_note.find("period 2: "), std::string::npos) << red.symmetry_note;
  EXPECT_NE(red.symmetry_note.find("stand for"), std::string::npos) << red.symmetry_note;
}

TEST(CollectiveSymmetry, TheReducedRunMatchesTheExpandedForm) {
  const Machine two = machine_preset("cluster:2xh100-sxm-8");
  const CollectiveSpec s = ring_spec(Collective::allreduce, 16, std::int64_t{48} << 20, two);
  const SimResult red = simulate(collective_node_graph(s), two, options(true, 4));
  const SimResult exp = simulate(collective_task_graph(s), two, options(true, 4));
  ASSERT_EQ(red.symmetry_period, 8);
  EXPECT_EQ(red.makespan_s, exp.makespan_s);
  EXPECT_EQ(red.link_bytes, exp.link_bytes);
  EXPECT_EQ(red.bytes_moved, exp.bytes_moved);
  EXPECT_EQ(red.events * 2, exp.events);
}

TEST(CollectiveSymmetry, TheJsonSaysWhatWasSimulated) {
  // to_json() of any run of a collective node (simulate --collective, a --task-graph file):
  // events as simulated, events_unreduced as the full run has them.
  const Machine two = machine_preset("cluster:2xh100-sxm-8");
  const CollectiveSpec s = ring_spec(Collective::allreduce, 16, std::int64_t{48} << 20, two);
  const SimResult red = simulate(collective_node_graph(s), two, options(true, 1));
  const SimResult full = simulate(collective_node_graph(s), two, options(false, 1));
  const nlohmann::json jr = to_json(red, two), jf = to_json(full, two);
  EXPECT_EQ(jr["symmetry_period"], 8);
  EXPECT_EQ(jr["events"], red.events);
  EXPECT_EQ(jr["events_unreduced"], full.events);
  EXPECT_EQ(jr["symmetry_note"], "");
  EXPECT_EQ(jf["symmetry_period"], 0);
  EXPECT_EQ(jf["events_unreduced"], full.events);
  EXPECT_EQ(jf["symmetry_note"], "turned off (--no-symmetry)");
}

TEST(CollectiveSymmetry, FallsBackToEveryRankWhereNoPeriodHolds) {
  const Machine two = machine_preset("cluster:2xh100-sxm-8");
  // 12 ranks: 8 on one node, 4 on the other; no shift maps the ring's hops onto themselves.
  {
    const CollectiveSpec s = ring_spec(Collective::allreduce, 12, std::int64_t{48} << 20, two);
    const SimResult red = simulate(collective_node_graph(s), two, options(true, 1));
    EXPECT_EQ(red.symmetry_period, 0);
    // The last period tried, 6, maps rank 7's NIC out onto rank 1's NVLink.
    EXPECT_NE(red.symmetry_note.find("period 6: links 'node0.nic7.tx' and 'node0.gpu1.nvlink.out' differ in "
                                     "bandwidth or latency"),
              std::string::npos)
        << red.symmetry_note;
    // Fallback check: refused, the run is the full engine's.
    EXPECT_EQ(red.makespan_s, simulate(collective_node_graph(s), two, options(false, 1)).makespan_s);
  }
  // Chunks of unequal sizes: 16 ranks, a piece of 16·k + 3 elements.
  {
    const CollectiveSpec s = ring_spec(Collective::reducescatter, 16, 4 * (16 * 1000 + 3), two);
    const SimResult red = simulate(collective_node_graph(s), two, options(true, 1));
    EXPECT_EQ(red.symmetry_period, 0);
    EXPECT_EQ(red.symmetry_note, "chunks of unequal sizes or a program without a period (8 ranks)");
    // Fallback check: refused, the run is the full engine's.
    EXPECT_EQ(red.makespan_s, simulate(collective_node_graph(s), two, options(false, 1)).makespan_s);
  }
  // Alpha-beta runs the expanded form: nothing is reduced there.
  {
    SimOptions ab = options(true, 1);
    ab.network = "alpha-beta";
    const CollectiveSpec s = ring_spec(Collective::allreduce, 16, std::int64_t{48} << 20, two);
    EXPECT_EQ(simulate(collective_node_graph(s), two, ab).symmetry_period, 0);
  }
  // All-to-all is not reduced.
  {
    CollectivePlan p = plan_collective(Collective::alltoall, 16, std::int64_t{16} << 20, DType::f32, two, {});
    const SimResult r = simulate(collective_node_graph(p.spec), two, options(true, 1));
    EXPECT_EQ(r.symmetry_period, 0);
    EXPECT_EQ(r.symmetry_note, "the reduction covers ring reduce-scatter, all-gather and all-reduce only");
  }
}

// Four devices of one type, each with an up-link (2d) and a down-link (2d + 1) of the same
// bandwidth and latency: a machine whose links the tests' routes below name directly.
Machine four_devices() {
  Machine m;
  m.name = "four";
  m.device_types.resize(2);
  m.devices.resize(4);
  for (int d = 0; d < 4; ++d)
    for (const char* dir : {"up", "down"})
      m.links.push_back(Link{std::string(dir) + std::to_string(d), LinkKind::custom, 1e9, 1e-6});
  return m;
}

TEST(CollectiveSymmetry, TheCheckRefusesLinksThatDoNotMapOneToOne) {
  const Machine m = four_devices();
  const SymmetryPeersFn ring = [](int r, std::vector<int>& out) { out.push_back((r + 1) % 4); };
  std::vector<std::int32_t> canon;
  // Every transfer over link 0: a link that carries both copies of one transfer.
  const SymmetryRouteFn shared = [](std::int32_t, std::int32_t, std::uint32_t, std::vector<LinkId>& out) {
    out.assign(1, LinkId(0));
  };
  EXPECT_NE(check_shift_symmetry(m, 4, 2, 1, ring, shared, canon).find("several copies"), std::string::npos);
  // Each sender's own up-link, then the receiver's down-link: a proper shift.
  const SymmetryRouteFn own = [](std::int32_t src, std::int32_t dst, std::uint32_t, std::vector<LinkId>& out) {
    out = {LinkId(2 * src), LinkId(2 * dst + 1)};
  };
  EXPECT_EQ(check_shift_symmetry(m, 4, 2, 1, ring, own, canon), "");
  EXPECT_EQ(canon[4], 0);  // rank 2's up-link stands for rank 0's
  EXPECT_EQ(canon[7], 3);  // rank 3's down-link for rank 1's
  EXPECT_EQ(check_shift_symmetry(m, 4, 1, 1, ring, own, canon), "");
  // Rank 2 sends over rank 1's up-link: that link would stand for two.
  const SymmetryRouteFn crossed = [](std::int32_t src, std::int32_t dst, std::uint32_t, std::vector<LinkId>& out) {
    out = {LinkId(2 * (src == 2 ? 1 : src)), LinkId(2 * dst + 1)};
  };
  EXPECT_NE(check_shift_symmetry(m, 4, 2, 1, ring, crossed, canon).find("stand for"), std::string::npos);
  // Routes of different lengths.
  const SymmetryRouteFn longer = [](std::int32_t src, std::int32_t dst, std::uint32_t, std::vector<LinkId>& out) {
    out = {LinkId(2 * src), LinkId(2 * dst + 1)};
    if (src >= 2) out.push_back(LinkId(0));
  };
  EXPECT_NE(check_shift_symmetry(m, 4, 2, 1, ring, longer, canon).find("crosses"), std::string::npos);
  EXPECT_NE(check_shift_symmetry(m, 4, 3, 1, ring, own, canon).find("does not divide"), std::string::npos);
}

TEST(CollectiveSymmetry, TheCheckRefusesLinksOrDevicesThatDiffer) {
  const SymmetryPeersFn ring = [](int r, std::vector<int>& out) { out.push_back((r + 1) % 4); };
  const SymmetryRouteFn own = [](std::int32_t src, std::int32_t dst, std::uint32_t, std::vector<LinkId>& out) {
    out = {LinkId(2 * src), LinkId(2 * dst + 1)};
  };
  std::vector<std::int32_t> canon;
  // Rank 2's up-link is slower than rank 0's, the link it would stand for.
  Machine slow = four_devices();
  slow.links[4].bytes_per_s = 5e8;
  EXPECT_NE(check_shift_symmetry(slow, 4, 2, 1, ring, own, canon).find("differ in bandwidth or latency"),
            std::string::npos);
  EXPECT_TRUE(canon.empty());
  // Or has a longer latency.
  Machine late = four_devices();
  late.links[7].latency_s = 2e-6;
  EXPECT_NE(check_shift_symmetry(late, 4, 2, 1, ring, own, canon).find("differ in bandwidth or latency"),
            std::string::npos);
  // Device 3 is of another type than device 1.
  Machine mixed = four_devices();
  mixed.devices[3].type = 1;
  EXPECT_NE(check_shift_symmetry(mixed, 4, 2, 1, ring, own, canon).find("devices 3 and 1 differ in type"),
            std::string::npos);
  // With period 1 the first mismatch is device 3 against device 0.
  EXPECT_NE(check_shift_symmetry(mixed, 4, 1, 1, ring, own, canon).find("devices 3 and 0 differ in type"),
            std::string::npos);
}

TEST(CollectiveSymmetry, ChunksOfTwoSizesRepeatingWithinAPeriodReduce) {
  // A piece of 16·1000 + 8 elements over 16 ranks: chunks of 1000 and 1001 elements in
  // turn (period 2 in the chunk sizes), so one node of 8 ranks still repeats (Ring::periodic).
  const Machine two = machine_preset("cluster:2xh100-sxm-8");
  for (Collective c : {Collective::allreduce, Collective::reducescatter, Collective::allgather}) {
    const CollectiveSpec s = ring_spec(c, 16, 4 * (16 * 1000 + 8), two);
    expect_reduced_equals_full(s, two, 1, 8);
  }
  // Several pieces, each splitting unevenly the same way: 4 pieces of 16·40000 + 8 elements.
  CollectiveSpec s = ring_spec(Collective::allreduce, 16, 4 * 4 * (16 * 40000 + 8), two);
  s.slices = 4;
  expect_reduced_equals_full(s, two, 2, 8);
}

}  // namespace
}  // namespace tessel::sim
