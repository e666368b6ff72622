// The simulator's cache model (SimOptions::task_seconds_cold): per device an LRU set of
// buffers within cache_capacity_bytes; a compute task takes its hot seconds plus the
// share of (cold - hot) that its bytes missing from the cache make up.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/partition.h"
#include "core/workloads.h"
#include "tests/sim/sim_test_util.h"
#include "sim/simulator.h"

namespace tessel::sim {
namespace {

using testing::add_link;
using testing::bare_machine;
using testing::error_of;
using testing::ps;
using testing::TgBuilder;

// One device, a cache of 1000 bytes, buffers of 400 bytes: two fit.
//   buffers  0 A (input)   1 B = c1(A)   2 C = c2(B)   3 D = c3(A)
// The run starts as the executor's: buffers first touched 0, 1, 2, 3 (leaving 3 and 2),
// then the input written (leaving 0 and 3). c1 (rank 20 us) runs first: A cached, B not
// (half its bytes missing); then c2 (rank 10 us, above c3's 5): B cached, C not (half);
// then c3: A and D both pushed out by B and C (all missing).
struct ThreeKernels {
  TgBuilder b{1};
  SimOptions o;
  ThreeKernels() {
    BufferId a = b.input(0, 400);
    BufferId bb = b.compute(0, 0, 0, {a}, 400);
    b.compute(0, 0, 0, {bb}, 400);
    b.compute(0, 0, 0, {a}, 400);
    const TaskGraph& tg = b.graph();
    o.task_seconds.assign(tg.size(), -1.0);
    o.task_seconds_cold.assign(tg.size(), -1.0);
    const double hot[] = {10e-6, 10e-6, 5e-6}, cold[] = {30e-6, 30e-6, 25e-6};
    for (int k = 0; k < 3; ++k) {
      o.task_seconds[static_cast<std::size_t>(k + 1)] = hot[k];
      o.task_seconds_cold[static_cast<std::size_t>(k + 1)] = cold[k];
    }
  }
};

Machine cpu_like(std::int64_t cache_bytes) {
  Machine m = bare_machine(1);
  m.device_types[0].single_lane = true;
  m.device_types[0].cache_capacity_bytes = cache_bytes;
  return m;
}

TEST(CacheModel, MissingBytesCostTheirShareOfTheColdTime) {
  ThreeKernels k;
  SimResult r = simulate(k.b.graph(), cpu_like(1000), k.o);
  const auto& s = r.timeline.spans;
  EXPECT_EQ(ps(s[1].end_s - s[1].start_s), 20'000'000);  // 10 + (30 - 10) / 2
  EXPECT_EQ(ps(s[2].end_s - s[2].start_s), 20'000'000);  // 10 + (30 - 10) / 2
  EXPECT_EQ(ps(s[3].end_s - s[3].start_s), 25'000'000);  // 5 + (25 - 5)
  EXPECT_EQ(ps(r.makespan_s), 65'000'000);
  EXPECT_LT(s[1].start_s, s[2].start_s);
  EXPECT_LT(s[2].start_s, s[3].start_s);
}

TEST(CacheModel, EverythingCachedIsTheHotTime) {
  ThreeKernels k;
  EXPECT_EQ(ps(simulate(k.b.graph(), cpu_like(1600), k.o).makespan_s), 25'000'000);
}

TEST(CacheModel, ABufferLargerThanTheCacheFlushesItAndStaysOut) {
  // A (400 B) and E (2000 B) are inputs; c1 reads both. Touching E in the run's setup
  // and again as an input flushes the cache: at c1 nothing is cached. c2 then reads
  // B (cached by c1) and writes C (not): half missing.
  TgBuilder b(1);
  BufferId a = b.input(0, 400);
  BufferId e = b.input(0, 2000);
  BufferId bb = b.compute(0, 0, 0, {a, e}, 400);
  b.compute(0, 0, 0, {bb}, 400);
  const TaskGraph& tg = b.graph();
  SimOptions o;
  o.task_seconds.assign(tg.size(), -1.0);
  o.task_seconds_cold.assign(tg.size(), -1.0);
  o.task_seconds[2] = 10e-6;
  o.task_seconds_cold[2] = 40e-6;
  o.task_seconds[3] = 10e-6;
  o.task_seconds_cold[3] = 20e-6;
  SimResult r = simulate(tg, cpu_like(1000), o);
  EXPECT_EQ(ps(r.timeline.spans[2].end_s - r.timeline.spans[2].start_s), 40'000'000);
  EXPECT_EQ(ps(r.timeline.spans[3].end_s - r.timeline.spans[3].start_s), 15'000'000);
}

TEST(CacheModel, ADeviceWithoutACacheAndNoColdTimesKeepTheHotTimes) {
  ThreeKernels k;
  EXPECT_EQ(ps(simulate(k.b.graph(), cpu_like(0), k.o).makespan_s), 25'000'000);
  SimOptions hot_only = k.o;
  hot_only.task_seconds_cold.clear();
  EXPECT_EQ(ps(simulate(k.b.graph(), cpu_like(1000), hot_only).makespan_s), 25'000'000);
}

// SimOptions::cache_capacity_bytes replaces the machine's capacity (tessel compare
// --cache-bytes): the same run as above, whichever capacity the machine states.
TEST(CacheModel, AGivenCapacityReplacesTheMachines) {
  ThreeKernels k;
  SimOptions o = k.o;
  o.cache_capacity_bytes = 1000;  // a machine cache that holds everything, modelled as 1000 bytes
  EXPECT_EQ(ps(simulate(k.b.graph(), cpu_like(1600), o).makespan_s), 65'000'000);
  o.cache_capacity_bytes = 1600;  // and the other way round: everything cached, the hot times
  EXPECT_EQ(ps(simulate(k.b.graph(), cpu_like(1000), o).makespan_s), 25'000'000);
  o.cache_capacity_bytes = 0;  // 0: the machine's
  EXPECT_EQ(ps(simulate(k.b.graph(), cpu_like(1000), o).makespan_s), 65'000'000);
  o.cache_capacity_bytes = 1000;  // a device type without a cache keeps its hot times
  EXPECT_EQ(ps(simulate(k.b.graph(), cpu_like(0), o).makespan_s), 25'000'000);
  o.cache_capacity_bytes = -1;
  EXPECT_NE(error_of([&] { (void)simulate(k.b.graph(), cpu_like(1000), o); }).find("cache_capacity_bytes must be >= 0, got -1"),
            std::string::npos);
}

TEST(CacheModel, ColdEqualToHotChangesNothingOnAWorkload) {
  Graph g = build_workload("llama-block:model=tiny");
  TaskGraph tg = lower(g, split_largest(g, 2));
  Machine m = machine_preset("cpu:2");
  m.device_types[0].single_lane = true;
  m.device_types[0].cache_capacity_bytes = 64 << 10;  // the model is on
  SimOptions o;
  o.task_seconds.assign(tg.size(), -1.0);
  for (std::size_t i = 0; i < tg.size(); ++i)
    if (tg.tasks[i].kind == TaskKind::compute) o.task_seconds[i] = 1e-6 * static_cast<double>(1 + i % 7);
  SimResult hot = simulate(tg, m, o);
  o.task_seconds_cold = o.task_seconds;
  SimResult same = simulate(tg, m, o);
  EXPECT_EQ(hot.makespan_s, same.makespan_s);
  // Cold times above the hot ones: some task misses the 64 KiB cache and takes longer,
  // and the result repeats bit for bit.
  for (double& s : o.task_seconds_cold)
    if (s > 0) s *= 3;
  SimResult a = simulate(tg, m, o), b = simulate(tg, m, o);
  EXPECT_EQ(a.makespan_s, b.makespan_s);
  bool slower = false;
  for (std::size_t i = 0; i < tg.size(); ++i)
    slower = slower || a.timeline.spans[i].end_s - a.timeline.spans[i].start_s >
                           hot.timeline.spans[i].end_s - hot.timeline.spans[i].start_s;
  EXPECT_TRUE(slower);
}

// An operand read twice (RMSNorm's x·x) is one buffer of cache lines: with x cached and
// the output not, half the bytes are missing, not a third.
TEST(CacheModel, ABufferReadTwiceCountsOnce) {
  TgBuilder b(1);
  BufferId x = b.input(0, 400);
  b.compute(0, 0, 0, {x, x}, 400);
  const TaskGraph& tg = b.graph();
  SimOptions o;
  o.task_seconds = {-1.0, 10e-6};
  o.task_seconds_cold = {-1.0, 30e-6};
  // Setup touches x, then the output (both fit in 1000 bytes), then x again as the
  // input: both cached. With a cache of 400 bytes only x (the input, touched last) is.
  EXPECT_EQ(ps(simulate(tg, cpu_like(1000), o).makespan_s), 10'000'000);
  EXPECT_EQ(ps(simulate(tg, cpu_like(400), o).makespan_s), 20'000'000);
}

TEST(CacheModel, BadColdTimesAreErrors) {
  ThreeKernels k;
  SimOptions o = k.o;
  o.task_seconds_cold.push_back(0);
  EXPECT_NE(error_of([&] { (void)simulate(k.b.graph(), cpu_like(1000), o); }).find("task_seconds_cold has 5 entries for 4 tasks"),
            std::string::npos);
  o = k.o;
  o.task_seconds_cold[2] = std::nan("");
  EXPECT_NE(error_of([&] { (void)simulate(k.b.graph(), cpu_like(1000), o); }).find("task_seconds_cold[2] is not a finite number"),
            std::string::npos);
}

// A load writes its destination on the executor's copy lane (host_copy_lane: another
// thread and core), not on the worker: the compute that reads the loaded buffer finds it
// missing from the worker's cache and is charged that buffer's share of its cold extra.
// On the worker's lane the load itself brought it in: the hot time.
//   buffers  0 A (input)   1 H (host input)   2 D = load(H)   3 E = c(D)
// A cache of 2000 bytes holds all four (400 bytes each) from the run's start; the load
// (400 B at 1 GB/s) ends at 0.4 us and c (hot 10 us, cold 30 us) follows.
TEST(CacheModel, ABufferLoadedOnTheCopyLaneIsColdForTheWorker) {
  TgBuilder b(1);
  b.input(0, 400);
  const BufferId host = b.input(0, 400);
  const TaskId host_writer = b.last();
  const BufferId dst = b.buffer(0, 400);
  TaskGraph tg = b.graph();
  tg.buffers[host.index()].host = true;
  Task load;
  load.kind = TaskKind::load;
  load.device = load.dst_device = DeviceId(0);
  load.reads = {host};
  load.writes = dst;
  load.bytes = 400;
  load.deps = {host_writer};
  tg.tasks.push_back(load);
  Task c;
  c.kind = TaskKind::compute;
  c.device = c.dst_device = DeviceId(0);
  c.reads = {dst};
  tg.buffers.push_back(tg.buffers[dst.index()]);
  c.writes = BufferId(static_cast<std::int32_t>(tg.buffers.size() - 1));
  c.deps = {TaskId(2)};
  tg.tasks.push_back(c);
  SimOptions o;
  o.task_seconds.assign(tg.size(), -1.0);
  o.task_seconds_cold.assign(tg.size(), -1.0);
  o.task_seconds[3] = 10e-6;
  o.task_seconds_cold[3] = 30e-6;
  auto compute_ps = [&](bool host_copy_lane) {
    Machine m = cpu_like(2000);
    m.devices[0].host_in = {add_link(m, "h2d", 1e9, 0)};
    m.devices[0].host_out = {add_link(m, "d2h", 1e9, 0)};
    m.device_types[0].host_copy_lane = host_copy_lane;
    const SimResult r = simulate(tg, m, o);
    const Span& s = r.timeline.spans[3];
    EXPECT_EQ(s.task, TaskId(3));
    EXPECT_EQ(ps(s.start_s), 400'000);  // after the load
    return ps(s.end_s - s.start_s);
  };
  EXPECT_EQ(compute_ps(false), 10'000'000);  // the worker loaded D: cached, hot
  EXPECT_EQ(compute_ps(true), 20'000'000);   // D missing (half the bytes): 10 + (30 - 10) / 2
  EXPECT_EQ(compute_ps(true), compute_ps(true));  // deterministic
}

}  // namespace
}  // namespace tessel::sim
