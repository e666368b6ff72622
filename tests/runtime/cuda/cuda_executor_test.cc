// The CUDA executor on a real GPU (ctest label gpu). Every test skips, naming what was
// looked for and what was found, where cudaGetDeviceCount finds no device.
#include "runtime/cuda/cuda_executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/memory_plan.h"
#include "core/partition.h"
#include "core/workloads.h"
#include "planner/strategy.h"

namespace tessel::runtime {
namespace {

class CudaExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      gpus_ = cuda_devices();
    } catch (const Error& e) {
      GTEST_SKIP() << "looked for a CUDA GPU: " << e.what();
    }
  }
  std::vector<CudaDeviceInfo> gpus_;
};

// Largest normwise error of any output against the reference.
double worst_error(const Graph& g, const TensorMap& got, const TensorMap& want) {
  double worst = 0;
  for (NodeId id : g.outputs()) {
    const Node& n = g.node(id);
    const Difference d = compare(got.at(n.name), want.at(n.name));
    worst = std::max(worst, std::isnan(d.normwise_rel) ? INFINITY : d.normwise_rel);
  }
  return worst;
}

DType dtype_of(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::einsum) return n.dtype;
  return DType::f32;
}

const std::vector<std::string>& workload_specs() {
  static const std::vector<std::string> specs = {
      "chain",       "chain-sum",          "chain-sum:skewed=1",          "ffn",
      "llama-block:model=tiny", "chain:dtype=bf16", "ffn:dtype=bf16", "llama-block:model=tiny,dtype=bf16",
      "ffn:dtype=f16", "chain:dtype=f64"};
  return specs;
}

TEST_F(CudaExecutorTest, EveryWorkloadMatchesTheReferenceOnVirtualDevicesUnderBothPolicies) {
  // One executor per policy for all runs: each generated kernel is compiled once.
  CudaExecutor async_exec(CudaOptions{Policy::async, 1}), bsp_exec(CudaOptions{Policy::bsp, 1});
  for (const std::string& spec : workload_specs()) {
    const Graph g = build_workload(spec);
    const TensorMap inputs = random_inputs(g, 7);
    const TensorMap want = evaluate_reference(g, inputs, /*storage_rounding=*/true);
    for (int devices : {1, 2, 4})
      for (Policy policy : {Policy::async, Policy::bsp}) {
        SCOPED_TRACE(spec + " on " + std::to_string(devices) + " virtual devices, " + std::string(to_string(policy)));
        CudaExecutor& exec = policy == Policy::async ? async_exec : bsp_exec;
        const TaskGraph tg = lower(g, split_largest(g, devices));
        const RunResult r = exec.run(g, tg, inputs);
        EXPECT_LE(worst_error(g, r.outputs, want), output_tolerance(dtype_of(g)));
        EXPECT_EQ(r.timeline.spans.size(), tg.tasks.size());
      }
  }
}

TEST_F(CudaExecutorTest, PlannerStrategiesMatchTheReference) {
  const Graph g = build_workload("llama-block:model=tiny,seq=64");
  const TensorMap inputs = random_inputs(g, 3);
  const TensorMap want = evaluate_reference(g, inputs);
  CudaExecutor exec(CudaOptions{Policy::async, 1});
  for (const char* s : {"eindecomp", "data-parallel", "megatron", "sqrt-split"}) {
    SCOPED_TRACE(s);
    planner::PlanOptions o;
    o.devices = 4;
    const TaskGraph tg = lower(g, planner::plan(g, s, o).decomposition);
    EXPECT_LE(worst_error(g, exec.run(g, tg, inputs).outputs, want), output_tolerance(DType::f32));
  }
}

TEST_F(CudaExecutorTest, TimelineRespectsDependenciesAndBspPhases) {
  const Graph g = build_workload("ffn");
  const TaskGraph tg = lower(g, split_largest(g, 4));
  const TensorMap inputs = random_inputs(g, 1);
  const double slack_s = 2e-6;  // CUDA events resolve about half a microsecond
  for (Policy policy : {Policy::async, Policy::bsp}) {
    CudaExecutor exec(CudaOptions{policy, 1});
    const RunResult r = exec.run(g, tg, inputs);
    ASSERT_EQ(r.timeline.spans.size(), tg.tasks.size());
    for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
      const Span& s = r.timeline.spans[i];
      EXPECT_EQ(s.task.index(), i);
      EXPECT_GE(s.start_s, -slack_s);
      EXPECT_LE(s.start_s, s.end_s);
      for (TaskId d : tg.tasks[i].deps) EXPECT_GE(s.start_s + slack_s, r.timeline.spans[d.index()].end_s) << "task " << i;
    }
    if (policy != Policy::bsp) continue;
    for (std::size_t i = 0; i < tg.tasks.size(); ++i)
      for (std::size_t j = 0; j < tg.tasks.size(); ++j)
        if (bsp_phase(tg.tasks[j]) < bsp_phase(tg.tasks[i])) {
          EXPECT_GE(r.timeline.spans[i].start_s + slack_s, r.timeline.spans[j].end_s) << i << " after " << j;
        }
  }
}

TEST_F(CudaExecutorTest, RepeatedRunsGiveTheSameBits) {
  const Graph g = build_workload("llama-block:model=tiny");
  const TaskGraph tg = lower(g, split_largest(g, 2));
  const TensorMap inputs = random_inputs(g, 5);
  CudaExecutor exec(CudaOptions{Policy::async, 1});
  const RunResult a = exec.run(g, tg, inputs);
  const RunResult b = exec.run(g, tg, inputs);
  for (const auto& [name, t] : a.outputs) EXPECT_EQ(t.data, b.outputs.at(name).data) << name;
}

TEST_F(CudaExecutorTest, HighPriorityCommunicationAndTf32StillMatch) {
  const Graph g = build_workload("chain:size=512");
  const TensorMap inputs = random_inputs(g, 2);
  const TensorMap want = evaluate_reference(g, inputs);
  CudaOptions o{Policy::async, 1};
  o.comm_priority = CommPriority::high;
  o.tf32 = true;
  CudaExecutor exec(o);
  const TaskGraph tg = lower(g, split_largest(g, 4));
  EXPECT_LE(worst_error(g, exec.run(g, tg, inputs).outputs, want), 5e-3);  // tf32: 10-bit mantissa products
}

TEST_F(CudaExecutorTest, OutOfDeviceMemoryNamesTheDeviceAndTheBytes) {
  GraphBuilder b;
  const NodeId big = b.constant({400000, 400000}, 1.0, "big");  // 640 GB of f32
  b.output(big, "out");
  const Graph g = b.build();
  CudaExecutor exec(CudaOptions{Policy::async, 1});
  try {
    (void)exec.run(g, lower(g, split_largest(g, 1)), {});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("out of device memory on GPU 0"), std::string::npos) << m;
    EXPECT_NE(m.find("bytes are free"), std::string::npos) << m;
  }
  // The executor stays usable.
  const Graph small = build_workload("chain:size=64");
  const TensorMap inputs = random_inputs(small, 1);
  EXPECT_LE(worst_error(small, exec.run(small, lower(small, split_largest(small, 2)), inputs).outputs,
                        evaluate_reference(small, inputs)),
            output_tolerance(DType::f32));
}

// Memory-capped graphs (core/memory_plan.h): buffers at their planned offsets, evicts and
// loads as copies to and from page-locked host memory on the copy stream, accumulators
// filled before their first writer, outputs copied out by their output tasks. Written
// on a machine without a GPU: first run by scripts/gpu-validate.sh.
TEST_F(CudaExecutorTest, MemoryCappedGraphsMatchTheReference) {
  CudaExecutor exec(CudaOptions{Policy::async, 1});  // poisons write-once buffers (the default)
  CudaOptions plain{Policy::async, 1};
  plain.poison = false;
  CudaExecutor plain_exec(plain);
  for (const char* spec : {"llama-block:model=tiny", "chain-sum", "ffn:dtype=bf16"}) {
    const Graph g = build_workload(spec);
    const TensorMap inputs = random_inputs(g, 5);
    const TensorMap want = evaluate_reference(g, inputs, /*storage_rounding=*/true);
    for (int devices : {1, 2, 4})
      for (double fraction : {0.75, 0.5}) {
        SCOPED_TRACE(std::string(spec) + " on " + std::to_string(devices) + " virtual devices, cap " +
                     std::to_string(fraction) + " of the uncapped peak");
        const TaskGraph tg = lower(g, split_largest(g, devices));
        MemoryPlanOptions o;
        o.capacity_bytes = MemoryCap{true, fraction}.bytes_for(order_peak_bytes(tg));
        MemoryPlan plan;
        try {
          plan = plan_memory(tg, o);
        } catch (const Error&) {
          continue;  // a cap below one task's working set: nothing to run
        }
        EXPECT_GT(plan.stats.loads + plan.stats.host_inputs, 0);
        for (CudaExecutor* e : {&exec, &plain_exec}) {
          const RunResult r = e->run(g, plan.graph, inputs);
          EXPECT_LE(worst_error(g, r.outputs, want), output_tolerance(dtype_of(g)));
          EXPECT_EQ(r.timeline.spans.size(), plan.graph.tasks.size());
        }
      }
  }
}

TEST_F(CudaExecutorTest, NcclMovesNeedOneGpuPerDevice) {
  const Graph g = build_workload("chain:size=64");
  CudaOptions o{Policy::async, 1};
  o.moves = MoveMethod::nccl;
  CudaExecutor exec(o);
  const TensorMap inputs = random_inputs(g, 1);
  try {
    (void)exec.run(g, lower(g, split_largest(g, 2)), inputs);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL refuses two ranks on one GPU"), std::string::npos) << e.what();
  }
}

TEST_F(CudaExecutorTest, NcclAndPeerCopiesBetweenPhysicalGpusMatch) {
  if (gpus_.size() < 2) GTEST_SKIP() << "needs 2 GPUs; found " << gpus_.size() << " (" << gpus_[0].name << ")";
  const Graph g = build_workload("ffn");
  const TensorMap inputs = random_inputs(g, 4);
  const TensorMap want = evaluate_reference(g, inputs);
  for (MoveMethod m : {MoveMethod::copy, MoveMethod::nccl}) {
    CudaOptions o{Policy::async, 2};
    o.moves = m;
    CudaExecutor exec(o);
    EXPECT_LE(worst_error(g, exec.run(g, lower(g, split_largest(g, 2)), inputs).outputs, want),
              output_tolerance(DType::f32));
  }
}

TEST_F(CudaExecutorTest, KernelProfileTimesEveryComputeTask) {
  const Graph g = build_workload("ffn");
  const TaskGraph tg = lower(g, split_largest(g, 2));
  CudaExecutor exec(CudaOptions{Policy::async, 1});
  const KernelProfile p = exec.profile_kernels(g, tg, random_inputs(g, 1), 5);
  const std::vector<double>& s = p.seconds;
  ASSERT_EQ(s.size(), tg.tasks.size());
  ASSERT_EQ(p.chip_share.size(), tg.tasks.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    // Two virtual devices of one GPU: a share between 1/2 (two at once as fast as one)
    // and 1 (two at once take twice as long).
    EXPECT_GE(p.chip_share[i], 0.5) << i;
    EXPECT_LE(p.chip_share[i], 1.0) << i;
    if (tg.tasks[i].kind == TaskKind::compute) {
      EXPECT_GT(s[i], 0) << i;
      EXPECT_LT(s[i], 1.0) << i;
    } else {
      EXPECT_EQ(s[i], -1) << i;
    }
  }
}

// A run launched as one CUDA graph (after its unmarked run, --unmarked) and one issued task
// by task to streams compute the same bits, and both timelines keep every dependency.
TEST_F(CudaExecutorTest, GraphAndStreamLaunchGiveTheSameBits) {
  const Graph g = build_workload("llama-block:model=tiny");
  const TaskGraph tg = lower(g, split_largest(g, 4));
  const TensorMap inputs = random_inputs(g, 11);
  for (Policy policy : {Policy::async, Policy::bsp}) {
    CudaOptions go{policy, 1}, so{policy, 1};
    go.launch = LaunchMode::graph;
    go.unmarked_run = true;  // the graph runs twice: unmarked, then marked
    so.launch = LaunchMode::stream;
    so.unmarked_run = true;  // ignored: stream launches have no unmarked run
    CudaExecutor graph_exec(go), stream_exec(so);
    const RunResult a = graph_exec.run(g, tg, inputs);
    const RunResult b = stream_exec.run(g, tg, inputs);
    // The graph ran twice (unmarked, then marked, the buffers reset between): the second
    // run's accumulators started from their identity again, or the bits would differ.
    for (const auto& [name, t] : a.outputs) EXPECT_EQ(t.data, b.outputs.at(name).data) << name;
    EXPECT_GT(a.unmarked_span_s, 0);
    EXPECT_LT(a.unmarked_span_s, 1.0);
    EXPECT_EQ(b.unmarked_span_s, -1);
    for (const RunResult* r : {&a, &b}) {
      ASSERT_EQ(r->timeline.spans.size(), tg.tasks.size());
      for (std::size_t i = 0; i < tg.tasks.size(); ++i)
        for (TaskId d : tg.tasks[i].deps)
          EXPECT_GE(r->timeline.spans[i].start_s + 2e-6, r->timeline.spans[d.index()].end_s) << "task " << i;
    }
  }
}

}  // namespace
}  // namespace tessel::runtime
