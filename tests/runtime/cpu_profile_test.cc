// The CPU executor's in-place kernel profile (CpuExecutor::run_profiled): every compute
// task of a run timed again, after the run, on the run's own buffers.
#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/memory_plan.h"
#include "core/partition.h"
#include "core/workloads.h"
#include "runtime/cpu_executor.h"
#include "runtime/kernels.h"

namespace tessel::runtime {
namespace {

TaskGraph on_one_device(const Graph& g) {
  return lower(g, decomposition_from_parts(g, 1, std::vector<std::vector<int>>(g.size(), std::vector<int>())));
}

double total(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x > 0 ? x : 0;
  return sum;
}

// Every compute task has a positive hot and cold figure (cold never below hot), every
// other task -1; the outputs are the run's, bit for bit the same as a plain run's.
void expect_profile_of(const TaskGraph& tg, const TaskProfile& p, const std::string& label) {
  ASSERT_EQ(p.hot_s.size(), tg.size()) << label;
  ASSERT_EQ(p.cold_s.size(), tg.size()) << label;
  std::int64_t compute = 0;
  for (std::size_t i = 0; i < tg.size(); ++i) {
    if (tg.tasks[i].kind != TaskKind::compute) {
      EXPECT_EQ(p.hot_s[i], -1.0) << label << " task " << i;
      EXPECT_EQ(p.cold_s[i], -1.0) << label << " task " << i;
      continue;
    }
    ++compute;
    EXPECT_GT(p.hot_s[i], 0) << label << " task " << i;
    EXPECT_GE(p.cold_s[i], p.hot_s[i]) << label << " task " << i;
  }
  EXPECT_EQ(p.tasks, compute) << label;
}

void expect_same_outputs(const Graph& g, const RunResult& a, const RunResult& b, const std::string& label) {
  for (NodeId id : g.outputs()) {
    const std::string& name = g.node(id).name;
    const Tensor &x = a.outputs.at(name), &y = b.outputs.at(name);
    ASSERT_EQ(x.data.size(), y.data.size()) << label;
    EXPECT_EQ(0, std::memcmp(x.data.data(), y.data.data(), x.data.size() * sizeof(x.data[0])))
        << label << " output " << name;
  }
}

TEST(InPlaceProfile, TimesEveryComputeTaskAndLeavesTheRunsOutputs) {
  const Graph g = build_workload("llama-block:model=tiny,seq=8");
  const TensorMap inputs = random_inputs(g, 3);
  const TaskGraph tg = lower(g, split_largest(g, 2));
  CpuExecutor exec({Policy::async, false});
  const RunResult plain = exec.run(g, tg, inputs);
  TaskProfile p;
  const RunResult profiled = exec.run_profiled(g, tg, inputs, {0.0005}, &p);
  expect_profile_of(tg, p, "2 devices");
  expect_same_outputs(g, plain, profiled, "2 devices");
  // The measured timeline is the run's alone: one span per task, none from the profile.
  EXPECT_EQ(profiled.timeline.spans.size(), tg.size());
  // Without cold calls, the cold figures repeat the hot ones.
  TaskProfile hot_only;
  (void)exec.run_profiled(g, tg, inputs, {0.0005, 0, false}, &hot_only);
  EXPECT_EQ(hot_only.hot_s, hot_only.cold_s);
}

// Devices with different numbers of compute tasks (an uneven split: 3 devices on a
// chain whose rows are not a multiple of 3), and a graph too large to preallocate
// (buffers freed after their last reader: the profile allocates a task's inputs again).
TEST(InPlaceProfile, UnevenDevicesAndBuffersFreedDuringTheRun) {
  const Graph g = build_workload("chain:m=7,k=16,n=16,p=16");
  const TensorMap inputs = random_inputs(g, 4);
  const TensorMap want = evaluate_reference(g, inputs);
  const TaskGraph tg = lower(g, split_largest(g, 3));
  for (std::int64_t limit : {std::int64_t{0}, std::int64_t{1}}) {
    CpuOptions o{Policy::async, false};
    o.preallocate_limit_bytes = limit;
    TaskProfile p;
    const RunResult r = CpuExecutor(o).run_profiled(g, tg, inputs, {0.0005}, &p);
    const std::string label = limit ? "freed after the last reader" : "preallocated";
    expect_profile_of(tg, p, label);
    for (NodeId id : g.outputs()) {
      const std::string& name = g.node(id).name;
      EXPECT_LE(compare(r.outputs.at(name), want.at(name)).normwise_rel, 1e-5) << label;
    }
  }
}

// A memory-capped graph: its buffers share each device's arena; re-running a task after
// the run overwrites whatever lies there now, which must not change the run's outputs.
TEST(InPlaceProfile, MemoryCappedGraph) {
  const Graph g = build_workload("llama-block:model=tiny");
  const TensorMap inputs = random_inputs(g, 5);
  const TensorMap want = evaluate_reference(g, inputs);
  const TaskGraph tg = lower(g, split_largest(g, 2));
  std::int64_t peak = 0;
  for (std::int64_t x : order_peak_bytes(tg)) peak = std::max(peak, x);
  MemoryPlanOptions mo;
  mo.capacity_bytes.assign(2, peak / 2);
  const MemoryPlan plan = plan_memory(tg, mo);
  ASSERT_GT(plan.stats.evicts + plan.stats.drops + plan.stats.host_inputs, 0);
  TaskProfile p;
  const RunResult r = CpuExecutor({Policy::async, false}).run_profiled(g, plan.graph, inputs, {0.0005}, &p);
  expect_profile_of(plan.graph, p, "capped");
  for (NodeId id : g.outputs()) {
    const std::string& name = g.node(id).name;
    EXPECT_LE(compare(r.outputs.at(name), want.at(name)).normwise_rel, 1e-5);
  }
}

// ffn's kernels (about 100 KiB of data each) stay in the per-core cache when called in a
// loop; after the eviction pass their data and code come from farther out, so that in
// sum the cold calls take longer: the eviction between cold calls works. The comparison
// is of sums, which a loaded machine does not turn around.
TEST(InPlaceProfile, ColdCallsFindTheirDataOutOfTheCache) {
  const Graph g = build_workload("ffn:tokens=64,dim=64,hidden=64");
  const TaskGraph tg = on_one_device(g);
  TaskProfile p;
  (void)CpuExecutor({Policy::async, false}).run_profiled(g, tg, random_inputs(g, 1), {0.004}, &p);
  EXPECT_GT(total(p.cold_s), total(p.hot_s));
}

TEST(InPlaceProfile, ABlockWithAThousandTimesTheFlopsTakesLonger) {
  const Graph small = build_workload("chain:size=16"), big = build_workload("chain:size=160");
  TaskProfile ps, pb;
  CpuExecutor exec({Policy::async, false});
  (void)exec.run_profiled(small, on_one_device(small), random_inputs(small, 1), {0.002}, &ps);
  (void)exec.run_profiled(big, on_one_device(big), random_inputs(big, 1), {0.002}, &pb);
  EXPECT_GT(total(pb.hot_s), 10 * total(ps.hot_s));
}

TEST(InPlaceProfile, BadOptionsAreErrors) {
  const Graph g = build_workload("chain:size=8");
  const TaskGraph tg = on_one_device(g);
  const TensorMap inputs = random_inputs(g, 1);
  CpuExecutor exec({Policy::async, false});
  TaskProfile p;
  EXPECT_THROW((void)exec.run_profiled(g, tg, inputs, {0}, &p), Error);
  EXPECT_THROW((void)exec.run_profiled(g, tg, inputs, {0.001, -1}, &p), Error);
  EXPECT_THROW((void)exec.run_profiled(g, tg, inputs, {0.001}, nullptr), Error);
}

}  // namespace
}  // namespace tessel::runtime
