// Collective task graphs against the α-β closed forms of ring and pairwise collectives.
#include "sim/collectives.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/machine.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace tessel::sim {
namespace {

using testing::error_of;
using testing::ps;
using testing::ring_machine;
using testing::switch_machine;

const char* const kModels[] = {"alpha-beta", "flow"};
constexpr double kAlpha = 2e-6;  // per step
constexpr double kB = 1e10;      // bytes/s per rank and direction

SimResult run(Collective c, int n, std::int64_t bytes, const Machine& m, const char* model) {
  SimOptions o;
  o.network = model;
  return simulate(collective_task_graph(c, n, bytes), m, o);
}

// Durations are rounded to whole picoseconds once per transfer: allow one per step.
void expect_closed_form(Collective c, int n, std::int64_t bytes, const Machine& m, const char* model) {
  SimResult r = run(c, n, bytes, m, model);
  const double want = collective_closed_form_s(c, n, static_cast<double>(bytes), kAlpha, kB);
  EXPECT_NEAR(static_cast<double>(ps(r.makespan_s)), want * 1e12, 2.0 * n)
      << to_string(c) << " n=" << n << " S=" << bytes << " " << model;
}

TEST(Collectives, RingAllReduceMatchesItsClosedForm) {
  for (int n : {2, 3, 4, 8, 16})
    for (std::int64_t s : {std::int64_t{4096} * n, std::int64_t{1} << 20, std::int64_t{48} << 20}) {
      Machine m = ring_machine(n, kAlpha, kB);
      for (const char* model : kModels) expect_closed_form(Collective::allreduce, n, s - s % (4 * n), m, model);
    }
}

TEST(Collectives, RingReduceScatterAndAllGatherMatchTheirClosedForms) {
  for (int n : {2, 5, 8})
    for (std::int64_t s : {std::int64_t{4} * n * 1000, std::int64_t{32} << 20}) {
      Machine m = ring_machine(n, kAlpha, kB);
      const std::int64_t bytes = s - s % (4 * n);
      for (const char* model : kModels) {
        expect_closed_form(Collective::reducescatter, n, bytes, m, model);
        expect_closed_form(Collective::allgather, n, bytes, m, model);
      }
    }
}

TEST(Collectives, PairwiseAllToAllOnASwitchMatchesItsClosedForm) {
  for (int n : {2, 4, 8, 16})
    for (std::int64_t s : {std::int64_t{4} * n * 256, std::int64_t{64} << 20}) {
      Machine m = switch_machine(n, kAlpha, kB);
      for (const char* model : kModels) expect_closed_form(Collective::alltoall, n, s - s % (4 * n), m, model);
    }
}

TEST(Collectives, BusBandwidthApproachesTheLinkBandwidth) {
  const int n = 8;
  Machine m = ring_machine(n, kAlpha, kB);
  double previous = 0;
  for (std::int64_t s : {std::int64_t{1} << 16, std::int64_t{1} << 20, std::int64_t{1} << 24, std::int64_t{1} << 28}) {
    SimResult r = run(Collective::allreduce, n, s, m, "flow");
    const double algbw = static_cast<double>(s) / r.makespan_s;
    const double busbw = algbw * bus_bandwidth_factor(Collective::allreduce, n);
    EXPECT_GT(busbw, previous);
    EXPECT_LE(busbw, kB * (1 + 1e-12));
    previous = busbw;
  }
  EXPECT_GT(previous / kB, 0.99);
}

TEST(Collectives, BusFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::allreduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::reducescatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::allgather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::alltoall, 2), 0.5);
}

TEST(Collectives, TaskGraphsMoveWhatTheAlgorithmMoves) {
  const int n = 4;
  const std::int64_t s = 4 * 1000 * n;
  // Ring all-reduce: 2(n−1) steps of n moves of S/n bytes; reductions n(n−1) pairs of touches.
  auto sum = collective_task_graph(Collective::allreduce, n, s).summary();
  EXPECT_EQ(sum.count[static_cast<int>(TaskKind::move)], 2 * (n - 1) * n);
  EXPECT_EQ(sum.bytes_moved, 2 * (n - 1) * s);
  EXPECT_EQ(sum.count[static_cast<int>(TaskKind::touch)], 2 * (n - 1) * n);
  auto a2a = collective_task_graph(Collective::alltoall, n, s).summary();
  EXPECT_EQ(a2a.bytes_moved, (n - 1) * s);
  collective_task_graph(Collective::allgather, n, s).validate();
  collective_task_graph(Collective::reducescatter, 1, s).validate();
}

TEST(Collectives, BadSizesAreErrors) {
  EXPECT_THROW((void)collective_task_graph(Collective::allreduce, 4, 6), Error);   // not whole f32 elements
  EXPECT_THROW((void)collective_task_graph(Collective::allreduce, 8, 16), Error);  // 4 elements, 8 ranks
  EXPECT_THROW((void)collective_task_graph(Collective::allreduce, 0, 16), Error);
  EXPECT_THROW((void)parse_collective("broadcast"), Error);
}


// ---- collectives as NCCL runs them -------------------------------------------------

SimResult run_plan(const CollectivePlan& plan, const Machine& m, const char* model, int channels = 1) {
  SimOptions o;
  o.network = model;
  o.comm_channels = channels;
  o.channels_per_link = true;
  CollectiveSpec spec = plan.spec;
  if (spec.collective == Collective::alltoall && spec.ranks_per_node == 0) spec.window = channels;
  return simulate(collective_task_graph(spec), m, o);
}

double busbw(const CollectivePlan& p, const SimResult& r) {
  return static_cast<double>(p.spec.bytes) / r.makespan_s * bus_bandwidth_factor(p.spec.collective, p.spec.ranks);
}

TEST(Collectives, PipelinedRingAllReduceBusbwIsIndependentOfTheRankCount) {
  // A switch with H100 figures: 450 GB/s per direction, 3.4 µs per hop, HBM 3.35 TB/s for
  // the reductions. Pipelined in pieces, busbw stays at the link bandwidth whatever n.
  const std::int64_t s = std::int64_t{256} << 20;
  double lo = 1e300, hi = 0;
  for (int n : {2, 4, 8, 16, 32}) {
    Machine m = switch_machine(n, 3.4e-6, 450e9, 3.35e12);
    CollectivePlan p = plan_collective(Collective::allreduce, n, s, DType::f32, m, Algorithm::ring);
    for (const char* model : kModels) {
      const double bw = busbw(p, run_plan(p, m, model));
      lo = std::min(lo, bw);
      hi = std::max(hi, bw);
      EXPECT_LE(bw, 450e9 * (1 + 1e-9)) << n << " " << model;
    }
  }
  EXPECT_LT(hi / lo, 1.01) << "busbw from " << lo / 1e9 << " to " << hi / 1e9 << " GB/s";
  EXPECT_GT(lo, 0.98 * 450e9);
}

TEST(Collectives, HierarchicalAllReduceOnTwoAndSixteenNodesMatchesItsFormula) {
  // DGX H100 nodes: 8 GPUs per node, NVLink 450 GB/s (3.4 µs), one 50 GB/s NIC per GPU
  // (14 µs). Pipelined, the busier of the intra-node links (reduce-scatter and all-gather,
  // 2(g−1)/g·S) and the rails (2(N−1)/N·S/g) sets the time, plus one hop latency per step.
  // Two nodes are bound by NVLink, sixteen by the NICs; sixteen needs every phase to keep
  // its own window of pieces in flight (one window over the whole piece: +12%).
  const std::int64_t s = std::int64_t{1} << 30;
  for (int nodes : {2, 16}) {
    Machine m = machine_preset("cluster:" + std::to_string(nodes) + "xh100-sxm-8");
    const double g = 8, N = nodes, S = static_cast<double>(s);
    const double want = std::max(2 * (g - 1) / g * S / 450e9, 2 * (N - 1) / N * S / g / 50e9) +
                        2 * (g - 1) * 3.4e-6 + 2 * (N - 1) * 14e-6;
    CollectivePlan p = plan_collective(Collective::allreduce, nodes * 8, s, DType::f32, m, Algorithm::hierarchical);
    for (const char* model : kModels) {
      SimResult r = run_plan(p, m, model);
      EXPECT_NEAR(r.makespan_s / want, 1.0, 0.02) << nodes << " nodes, " << model << ": " << r.makespan_s
                                                  << " s against " << want;
    }
  }
}

TEST(Collectives, HierarchicalRailWindowHoldsTheRailHopsBandwidthDelayProduct) {
  // Each rail step of a piece waits for the step before it, so W pieces in flight keep a
  // rail hop busy only if W·c/B >= α + c/B (c a piece's rail chunk). DGX H100 nodes with
  // the network's latency raised ten- and twentyfold (14 → 140 and 280 µs), 8 nodes, 1 GiB
  // in 32 pieces: c = 2^30/(64·32) = 512 KiB, so the planner widens the rail window to
  // ⌈1 + α·B/c⌉ = 15 and 28, and the run meets the formula; NCCL's 8 would leave the NICs
  // idle between steps (1.34 and 1.94 times the formula).
  const std::int64_t s = std::int64_t{1} << 30;
  const double c = static_cast<double>(s) / (64 * 32);
  for (double f : {10.0, 20.0}) {
    Machine m = machine_preset("cluster:8xh100-sxm-8");
    for (Link& l : m.links)
      if (l.kind == LinkKind::nic || l.kind == LinkKind::network) l.latency_s *= f;
    CollectivePlan p = plan_collective(Collective::allreduce, 64, s, DType::f32, m, Algorithm::hierarchical);
    ASSERT_EQ(p.spec.slices, 32);
    EXPECT_EQ(p.spec.rail_window, static_cast<int>(std::ceil(1 + f * 14e-6 * 50e9 / c))) << f;
    const double g = 8, N = 8, S = static_cast<double>(s);
    const double want = std::max(2 * (g - 1) / g * S / 450e9, 2 * (N - 1) / N * S / g / 50e9) +
                        2 * (g - 1) * 3.4e-6 + 2 * (N - 1) * f * 14e-6;
    CollectivePlan eight = p;
    eight.spec.rail_window = kPiecesInFlight;
    for (const char* model : kModels) {
      EXPECT_NEAR(run_plan(p, m, model).makespan_s / want, 1.0, 0.05) << f << " " << model;
      EXPECT_GT(run_plan(eight, m, model).makespan_s / want, 1.3) << f << " " << model;
    }
  }
  // The presets (14 µs, 50 GB/s): 8 pieces hold the product up to 32 nodes; beyond, the
  // rail chunks fall below 100 KB (64 nodes: 64 KiB, 12 in flight; 128: 32 KiB, 23).
  for (auto [nodes, w] : {std::pair{2, 8}, {16, 8}, {32, 8}, {64, 12}, {128, 23}}) {
    const CollectivePlan p = plan_collective(Collective::allreduce, nodes * 8, s, DType::f32,
                                             machine_preset("cluster:" + std::to_string(nodes) + "xh100-sxm-8"),
                                             Algorithm::hierarchical);
    EXPECT_EQ(p.spec.slices, 32) << nodes;
    EXPECT_EQ(p.spec.rail_window, w) << nodes;
  }
}

TEST(Collectives, RingWindowHoldsTheHopsBandwidthDelayProduct) {
  // The ring's own window, as the rails': 1 ms hops at 10 GB/s, 16 MiB per rank in 32
  // pieces of c = 512 KiB per step, so the planner keeps ⌈1 + α·B/c⌉ = 21 in flight. The
  // pipelined ring then takes at most the unpipelined α-β time (each step the whole chunk,
  // collective_closed_form_s) and at least a piece's chain of steps and the link's bytes;
  // with 8 in flight it ran 1.6 times the α-β time (4 rounds of the steps' latencies).
  constexpr double alpha = 1e-3, bw = 1e10;
  for (int n : {4, 8}) {
    const Machine m = ring_machine(n, alpha, bw);
    const std::int64_t s = (std::int64_t{16} << 20) * n;
    for (Collective c : {Collective::allreduce, Collective::reducescatter}) {
      const CollectivePlan p = plan_collective(c, n, s, DType::f32, m, Algorithm::ring);
      ASSERT_EQ(p.spec.slices, 32);
      EXPECT_EQ(p.spec.ring_window, 21);
      const double steps = c == Collective::allreduce ? 2.0 * (n - 1) : n - 1.0;
      const double alpha_beta = collective_closed_form_s(c, n, static_cast<double>(s), alpha, bw);
      const double lower = std::max(steps * alpha, steps / n * static_cast<double>(s) / bw);
      CollectivePlan eight = p;
      eight.spec.ring_window = kPiecesInFlight;
      for (const char* model : kModels) {
        const double t = run_plan(p, m, model).makespan_s;
        EXPECT_LE(t, alpha_beta) << n << " " << to_string(c) << " " << model;
        EXPECT_GE(t, lower) << n << " " << to_string(c) << " " << model;
        EXPECT_GT(run_plan(eight, m, model).makespan_s / alpha_beta, 1.5) << n << " " << to_string(c) << " " << model;
      }
    }
  }
  // NVLink (3.4 µs, 450 GB/s) and 512 KiB steps: 8 hold the product (1.5 MB).
  EXPECT_EQ(plan_collective(Collective::allreduce, 8, std::int64_t{1} << 30, DType::f32, machine_preset("h100-sxm-8"))
                .spec.ring_window,
            kPiecesInFlight);
}

TEST(Collectives, TwoNodeAllToAllMatchesTheBusiestLinkBoundWithAnyChannelCount) {
  // Half of what each GPU sends crosses to the other node over its own 50 GB/s NIC.
  Machine m = machine_preset("cluster:2xh100-sxm-8");
  const std::int64_t s = std::int64_t{256} << 20;
  const double bound = 8.0 / 16 * static_cast<double>(s) / 50e9;
  CollectivePlan p = plan_collective(Collective::alltoall, 16, s, DType::f32, m);
  for (int channels : {1, 4})
    for (const char* model : kModels) {
      SimResult r = run_plan(p, m, model, channels);
      EXPECT_NEAR(r.makespan_s / bound, 1.0, 0.05) << model << " channels=" << channels;
    }
}

TEST(Collectives, AllToAllWithEverySendInFlightMatchesTheBusiestLinkBound) {
  // Every send posted at once (window 0, n − 1 channels): each rank's up link carries
  // (n−1)/n·S at 10 GB/s.
  for (int n : {4, 8}) {
    Machine m = switch_machine(n, 2e-6, 1e10);
    const std::int64_t s = std::int64_t{4} * n * 250'000;
    CollectiveSpec spec;
    spec.collective = Collective::alltoall;
    spec.algorithm = Algorithm::pairwise;
    spec.ranks = n;
    spec.bytes = s;
    spec.window = 0;
    const double bound = (n - 1.0) / n * static_cast<double>(s) / 1e10;
    for (const char* model : kModels) {
      SimOptions o;
      o.network = model;
      o.comm_channels = n - 1;
      SimResult r = simulate(collective_task_graph(spec), m, o);
      EXPECT_NEAR(r.makespan_s / bound, 1.0, 0.05) << model << " n=" << n;
    }
  }
}

TEST(Collectives, TunerPicksHierarchicalAcrossNodesAndRingInsideOne) {
  const std::int64_t s = std::int64_t{1} << 30;
  EXPECT_EQ(plan_collective(Collective::allreduce, 16, s, DType::f32, machine_preset("cluster:2xh100-sxm-8")).spec.algorithm,
            Algorithm::hierarchical);
  CollectivePlan one = plan_collective(Collective::allreduce, 8, s, DType::f32, machine_preset("h100-sxm-8"));
  EXPECT_EQ(one.spec.algorithm, Algorithm::ring);
  // Every estimate is latency + bytes / bandwidth, fastest first.
  for (std::size_t k = 0; k < one.estimates.size(); ++k) {
    const auto& e = one.estimates[k];
    EXPECT_NEAR(e.time_s, e.latency_s + static_cast<double>(s) / e.algbw_bytes_per_s, 1e-12);
    if (k > 0) {
      EXPECT_LE(one.estimates[k - 1].time_s, e.time_s);
    }
  }
  // Small messages: the tree's log2(n) latency beats the ring's 2(n−1) hops.
  EXPECT_EQ(plan_collective(Collective::allreduce, 8, 4096, DType::f32, machine_preset("h100-sxm-8")).spec.algorithm,
            Algorithm::tree);
}

TEST(Collectives, TheHierarchicalEstimateTakesTheBusiestLink) {
  // Every transfer on its route, the busiest link's time. The rails carry 2(N − 1)/N · S/g
  // per hop (N = 8 nodes, g = 8); NVLink's 2(g − 1)/g · S at 450 GB/s is faster.
  const std::int64_t s = std::int64_t{1} << 30;
  const double rail_bytes = 2.0 * 7 / 8 * static_cast<double>(s) / 8;
  auto hierarchical_algbw = [&](const char* preset) {
    const CollectivePlan p = plan_collective(Collective::allreduce, 64, s, DType::f32, machine_preset(preset));
    const auto it = std::find_if(p.estimates.begin(), p.estimates.end(),
                                 [](const auto& e) { return e.algorithm == Algorithm::hierarchical; });
    EXPECT_NE(it, p.estimates.end()) << preset;
    return it == p.estimates.end() ? 0.0 : it->algbw_bytes_per_s;
  };
  // rail: groups of 2 nodes: node 0 → 1 stays on its rail switch (a 50 GB/s NIC), node 1 → 2
  // crosses one of 8 spine uplinks of 2 · 50 / 8 = 12.5 GB/s, alone on it.
  EXPECT_NEAR(hierarchical_algbw("rail:8xh100-sxm-8,group=2") / (static_cast<double>(s) / (rail_bytes / 12.5e9)), 1.0,
              1e-12);
  // fat-tree, 2 nodes per leaf, 4:1: one uplink per leaf of 2 · 8 · 50 / 4 = 200 GB/s,
  // which the hops of all 8 rails from the leaf's second node to the next leaf share.
  EXPECT_NEAR(hierarchical_algbw("fat-tree:8xh100-sxm-8,leaf=2,oversubscription=4") /
                  (static_cast<double>(s) / (8 * rail_bytes / 200e9)),
              1.0, 1e-12);
  // cluster: every rail hop on its own NICs: 50 GB/s.
  EXPECT_NEAR(hierarchical_algbw("cluster:8xh100-sxm-8") / (static_cast<double>(s) / (rail_bytes / 50e9)), 1.0, 1e-12);
}

TEST(Collectives, AnAlgorithmThatDoesNotFitIsAnErrorNamingIt) {
  Machine one = machine_preset("h100-sxm-8");
  const std::string e1 = error_of([&] {
    (void)plan_collective(Collective::allreduce, 8, 1 << 20, DType::f32, one, Algorithm::hierarchical);
  });
  EXPECT_NE(e1.find("--algorithm: 'hierarchical'"), std::string::npos) << e1;
  EXPECT_NE(e1.find("two or more nodes"), std::string::npos) << e1;
  const std::string e2 =
      error_of([&] { (void)plan_collective(Collective::alltoall, 8, 1 << 20, DType::f32, one, Algorithm::ring); });
  EXPECT_NE(e2.find("'ring' does not fit alltoall"), std::string::npos) << e2;
  EXPECT_THROW((void)parse_algorithm("nvls"), Error);
}

TEST(Collectives, TreeAndHierarchicalAllReduceMoveWhatTheyShould) {
  // Double binary tree: each half goes up n − 1 edges and down n − 1 edges.
  CollectiveSpec t;
  t.algorithm = Algorithm::tree;
  t.ranks = 6;
  t.bytes = 4 * 6000;
  auto sum = collective_task_graph(t).summary();
  EXPECT_EQ(sum.bytes_moved, 2 * (t.ranks - 1) * t.bytes);
  // Hierarchical, 2 nodes of 4: intra reduce-scatter and all-gather 2·(3/4)·S per node
  // rank, rails 2·(1/2)·S/4 per rank.
  CollectiveSpec h;
  h.algorithm = Algorithm::hierarchical;
  h.ranks = 8;
  h.ranks_per_node = 4;
  h.bytes = 4 * 8000;
  h.slices = 2;
  auto hs = collective_task_graph(h).summary();
  EXPECT_EQ(hs.bytes_moved, 8 * (2 * 3 * h.bytes / 4 + 2 * h.bytes / 2 / 4));
  h.ranks_per_node = 3;
  EXPECT_THROW((void)collective_task_graph(h), Error);
}

TEST(Collectives, PublishedFiguresAreReportedForDgxMachinesOnly) {
  auto h = published_busbw(Collective::allreduce, 8, machine_preset("h100-sxm-8"));
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->low_GBps, 460);
  EXPECT_EQ(h->high_GBps, 480);
  EXPECT_TRUE(published_busbw(Collective::allreduce, 8, machine_preset("a100-sxm-8")).has_value());
  EXPECT_FALSE(published_busbw(Collective::alltoall, 8, machine_preset("h100-sxm-8")).has_value());
  EXPECT_FALSE(published_busbw(Collective::allreduce, 16, machine_preset("cluster:2xh100-sxm-8")).has_value());
}

}  // namespace
}  // namespace tessel::sim
