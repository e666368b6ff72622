// The CPU executor's copy lane (CpuOptions::copy_lane = thread; capped graphs on it
// against the reference: tests/runtime/cpu_arena_test.cc): evicts and loads in bsp's
// phase order compute what the reference does at 1, 2 and 4 devices under async and bsp;
// bsp refuses a graph whose dependencies cross its phases backwards; the copy lane is
// another thread than the worker and runs a load while the worker is inside a compute
// task; a failing copy task stops the run naming it and the executor runs again; one
// executor's pooled threads change roles (copy lane, worker) across runs; a run split
// over processes refuses the copy lane and capped graphs.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

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

// Which thread ran each task (recorded by CpuOptions::before_task).
struct ThreadOfTask {
  std::mutex mutex;
  std::map<std::int32_t, std::thread::id> of;
  void record(TaskId t) {
    std::lock_guard<std::mutex> lock(mutex);
    of[t.value] = std::this_thread::get_id();
  }
};

// Evicts and loads keep their device in the timeline, and ran on copy lanes: on threads
// that ran no other task (under CopyLane::worker they run on the workers: this fails).
void expect_copies_on_copy_lanes(const TaskGraph& tg, const RunResult& r, const ThreadOfTask& threads,
                                 const std::string& label) {
  ASSERT_EQ(r.timeline.spans.size(), tg.tasks.size()) << label;
  ASSERT_EQ(threads.of.size(), tg.tasks.size()) << label;
  std::set<std::thread::id> copy_threads, other_threads;
  for (const Span& s : r.timeline.spans) {
    const Task& t = tg.tasks[s.task.index()];
    (is_host_copy(t) ? copy_threads : other_threads).insert(threads.of.at(s.task.value));
    if (!is_host_copy(t)) continue;
    EXPECT_EQ(s.device, t.device) << label;
    EXPECT_EQ(s.lane, Lane::copy) << label;
  }
  EXPECT_FALSE(copy_threads.empty()) << label;
  for (std::thread::id id : copy_threads) EXPECT_EQ(other_threads.count(id), 0u) << label << ": a copy ran on a worker";
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

bool bsp_can_run(const TaskGraph& tg) { return !first_backward_bsp_dependency(tg).has_value(); }

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
      ThreadOfTask threads;
      o.before_task = [&](TaskId t) { threads.record(t); };
      CpuExecutor exec(o);
      for (int rep = 0; rep < 2; ++rep) {
        threads.of.clear();
        const RunResult r = exec.run(g, tg, inputs);
        expect_reference(g, r, want, label);
        expect_copies_on_copy_lanes(tg, r, threads, label);
      }
    }
  }
}

// bsp on a capped graph: an error naming the first dependency that crosses the phases
// backwards, not a run that waits forever.
TEST(CpuCopyLane, BspRefusesAGraphWhoseDependenciesCrossPhasesBackwards) {
  const Graph g = build_workload("llama-block:model=tiny");
  const MemoryPlan plan = capped_plan(lower(g, split_largest(g, 2)), 0.5);
  const std::optional<BackwardBspDependency> b = first_backward_bsp_dependency(plan.graph);
  ASSERT_TRUE(b.has_value());
  for (CopyLane lane : {CopyLane::worker, CopyLane::thread}) {
    CpuOptions o;
    o.policy = Policy::bsp;
    o.copy_lane = lane;
    try {
      (void)CpuExecutor(o).run(g, plan.graph, random_inputs(g, 1));
      FAIL() << "bsp ran a graph whose dependencies cross its phases";
    } catch (const Error& e) {
      const std::string want = "cpu executor: bsp cannot run this task graph: task " + std::to_string(b->task.value) +
                               " (";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("depends on task " + std::to_string(b->dependency.value) + " of a later phase"),
                std::string::npos)
          << e.what();
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

// L's and C's hooks meet: each waits, up to `limit`, until the other task has entered
// its hook, so both are inside their hooks at once when L runs on another thread than
// C. On the worker (CopyLane::worker) the first to enter waits for the other in vain.
struct Rendezvous {
  RunResult result;
  bool gave_up = false;
  ThreadOfTask threads;
};
void run_rendezvous(const Graph& g, const TaskGraph& tg, Pair p, CopyLane lane, std::chrono::milliseconds limit,
                    Rendezvous& out) {
  std::mutex mutex;
  std::condition_variable cv;
  bool load_in = false, compute_in = false;
  CpuOptions o;
  o.copy_lane = lane;
  o.before_task = [&](TaskId t) {
    out.threads.record(t);
    if (t.value != p.load && t.value != p.compute) return;
    std::unique_lock<std::mutex> lock(mutex);
    bool& mine = t.value == p.load ? load_in : compute_in;
    const bool& other = t.value == p.load ? compute_in : load_in;
    mine = true;
    cv.notify_all();
    if (!cv.wait_for(lock, limit, [&] { return other; })) out.gave_up = true;
  };
  out.result = CpuExecutor(o).run(g, tg, random_inputs(g, 1));
}

// The load's span and the compute task's overlap: the copy lane ran L while the worker
// was inside C.
TEST(CpuCopyLane, ALoadRunsOnAnotherThreadWhileTheWorkerComputes) {
  const Graph g = build_workload("llama-block:model=tiny");
  MemoryPlan plan = capped_plan(lower(g, split_largest(g, 1)), 0.5);
  const Pair p = load_beside_compute(plan.graph);
  ASSERT_GE(p.load, 0) << "no load beside a compute task in the plan";
  plan.graph.validate();
  Rendezvous run;
  run_rendezvous(g, plan.graph, p, CopyLane::thread, std::chrono::seconds(5), run);
  EXPECT_FALSE(run.gave_up) << "load " << p.load << " and compute task " << p.compute << " did not run at once";
  // Every evict and load ran on one thread, every other task on another.
  std::set<std::thread::id> copy_threads, other_threads;
  for (const auto& [task, id] : run.threads.of)
    (is_host_copy(plan.graph.tasks[static_cast<std::size_t>(task)]) ? copy_threads : other_threads).insert(id);
  EXPECT_EQ(copy_threads.size(), 1u);
  EXPECT_EQ(other_threads.size(), 1u);
  expect_copies_on_copy_lanes(plan.graph, run.result, run.threads, "1 device");
  // The timeline shows it (each span starts before its hook and ends after it).
  const Span& load = run.result.timeline.spans[static_cast<std::size_t>(p.load)];
  const Span& compute = run.result.timeline.spans[static_cast<std::size_t>(p.compute)];
  ASSERT_EQ(load.task.value, p.load);
  ASSERT_EQ(compute.task.value, p.compute);
  EXPECT_LT(load.start_s, compute.end_s);
  EXPECT_LT(compute.start_s, load.end_s);
}

// The same run on the worker: the rendezvous cannot happen (one thread runs L and C one
// after the other), so the test above would fail there, and the copies ran on a worker.
TEST(CpuCopyLane, OnTheWorkerTheLoadAndTheComputeTaskCannotMeet) {
  const Graph g = build_workload("llama-block:model=tiny");
  MemoryPlan plan = capped_plan(lower(g, split_largest(g, 1)), 0.5);
  const Pair p = load_beside_compute(plan.graph);
  ASSERT_GE(p.load, 0);
  Rendezvous run;
  run_rendezvous(g, plan.graph, p, CopyLane::worker, std::chrono::milliseconds(200), run);
  EXPECT_TRUE(run.gave_up);
  const Span& load = run.result.timeline.spans[static_cast<std::size_t>(p.load)];
  const Span& compute = run.result.timeline.spans[static_cast<std::size_t>(p.compute)];
  EXPECT_TRUE(load.start_s >= compute.end_s || compute.start_s >= load.end_s);
  std::set<std::thread::id> all;
  for (const auto& [task, id] : run.threads.of) all.insert(id);
  EXPECT_EQ(all.size(), 1u);
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
  const TensorMap inputs = random_inputs(g, 1);
  bool inject = true;
  CpuOptions o;
  o.copy_lane = CopyLane::thread;
  o.before_task = [&](TaskId t) {
    if (inject && t.value == load) throw std::runtime_error("injected");
  };
  CpuExecutor exec(o);
  try {
    (void)exec.run(g, plan.graph, inputs);
    FAIL() << "the run did not fail";
  } catch (const Error& e) {
    const std::string want = "task " + std::to_string(load) + " (load of node '" + node + "') failed: injected";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  // The executor stays usable: the same one runs the graph again, right.
  inject = false;
  const RunResult r = exec.run(g, plan.graph, inputs);
  EXPECT_EQ(r.timeline.spans.size(), plan.graph.tasks.size());
  expect_reference(g, r, evaluate_reference(g, inputs), "after the failure");
}

// One executor, its pooled threads in changing roles: pool thread 1 is device 0's copy
// lane at 1 device, worker 1 at 2 devices (re-pinned), then a copy lane again.
TEST(CpuCopyLane, OneExecutorRunsCappedAndUncappedGraphsAsItsThreadsChangeRoles) {
  const Graph g = build_workload("llama-block:model=tiny");
  const TensorMap inputs = random_inputs(g, 5);
  const TensorMap want = evaluate_reference(g, inputs);
  const TaskGraph one = lower(g, split_largest(g, 1)), two = lower(g, split_largest(g, 2));
  const MemoryPlan capped_one = capped_plan(one, 0.5), capped_two = capped_plan(two, 0.5);
  for (CopyLane lane : {CopyLane::thread, CopyLane::worker}) {
  CpuOptions o;
  o.copy_lane = lane;
  ThreadOfTask threads;
  o.before_task = [&](TaskId t) { threads.record(t); };
  CpuExecutor exec(o);
  const std::pair<const TaskGraph*, const char*> runs[] = {{&capped_one.graph, "capped, 1 device"},
                                                           {&two, "uncapped, 2 devices"},
                                                           {&capped_two.graph, "capped, 2 devices"},
                                                           {&one, "uncapped, 1 device"},
                                                           {&capped_one.graph, "capped, 1 device again"}};
  for (const auto& [tg, label] : runs) {
    threads.of.clear();
    const RunResult r = exec.run(g, *tg, inputs);
    expect_reference(g, r, want, std::string(to_string(lane)) + ", " + label);
    if (lane == CopyLane::thread && (tg == &capped_one.graph || tg == &capped_two.graph))
      expect_copies_on_copy_lanes(*tg, r, threads, label);
  }
  }
}

// pin_threads = false: the copy lane keeps the affinity its thread inherited (here one
// core, set by the thread that starts the executor's pool), as the workers do.
TEST(CpuCopyLane, WithoutPinningTheCopyLaneKeepsTheAffinityItInherits) {
  cpu_set_t start;
  CPU_ZERO(&start);
  ASSERT_EQ(sched_getaffinity(0, sizeof(start), &start), 0);
  if (CPU_COUNT(&start) < 2) GTEST_SKIP() << "one core: no narrower mask to keep";
  int first = 0;
  while (!CPU_ISSET(first, &start)) ++first;
  const Graph g = build_workload("llama-block:model=tiny");
  const MemoryPlan plan = capped_plan(lower(g, split_largest(g, 1)), 0.5);
  std::mutex mutex;
  std::vector<int> copy_masks;  // CPU_COUNT of each evict's and load's thread
  bool on_first = true;
  CpuOptions o;
  o.pin_threads = false;
  o.copy_lane = CopyLane::thread;
  o.before_task = [&](TaskId t) {
    if (!is_host_copy(plan.graph.task(t))) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof(set), &set);
    std::lock_guard<std::mutex> lock(mutex);
    copy_masks.push_back(CPU_COUNT(&set));
    on_first = on_first && CPU_ISSET(first, &set);
  };
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
    CpuExecutor exec(o);
    (void)exec.run(g, plan.graph, random_inputs(g, 1));
  }).join();
  ASSERT_FALSE(copy_masks.empty());
  for (int n : copy_masks) EXPECT_EQ(n, 1) << "the copy lane's affinity was changed";
  EXPECT_TRUE(on_first);
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
