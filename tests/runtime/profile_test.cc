// KernelProfiler: one kernel per distinct (node, block shape), measured per round.
#include "runtime/profile.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/error.h"
#include "core/partition.h"
#include "core/workloads.h"

namespace tessel::runtime {
namespace {

TEST(KernelProfiler, OneKernelPerDistinctNodeAndBlockShape) {
  // An uneven split gives one node blocks of two shapes: 3 rows in 2 parts is 2 + 1.
  Graph g = build_workload("chain:m=3,k=8,n=8,p=8");
  std::vector<std::vector<int>> parts;
  for (const Node& n : g.nodes()) parts.push_back(std::vector<int>(n.kind == NodeKind::einsum ? n.einsum.rank() : 0, 1));
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g.node(NodeId(static_cast<std::int32_t>(i))).kind == NodeKind::einsum) parts[i][0] = 2;
  TaskGraph tg = lower(g, decomposition_from_parts(g, 2, parts));
  std::set<std::pair<std::int32_t, Shape>> distinct;
  for (const Task& t : tg.tasks)
    if (t.kind == TaskKind::compute) distinct.insert({t.node.value, t.src.shape()});

  ASSERT_GT(distinct.size(), 2u);  // two products, one of them (at least) with blocks of two shapes

  KernelProfiler p(g, tg, {2, 0.0005});
  EXPECT_EQ(p.kernels(), distinct.size());
  EXPECT_THROW((void)p.task_seconds(0), Error);  // nothing measured yet
  p.round();
  p.round();
  EXPECT_EQ(p.rounds(), 2);
  for (int r = 0; r < 2; ++r) {
    std::vector<double> s = p.task_seconds(r);
    ASSERT_EQ(s.size(), tg.size());
    std::map<std::pair<std::int32_t, Shape>, double> seen;
    for (std::size_t i = 0; i < tg.size(); ++i) {
      const Task& t = tg.tasks[i];
      if (t.kind != TaskKind::compute) {
        EXPECT_EQ(s[i], -1.0) << i;
        continue;
      }
      EXPECT_GT(s[i], 0) << i;
      // Tasks of one kernel share its figure.
      auto [it, fresh] = seen.try_emplace({t.node.value, t.src.shape()}, s[i]);
      if (!fresh) {
        EXPECT_EQ(it->second, s[i]) << i;
      }
    }
  }
  EXPECT_THROW((void)p.task_seconds(2), Error);
  // Cold calls: one figure per task of each kernel as well, -1 for every other task.
  for (int r = 0; r < 2; ++r) {
    std::vector<double> cold = p.task_seconds_cold(r);
    ASSERT_EQ(cold.size(), tg.size());
    for (std::size_t i = 0; i < tg.size(); ++i) {
      if (tg.tasks[i].kind != TaskKind::compute) {
        EXPECT_EQ(cold[i], -1.0) << i;
      } else {
        EXPECT_GT(cold[i], 0) << i;
      }
    }
  }
  EXPECT_THROW((void)p.task_seconds_cold(2), Error);
}

// ffn's kernels (about 100 KiB of data each) stay in the per-core cache when called in a
// loop; after the eviction pass their data and code come from farther out, so that in
// sum the cold calls take longer (1.06-1.16x here, also with both cores busy): the
// eviction between cold calls works. The comparison is of sums, which a loaded machine
// does not turn around.
TEST(KernelProfiler, ColdCallsFindTheirDataOutOfTheCache) {
  Graph g = build_workload("ffn:tokens=64,dim=64,hidden=64");
  TaskGraph tg = lower(g, decomposition_from_parts(g, 1, std::vector<std::vector<int>>(g.size(), std::vector<int>())));
  KernelProfiler p(g, tg, {1, 0.004});
  p.round();
  std::vector<double> hot = p.task_seconds(0), cold = p.task_seconds_cold(0);
  double hot_sum = 0, cold_sum = 0;
  for (std::size_t i = 0; i < tg.size(); ++i)
    if (hot[i] > 0) {
      hot_sum += hot[i];
      cold_sum += cold[i];
    }
  EXPECT_GT(cold_sum, hot_sum);
}

TEST(KernelProfiler, ABlockWithAThousandTimesTheFlopsTakesLonger) {
  Graph small = build_workload("chain:size=16");
  Graph big = build_workload("chain:size=160");
  auto on_one_device = [](const Graph& g) {
    return lower(g, decomposition_from_parts(g, 1, std::vector<std::vector<int>>(g.size(), std::vector<int>())));
  };
  TaskGraph ts = on_one_device(small), tb = on_one_device(big);
  KernelProfiler ps(small, ts, {1, 0.002}), pb(big, tb, {1, 0.002});
  ps.round();
  pb.round();
  auto total = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x > 0 ? x : 0;
    return sum;
  };
  EXPECT_GT(total(pb.task_seconds(0)), 10 * total(ps.task_seconds(0)));
}

TEST(KernelProfiler, BadOptionsAreErrors) {
  Graph g = build_workload("chain:size=8");
  TaskGraph tg = lower(g, decomposition_from_parts(g, 1, std::vector<std::vector<int>>(g.size(), std::vector<int>())));
  EXPECT_THROW(KernelProfiler(g, tg, {0, 0.001}), Error);
  EXPECT_THROW(KernelProfiler(g, tg, {1, 0}), Error);
  EXPECT_THROW(KernelProfiler(g, tg, {1, 0.001, -1}), Error);
}

}  // namespace
}  // namespace tessel::runtime
