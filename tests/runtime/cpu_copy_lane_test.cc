// The CPU executor's copy lane (CpuOptions::copy_lane = thread; capped graphs on it
// against the reference: tests/runtime/cpu_arena_test.cc): evicts and loads in bsp's
// phase order compute what the reference does at 1, 2 and 4 devices under async and bsp;
// bsp refuses a graph whose dependencies cross its phases backwards; the copy lane is
// another thread than the worker and runs a load while the worker is inside a compute
// task; a failing copy task stops the run naming it; a run split over processes refuses
// the copy lane and capped graphs.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/memory_plan.h"
#include "core/partition.h"
#include "core/workloads.h"
#include "runtime/cpu_executor.h"
#include "runtime/kernels.h"
#include "tests/support/capped_plan.h"

namespace tessel::runtime {
namespace {

bool is_host_copy(const Task& t) { return t.kind == TaskKind::evict || t.kind == TaskKind::load; }

using testing::capped_plan;

void expect_reference(const Graph& g, const RunResult& r, const TensorMap& want, const std::string& label) {
  for (NodeId id : g.outputs()) {
    const std::string& name = g.node(id).name;
    EXPECT_LE(compare(r.outputs.at(name), want.at(name)).normwise_rel, 1e-5) << label << " " << name;
  }
}

// Evicts and loads keep their device and the copy lane in the timeline.
void expect_copy_spans(const TaskGraph& tg, const RunResult& r, const std::string& label) {
  ASSERT_EQ(r.timeline.spans.size(), tg.tasks.size()) << label;
  for (const Span& s : r.timeline.spans) {
    const Task& t = tg.tasks[s.task.index()];
    if (!is_host_copy(t)) continue;
    EXPECT_EQ(s.device, t.device) << label;
    EXPECT_EQ(s.lane, Lane::copy) << label;
  }
}

// A memory plan's dependencies cross bsp's phases (a range reused by an earlier node's
// task waits for a later node's reader), so bsp cannot run a capped graph (the CLI
// refuses the pair). To run evicts and loads under bsp, this inserts a round trip in
// phase order: after the writer of one compute output per device, an evict of it to the
// host and a load back into a new buffer that its readers read instead (both in the
// writer's communication phase).
TaskGraph with_round_trips(const TaskGraph& tg) {
  TaskGraph out = tg;
  out.tasks.clear();
  std::vector<int> writers(tg.buffers.size(), 0);
  for (const Task& t : tg.tasks)
    if (t.writes.valid()) ++writers[t.writes.index()];
  std::vector<BufferId> chosen(static_cast<std::size_t>(tg.num_devices));  // per device
  std::vector<std::int32_t> load_of(tg.buffers.size(), -1), copy_of(tg.buffers.size(), -1);
  std::vector<std::int32_t> new_id(tg.tasks.size());
  for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
    Task t = tg.tasks[i];
    for (TaskId& d : t.deps) d = TaskId(new_id[d.index()]);
    for (BufferId& b : t.reads)
      if (copy_of[b.index()] >= 0) {
        t.deps.push_back(TaskId(load_of[b.index()]));
        b = BufferId(copy_of[b.index()]);
      }
    new_id[i] = static_cast<std::int32_t>(out.tasks.size());
    out.tasks.push_back(t);
    const bool pick = t.kind == TaskKind::compute && writers[t.writes.index()] == 1 &&
                      !chosen[t.device.index()].valid() && t.device == tg.buffer(t.writes).device;
    if (!pick) continue;
    chosen[t.device.index()] = t.writes;
    Buffer host = tg.buffer(t.writes), again = tg.buffer(t.writes);
    host.host = true;
    out.buffers.push_back(host);
    const BufferId host_id(static_cast<std::int32_t>(out.buffers.size() - 1));
    out.buffers.push_back(again);
    const BufferId again_id(static_cast<std::int32_t>(out.buffers.size() - 1));
    Task evict;
    evict.kind = TaskKind::evict;
    evict.device = evict.dst_device = t.device;
    evict.node = t.node;
    evict.reads = {t.writes};
    evict.writes = host_id;
    evict.src = Rect::whole(host.shape);
    evict.bytes = host.bytes();
    evict.deps = {TaskId(new_id[i])};
    out.tasks.push_back(evict);
    Task load = evict;
    load.kind = TaskKind::load;
    load.reads = {host_id};
    load.writes = again_id;
    load.deps = {TaskId(static_cast<std::int32_t>(out.tasks.size() - 1))};
    out.tasks.push_back(load);
    load_of[t.writes.index()] = static_cast<std::int32_t>(out.tasks.size() - 1);
    copy_of[t.writes.index()] = again_id.value;
  }
  return out;
}

bool bsp_can_run(const TaskGraph& tg) {
  for (const Task& t : tg.tasks)
    for (TaskId d : t.deps)
      if (bsp_phase(tg.tasks[d.index()]) > bsp_phase(t)) return false;
  return true;
}

TEST(CpuCopyLane, RoundTripsMatchReferenceAt124DevicesUnderBothPolicies) {
  const Graph g = build_workload("llama-block:model=tiny");
  const TensorMap inputs = random_inputs(g, 3);
  const TensorMap want = evaluate_reference(g, inputs);
  for (int devices : {1, 2, 4}) {
    const TaskGraph tg = with_round_trips(lower(g, split_largest(g, devices)));
    tg.validate();
    ASSERT_TRUE(bsp_can_run(tg));
    std::int64_t copies = 0;
    for (const Task& t : tg.tasks) copies += is_host_copy(t);
    ASSERT_EQ(copies, 2 * devices);
    for (Policy policy : {Policy::async, Policy::bsp}) {
      const std::string label = std::to_string(devices) + " devices, " + std::string(to_string(policy));
      CpuOptions o;
      o.policy = policy;
      o.copy_lane = CopyLane::thread;
      CpuExecutor exec(o);
      for (int rep = 0; rep < 2; ++rep) {
        const RunResult r = exec.run(g, tg, inputs);
        expect_reference(g, r, want, label);
        expect_copy_spans(tg, r, label);
      }
    }
  }
}

// bsp on a capped graph: an error naming the first dependency that crosses the phases
// backwards, not a run that waits forever.
TEST(CpuCopyLane, BspRefusesAGraphWhoseDependenciesCrossPhasesBackwards) {
  const Graph g = build_workload("llama-block:model=tiny");
  const MemoryPlan plan = capped_plan(lower(g, split_largest(g, 2)), 0.5);
  ASSERT_FALSE(bsp_can_run(plan.graph));
  for (CopyLane lane : {CopyLane::worker, CopyLane::thread}) {
    CpuOptions o;
    o.policy = Policy::bsp;
    o.copy_lane = lane;
    try {
      (void)CpuExecutor(o).run(g, plan.graph, random_inputs(g, 1));
      FAIL() << "bsp ran a graph whose dependencies cross its phases";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("of a later phase"), std::string::npos) << e.what();
    }
  }
}

// A load L and a compute task C of its device that does not depend on L, with every
// dependency of L added to C's: whenever C starts, L is ready.
struct Pair {
  std::int32_t load = -1, compute = -1;
};
Pair load_beside_compute(TaskGraph& tg) {
  const auto succs = successors(tg);
  for (std::size_t l = 0; l < tg.tasks.size(); ++l) {
    const Task& lt = tg.tasks[l];
    if (lt.kind != TaskKind::load) continue;
    std::vector<char> after_l(tg.tasks.size(), 0);  // L and everything that depends on it
    after_l[l] = 1;
    for (std::size_t i = l; i < tg.tasks.size(); ++i)
      if (after_l[i])
        for (TaskId s : succs[i]) after_l[s.index()] = 1;
    std::int32_t last_dep = -1;
    for (TaskId d : lt.deps) last_dep = std::max(last_dep, d.value);
    for (std::size_t c = static_cast<std::size_t>(last_dep + 1); c < tg.tasks.size(); ++c) {
      Task& ct = tg.tasks[c];
      if (ct.kind != TaskKind::compute || ct.device != lt.device || after_l[c]) continue;
      for (TaskId d : lt.deps) ct.deps.push_back(d);
      std::sort(ct.deps.begin(), ct.deps.end());
      ct.deps.erase(std::unique(ct.deps.begin(), ct.deps.end()), ct.deps.end());
      return {static_cast<std::int32_t>(l), static_cast<std::int32_t>(c)};
    }
  }
  return {};
}

// C's hook holds the worker inside C until L has started. On the copy lane L starts on
// the other thread meanwhile; on the worker (CopyLane::worker) it cannot start until C
// ends, and the hook gives up after 5 s: the test fails.
TEST(CpuCopyLane, ALoadRunsOnAnotherThreadWhileTheWorkerComputes) {
  const Graph g = build_workload("llama-block:model=tiny");
  const TaskGraph tg = lower(g, split_largest(g, 1));
  MemoryPlan plan = capped_plan(tg, 0.5);
  const Pair p = load_beside_compute(plan.graph);
  ASSERT_GE(p.load, 0) << "no load beside a compute task in the plan";
  plan.graph.validate();
  std::mutex mutex;
  std::condition_variable cv;
  bool load_started = false, gave_up = false;
  std::map<std::int32_t, std::thread::id> thread_of;
  CpuOptions o;
  o.copy_lane = CopyLane::thread;
  o.before_task = [&](TaskId t) {
    std::unique_lock<std::mutex> lock(mutex);
    thread_of[t.value] = std::this_thread::get_id();
    if (t.value == p.load) {
      load_started = true;
      cv.notify_all();
    } else if (t.value == p.compute) {
      gave_up = !cv.wait_for(lock, std::chrono::seconds(5), [&] { return load_started; });
    }
  };
  const RunResult r = CpuExecutor(o).run(g, plan.graph, random_inputs(g, 1));
  EXPECT_FALSE(gave_up) << "load " << p.load << " did not start while compute task " << p.compute << " ran";
  // Every evict and load ran on one thread, every other task on another.
  std::set<std::thread::id> copy_threads, other_threads;
  for (const auto& [task, id] : thread_of)
    (is_host_copy(plan.graph.tasks[static_cast<std::size_t>(task)]) ? copy_threads : other_threads).insert(id);
  EXPECT_EQ(copy_threads.size(), 1u);
  EXPECT_EQ(other_threads.size(), 1u);
  for (std::thread::id id : copy_threads) EXPECT_EQ(other_threads.count(id), 0u);
  // The timeline shows it: the load's span starts inside the compute task's.
  const Span& load = r.timeline.spans[static_cast<std::size_t>(p.load)];
  const Span& compute = r.timeline.spans[static_cast<std::size_t>(p.compute)];
  ASSERT_EQ(load.task.value, p.load);
  ASSERT_EQ(compute.task.value, p.compute);
  EXPECT_GE(load.start_s, compute.start_s);
  EXPECT_LT(load.start_s, compute.end_s);
}

TEST(CpuCopyLane, AFailingCopyTaskStopsTheRunNamingIt) {
  const Graph g = build_workload("llama-block:model=tiny");
  const TaskGraph tg = lower(g, split_largest(g, 2));
  const MemoryPlan plan = capped_plan(tg, 0.5);
  std::int32_t load = -1;
  for (std::size_t i = 0; i < plan.graph.tasks.size() && load < 0; ++i)
    if (plan.graph.tasks[i].kind == TaskKind::load) load = static_cast<std::int32_t>(i);
  ASSERT_GE(load, 0);
  const std::string node = g.node(plan.graph.tasks[static_cast<std::size_t>(load)].node).name;
  CpuOptions o;
  o.copy_lane = CopyLane::thread;
  o.before_task = [&](TaskId t) {
    if (t.value == load) throw std::runtime_error("injected");
  };
  CpuExecutor exec(o);
  try {
    (void)exec.run(g, plan.graph, random_inputs(g, 1));
    FAIL() << "the run did not fail";
  } catch (const Error& e) {
    const std::string want = "task " + std::to_string(load) + " (load of node '" + node + "') failed: injected";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  // The executor stays usable.
  o.before_task = nullptr;
  const RunResult r = CpuExecutor(o).run(g, plan.graph, random_inputs(g, 1));
  EXPECT_EQ(r.timeline.spans.size(), plan.graph.tasks.size());
}

class RefusedLink final : public RemoteLink {
 public:
  [[nodiscard]] int first_device() const override { return 0; }
  [[nodiscard]] int last_device() const override { return 1; }
  void begin(const TaskGraph&, RemoteRun) override { throw std::logic_error("begin: the run should be refused"); }
  void started(std::chrono::steady_clock::time_point) override {}
  void before_task(TaskId) override {}
  void send(TaskId, std::vector<std::byte>) override {}
  void phase_done(std::int32_t) override {}
  void end(bool) override {}
};

// Split over processes (device 0 here, device 1 elsewhere): the copy lane thread is
// refused, and so is a capped graph on any lane (a move from another process would land
// in its planned range before this process's earlier users of the range are done).
TEST(CpuCopyLane, ARunSplitOverProcessesRefusesTheCopyLaneAndCappedGraphs) {
  auto error_of_run = [](const Graph& g, const TaskGraph& tg, CopyLane lane) -> std::string {
    RefusedLink link;
    CpuOptions o;
    o.link = &link;
    o.copy_lane = lane;
    try {
      (void)CpuExecutor(o).run(g, tg, random_inputs(g, 1));
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const Graph chain = build_workload("chain:size=64");
  std::string e = error_of_run(chain, lower(chain, split_largest(chain, 2)), CopyLane::thread);
  EXPECT_NE(e.find("copy lane 'thread'"), std::string::npos) << e;
  const Graph g = build_workload("llama-block:model=tiny");
  const MemoryPlan plan = capped_plan(lower(g, split_largest(g, 2)), 0.5);
  e = error_of_run(g, plan.graph, CopyLane::worker);
  EXPECT_NE(e.find("a memory-capped task graph (evicts, loads, buffers at planned offsets) cannot run split over "
                   "processes"),
            std::string::npos)
      << e;
}

TEST(CpuCopyLane, ParsesAndPrintsItsNames) {
  EXPECT_EQ(parse_copy_lane("worker"), CopyLane::worker);
  EXPECT_EQ(parse_copy_lane("thread"), CopyLane::thread);
  EXPECT_EQ(to_string(CopyLane::thread), "thread");
  EXPECT_EQ(to_string(CopyLane::worker), "worker");
  try {
    (void)parse_copy_lane("stream", "--copy-lane");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--copy-lane: unknown copy lane 'stream' (expected worker or thread)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(copy_lane_core(1, 0), cpu_cores() >= 2 ? 1 : -1);
  EXPECT_EQ(copy_lane_core(cpu_cores(), 0), -1);  // D workers on D cores: no core left for a copy lane
}

}  // namespace
}  // namespace tessel::runtime
