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
#include "runtime/measure.h"

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

double makespan(const Timeline& tl) {
  double end = 0;
  for (const Span& sp : tl.spans) end = std::max(end, sp.end_s);
  return end;
}

// Block b of every einsum node on device b % devices: `parts` blocks along dimension 0.
TaskGraph rows_round_robin(const Graph& g, int devices, int parts) {
  std::vector<std::vector<int>> p;
  for (const Node& n : g.nodes()) {
    p.push_back(std::vector<int>(n.kind == NodeKind::einsum ? n.einsum.rank() : 0, 1));
    if (n.kind == NodeKind::einsum) p.back()[0] = parts;
  }
  return lower(g, decomposition_from_parts(g, devices, p));
}

// Preallocated and freed after the last reader (a graph too large to preallocate: the
// profile allocates each task's buffers again for its turn); f32 and f64.
TEST(InPlaceProfile, TimesEveryComputeTaskAndLeavesTheRunsOutputs) {
  for (const char* w : {"llama-block:model=tiny,seq=8", "ffn:tokens=8,dim=8,hidden=16,dtype=f64"}) {
    const Graph g = build_workload(w);
    const TensorMap inputs = random_inputs(g, 3);
    const TaskGraph tg = lower(g, split_largest(g, 2));
    for (std::int64_t limit : {std::int64_t{0}, std::int64_t{1}}) {
      const std::string label = std::string(w) + (limit ? " freed after the last reader" : " preallocated");
      CpuOptions o{Policy::async, false};
      o.preallocate_limit_bytes = limit;
      CpuExecutor exec(o);
      const RunResult plain = exec.run(g, tg, inputs);
      const ProfiledRun profiled = exec.run_profiled(g, tg, inputs, {0.0005});
      expect_profile_of(tg, profiled.profile, label);
      expect_same_outputs(g, plain, profiled.run, label);
    }
  }
}

// The measured timeline is the run's alone: with 100 ms of hot calls per compute task the
// profile takes far longer than the run, whose makespan stays below one task's profile.
// (At 20 ms the run itself, a few µs of work, took 50 ms under ThreadSanitizer on a loaded
// machine: scripts/tsan.sh.)
TEST(InPlaceProfile, TheRunsTimelineLeavesTheProfileOut) {
  constexpr double kProfileSecondsPerTask = 0.1;
  const Graph g = build_workload("chain:size=16");
  const TaskGraph tg = lower(g, split_largest(g, 2));
  const ProfiledRun r =
      CpuExecutor({Policy::async, false}).run_profiled(g, tg, random_inputs(g, 1), {kProfileSecondsPerTask, 0, false});
  expect_profile_of(tg, r.profile, "chain");
  EXPECT_EQ(r.run.timeline.spans.size(), tg.size());
  EXPECT_LT(makespan(r.run.timeline), kProfileSecondsPerTask);
  // Without cold calls, the cold figures repeat the hot ones.
  EXPECT_EQ(r.profile.hot_s, r.profile.cold_s);
}

// Devices with different numbers of compute tasks (3 row blocks on 2 devices: 2 and 1 per
// node) and a device with none (1 block per node on 2 devices), under both policies and
// with buffers freed after their last reader as well.
TEST(InPlaceProfile, DevicesWithFewerTasksOrNone) {
  const Graph g = build_workload("chain:m=6,k=8,n=8,p=8");
  const TensorMap inputs = random_inputs(g, 4);
  const TensorMap want = evaluate_reference(g, inputs);
  for (int parts : {3, 1}) {
    const TaskGraph tg = rows_round_robin(g, 2, parts);
    std::vector<int> per_device(2, 0);
    for (const Task& t : tg.tasks) per_device[t.device.index()] += t.kind == TaskKind::compute ? 1 : 0;
    if (parts == 3) {
      ASSERT_EQ(per_device[0], 2 * per_device[1]);
    } else {
      ASSERT_EQ(per_device[1], 0);
    }
    for (Policy policy : {Policy::async, Policy::bsp})
      for (std::int64_t limit : {std::int64_t{0}, std::int64_t{1}}) {
        const std::string label = std::to_string(parts) + " blocks " + std::string(to_string(policy)) +
                                  (limit ? " freed" : " preallocated");
        CpuOptions o{policy, false};
        o.preallocate_limit_bytes = limit;
        const ProfiledRun r = CpuExecutor(o).run_profiled(g, tg, inputs, {0.0005});
        expect_profile_of(tg, r.profile, label);
        for (NodeId id : g.outputs()) {
          const std::string& name = g.node(id).name;
          EXPECT_LE(compare(r.run.outputs.at(name), want.at(name)).normwise_rel, 1e-5) << label;
        }
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
  const ProfiledRun r = CpuExecutor({Policy::async, false}).run_profiled(g, plan.graph, inputs, {0.0005});
  expect_profile_of(plan.graph, r.profile, "capped");
  for (NodeId id : g.outputs()) {
    const std::string& name = g.node(id).name;
    EXPECT_LE(compare(r.run.outputs.at(name), want.at(name)).normwise_rel, 1e-5);
  }
}

// ffn's kernels (about 100 KiB of data each) stay in the per-core cache when called in a
// loop; after the eviction pass their data and code come from farther out, so that in
// sum the cold calls take longer: the eviction between cold calls works. The comparison
// is of sums, which a loaded machine does not turn around.
TEST(InPlaceProfile, ColdCallsFindTheirDataOutOfTheCache) {
  const Graph g = build_workload("ffn:tokens=64,dim=64,hidden=64");
  const TaskGraph tg = on_one_device(g);
  const ProfiledRun r = CpuExecutor({Policy::async, false}).run_profiled(g, tg, random_inputs(g, 1), {0.004});
  EXPECT_GT(total(r.profile.cold_s), total(r.profile.hot_s));
}

// With `dram`, a third time per compute task, its operands flushed from every cache level
// before each call: never below its cold time, -1 for other tasks, and the outputs stay
// the run's (flushing writes dirty lines back). Without it, no DRAM times.
TEST(InPlaceProfile, DramCallsAreTimedAfterTheOperandsLeftEveryCache) {
  const Graph g = build_workload("llama-block:model=tiny");
  const TensorMap inputs = random_inputs(g, 5);
  const TaskGraph tg = lower(g, split_largest(g, 2));
  CpuExecutor exec({Policy::async, false});
  const RunResult plain = exec.run(g, tg, inputs);
  InPlaceProfileOptions o{0.0005};
  o.dram = true;
  const ProfiledRun r = exec.run_profiled(g, tg, inputs, o);
  expect_profile_of(tg, r.profile, "dram");
  expect_same_outputs(g, plain, r.run, "dram");
  EXPECT_EQ(r.profile.dram_flushed, can_flush_caches());
  ASSERT_EQ(r.profile.dram_s.size(), tg.size());
  for (std::size_t i = 0; i < tg.size(); ++i) {
    if (tg.tasks[i].kind != TaskKind::compute) {
      EXPECT_EQ(r.profile.dram_s[i], -1.0) << i;
      continue;
    }
    EXPECT_GE(r.profile.dram_s[i], r.profile.cold_s[i]) << i;
  }
  EXPECT_TRUE(exec.run_profiled(g, tg, inputs, {0.0005}).profile.dram_s.empty());
  o.cold = false;  // no cold calls: nothing to flush after
  const ProfiledRun hot_only = exec.run_profiled(g, tg, inputs, o);
  EXPECT_TRUE(hot_only.profile.dram_s.empty());
  EXPECT_FALSE(hot_only.profile.dram_flushed);
}

// In sum the calls from DRAM take longer than the cold ones, whose data the last-level
// cache still held (sums over ffn's kernels, which a loaded machine does not turn around).
TEST(InPlaceProfile, TimingDramCallsTakeLongerThanColdOnes) {
  if (!can_flush_caches()) GTEST_SKIP() << "this CPU cannot flush its caches";
  const Graph g = build_workload("ffn:tokens=64,dim=64,hidden=64");
  const TaskGraph tg = on_one_device(g);
  InPlaceProfileOptions o{0.004};
  o.dram = true;
  const ProfiledRun r = CpuExecutor({Policy::async, false}).run_profiled(g, tg, random_inputs(g, 1), o);
  EXPECT_GT(total(r.profile.dram_s), total(r.profile.cold_s));
}

TEST(InPlaceProfile, ABlockWithAThousandTimesTheFlopsTakesLonger) {
  const Graph small = build_workload("chain:size=16"), big = build_workload("chain:size=160");
  CpuExecutor exec({Policy::async, false});
  const ProfiledRun ps = exec.run_profiled(small, on_one_device(small), random_inputs(small, 1), {0.002});
  const ProfiledRun pb = exec.run_profiled(big, on_one_device(big), random_inputs(big, 1), {0.002});
  EXPECT_GT(total(pb.profile.hot_s), 10 * total(ps.profile.hot_s));
}

TEST(InPlaceProfile, BadOptionsAreErrors) {
  const Graph g = build_workload("chain:size=8");
  const TaskGraph tg = on_one_device(g);
  const TensorMap inputs = random_inputs(g, 1);
  CpuExecutor exec({Policy::async, false});
  EXPECT_THROW((void)exec.run_profiled(g, tg, inputs, {0}), Error);
  EXPECT_THROW((void)exec.run_profiled(g, tg, inputs, {0.001, -1}), Error);
  EXPECT_THROW((void)exec.run_profiled(g, tg, inputs, {0.001, 3}), Error);  // less than one float to write
  // The executor is still usable after a refused profile.
  EXPECT_EQ(exec.run_profiled(g, tg, inputs, {0.0005}).profile.tasks, 2);
}

}  // namespace
}  // namespace tessel::runtime
