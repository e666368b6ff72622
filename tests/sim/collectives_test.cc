// Collective task graphs against the α-β closed forms of REFERENCES.md.
#include "sim/collectives.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace tessel::sim {
namespace {

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

}  // namespace
}  // namespace tessel::sim
