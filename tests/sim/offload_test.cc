// The simulator's host link (sim/offload.h): loads and evicts run one at a time per
// direction, a load and an evict at once (the link is full duplex), and neither waits
// for the touches of the copy lane.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/sim/sim_test_util.h"
#include "sim/simulator.h"

namespace tessel::sim {
namespace {

using testing::add_link;
using testing::bare_machine;
using testing::TgBuilder;

constexpr std::int64_t kBytes = 1'000'000;  // 1 ms over the 1 GB/s host link

// One device whose host link carries 1 GB/s each way, no latency.
Machine host_link_machine() {
  Machine m = bare_machine(1, 1e12, 1e9);
  m.devices[0].host_in = {add_link(m, "h2d", 1e9, 0)};
  m.devices[0].host_out = {add_link(m, "d2h", 1e9, 0)};
  return m;
}

Task host_copy(TaskKind kind, BufferId from, BufferId to, TaskId after) {
  Task t;
  t.kind = kind;
  t.device = t.dst_device = DeviceId(0);
  t.reads = {from};
  t.writes = to;
  t.bytes = kBytes;
  t.deps = {after};
  return t;
}

// Inputs: a device buffer and a host buffer; `loads` loads of the host one and `evicts`
// evicts of the device one, all ready at time zero.
TaskGraph loads_and_evicts(int loads, int evicts) {
  TgBuilder b(1);
  const BufferId dev = b.input(0, kBytes);
  const TaskId dev_writer = b.last();
  const BufferId host = b.input(0, kBytes);
  const TaskId host_writer = b.last();
  TaskGraph tg = b.graph();
  tg.buffers[host.index()].host = true;
  auto add_buffer = [&](bool on_host) {
    tg.buffers.push_back(tg.buffers[dev.index()]);
    tg.buffers.back().host = on_host;
    return BufferId(static_cast<std::int32_t>(tg.buffers.size() - 1));
  };
  for (int i = 0; i < loads; ++i) tg.tasks.push_back(host_copy(TaskKind::load, host, add_buffer(false), host_writer));
  for (int i = 0; i < evicts; ++i) tg.tasks.push_back(host_copy(TaskKind::evict, dev, add_buffer(true), dev_writer));
  return tg;
}

Span span_of(const SimResult& r, TaskId id) {
  const auto it = std::find_if(r.timeline.spans.begin(), r.timeline.spans.end(), [&](const Span& s) { return s.task == id; });
  EXPECT_NE(it, r.timeline.spans.end()) << "no span for task " << id.value;
  return it == r.timeline.spans.end() ? Span{} : *it;
}

TEST(SimOffload, LoadsQueueOnTheirDirectionAndOverlapEvicts) {
  const Machine m = host_link_machine();
  const SimOptions o;
  EXPECT_NEAR(simulate(loads_and_evicts(1, 0), m, o).makespan_s, 1e-3, 1e-9);
  EXPECT_NEAR(simulate(loads_and_evicts(2, 0), m, o).makespan_s, 2e-3, 1e-9);  // one direction: one at a time
  EXPECT_NEAR(simulate(loads_and_evicts(0, 2), m, o).makespan_s, 2e-3, 1e-9);
  EXPECT_NEAR(simulate(loads_and_evicts(1, 1), m, o).makespan_s, 1e-3, 1e-9);  // full duplex: both at once
  EXPECT_NEAR(simulate(loads_and_evicts(2, 2), m, o).makespan_s, 2e-3, 1e-9);
}

TEST(SimOffload, ALoadDoesNotWaitForTouches) {
  Machine m = host_link_machine();
  TgBuilder b(1);
  const BufferId src = b.input(0, 4 * kBytes);
  const BufferId dst = b.buffer(0, 4 * kBytes);
  b.touch(src, dst);  // 4 MB over 1 GB/s of memory bandwidth: about 4 ms on the copy lane
  const TaskId touch_id = b.last();
  const BufferId dev = b.input(0, kBytes);
  const TaskId writer = b.last();
  TaskGraph tg = b.graph();
  tg.buffers[dev.index()].host = true;
  tg.buffers.push_back(tg.buffers[dev.index()]);
  tg.buffers.back().host = false;
  tg.tasks.push_back(host_copy(TaskKind::load, dev, BufferId(static_cast<std::int32_t>(tg.buffers.size() - 1)), writer));
  const TaskId load_id(static_cast<std::int32_t>(tg.tasks.size() - 1));
  const SimResult r = simulate(tg, m, SimOptions{});
  const Span touch = span_of(r, touch_id);
  const Span load = span_of(r, load_id);
  ASSERT_GT(touch.end_s - touch.start_s, 1e-3);
  EXPECT_NEAR(load.start_s, 0, 1e-12);  // beside the touch, not after it
  EXPECT_NEAR(load.end_s, 1e-3, 1e-9);
  EXPECT_EQ(load.lane, Lane::copy);  // accounted as copy time
}

// With a rate by size on the host link, a load of S bytes takes the route's latency plus
// S over the link's rate at S (log-linear between the points), whatever bytes_per_s says.
TEST(SimOffload, ALoadTakesItsSizesRateFromTheHostLinksTable) {
  Machine m = bare_machine(1, 1e12, 1e9);
  m.devices[0].host_in = {add_link(m, "h2d", 1e9, 2e-6)};
  m.devices[0].host_out = {add_link(m, "d2h", 1e9, 0)};
  m.links[m.devices[0].host_in[0].index()].bytes_per_s_by_size = {{1e4, 8e9}, {1e8, 2e9}};
  for (std::int64_t bytes : {std::int64_t{1000}, std::int64_t{10'000}, std::int64_t{1'000'000}, std::int64_t{1'000'000'000}}) {
    TaskGraph tg = loads_and_evicts(1, 0);
    for (Task& t : tg.tasks)
      if (t.kind == TaskKind::load) t.bytes = bytes;
    const auto b = static_cast<double>(bytes);
    // 8 GB/s up to 1e4 bytes, 2 GB/s from 1e8 on, and at 1e6 (halfway in log) 5 GB/s.
    const double rate = b <= 1e4 ? 8e9 : b >= 1e8 ? 2e9 : 5e9;
    EXPECT_NEAR(simulate(tg, m, SimOptions{}).makespan_s, 2e-6 + b / rate, 1e-11) << bytes;
  }
  // An evict over the link without a table keeps its bytes_per_s.
  EXPECT_NEAR(simulate(loads_and_evicts(0, 1), m, SimOptions{}).makespan_s, 1e-3, 1e-11);
}

// A single-lane device (a CPU worker) runs a load on its one lane after or before its
// compute; with host_copy_lane the load runs on a copy lane beside it: a load of 1 ms
// independent of a compute task of 2 ms ends the run at max(2, 1) ms instead of 2 + 1.
// A device with separate lanes (a GPU) overlaps them with or without the field.
TEST(SimOffload, AHostCopyLaneOverlapsALoadWithTheWorkersCompute) {
  TgBuilder b(1);
  const BufferId operand = b.input(0, 4);
  b.compute(0, 2e9, 0, {operand});  // 2 ms at 1 TFLOP/s
  const TaskId compute_id = b.last();
  const BufferId host = b.input(0, kBytes);
  const TaskId host_writer = b.last();
  TaskGraph tg = b.graph();
  tg.buffers[host.index()].host = true;
  tg.buffers.push_back(tg.buffers[host.index()]);
  tg.buffers.back().host = false;
  tg.tasks.push_back(host_copy(TaskKind::load, host, BufferId(static_cast<std::int32_t>(tg.buffers.size() - 1)), host_writer));
  const TaskId load_id(static_cast<std::int32_t>(tg.tasks.size() - 1));
  auto with = [](bool single_lane, bool host_copy_lane) {
    Machine m = host_link_machine();
    m.device_types[0].single_lane = single_lane;
    m.device_types[0].host_copy_lane = host_copy_lane;
    return m;
  };
  EXPECT_NEAR(simulate(tg, with(true, false), {}).makespan_s, 3e-3, 1e-9);  // one lane: the sum
  const SimResult r = simulate(tg, with(true, true), {});
  EXPECT_NEAR(r.makespan_s, 2e-3, 1e-9);  // beside the compute: the max
  const Span load = span_of(r, load_id);
  const Span compute = span_of(r, compute_id);
  EXPECT_NEAR(load.start_s, 0, 1e-12);
  EXPECT_NEAR(compute.start_s, 0, 1e-12);
  EXPECT_EQ(load.lane, Lane::copy);
  EXPECT_EQ(load.device, DeviceId(0));
  EXPECT_NEAR(simulate(tg, with(false, false), {}).makespan_s, 2e-3, 1e-9);  // a GPU: unchanged
}

// The copy lane is one thread: a load and an evict (1 ms each) take turns on it beside a
// compute task of 1 ms, 2 ms in all, where the worker's one lane takes 3 ms and a GPU's
// full-duplex host link 1 ms.
TEST(SimOffload, AHostCopyLaneRunsLoadsAndEvictsOneAtATime) {
  TaskGraph tg = loads_and_evicts(1, 1);
  Task compute;
  compute.kind = TaskKind::compute;
  compute.device = compute.dst_device = DeviceId(0);
  compute.reads = {BufferId(0)};  // the device input, as the evict
  compute.deps = {TaskId(0)};
  compute.flops = 1e9;  // 1 ms at 1 TFLOP/s
  tg.buffers.push_back(tg.buffers[0]);
  compute.writes = BufferId(static_cast<std::int32_t>(tg.buffers.size() - 1));
  tg.tasks.push_back(compute);
  Machine m = host_link_machine();
  EXPECT_NEAR(simulate(tg, m, {}).makespan_s, 1e-3, 1e-9);
  m.device_types[0].single_lane = true;
  EXPECT_NEAR(simulate(tg, m, {}).makespan_s, 3e-3, 1e-9);
  m.device_types[0].host_copy_lane = true;
  EXPECT_NEAR(simulate(tg, m, {}).makespan_s, 2e-3, 1e-9);
}

// A memory-planned graph (a buffer at a planned offset) copies each output block off its
// device when the output task runs, as both executors do: an evict's time over the host
// link (1 MB at 1 GB/s: 1 ms), accounted as copy time. The CPU worker makes the copy
// itself, after its 2 ms of compute (3 ms), with a copy lane too; a GPU's host link runs it
// beside the compute (2 ms). Without a plan outputs take no time.
TEST(SimOffload, AMemoryPlannedGraphCopiesItsOutputsOffTheDevice) {
  TgBuilder b(1);
  const BufferId operand = b.input(0, 4);
  b.compute(0, 2e9, 0, {operand});  // 2 ms at 1 TFLOP/s
  const BufferId block = b.input(0, kBytes);
  b.output(block);
  const TaskId output_id = b.last();
  TaskGraph tg = b.graph();
  auto on = [](bool single_lane, bool host_copy_lane) {
    Machine m = host_link_machine();
    m.device_types[0].single_lane = single_lane;
    m.device_types[0].host_copy_lane = host_copy_lane;
    return m;
  };
  EXPECT_NEAR(simulate(tg, on(false, false), {}).makespan_s, 2e-3, 1e-9);  // not planned: the compute alone
  EXPECT_NEAR(simulate(tg, on(true, false), {}).makespan_s, 2e-3, 1e-9);
  tg.buffers[block.index()].offset_bytes = 0;  // planned
  const SimResult gpu = simulate(tg, on(false, false), {});
  EXPECT_NEAR(gpu.makespan_s, 2e-3, 1e-9);
  const Span out = span_of(gpu, output_id);
  EXPECT_NEAR(out.start_s, 0, 1e-12);
  EXPECT_NEAR(out.end_s, 1e-3, 1e-9);
  EXPECT_EQ(out.lane, Lane::copy);
  EXPECT_NEAR(simulate(tg, on(true, false), {}).makespan_s, 3e-3, 1e-9);
  EXPECT_NEAR(simulate(tg, on(true, true), {}).makespan_s, 3e-3, 1e-9);
}

}  // namespace
}  // namespace tessel::sim
