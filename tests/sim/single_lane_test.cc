// Device types that model a CPU worker: one lane for everything, a separate rate for
// non-contraction compute, and a cache whose bandwidth serves tasks that fit in it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/machine.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "sim/compute_model.h"
#include "sim/simulator.h"

namespace tessel::sim {
namespace {

Machine two_workers(bool single_lane) {
  Machine m = machine_preset("cpu:2");
  m.device_types[0].single_lane = single_lane;
  return m;
}

TEST(SingleLane, NoTwoTasksOfOneDeviceOverlap) {
  Graph g = build_workload("chain-sum:size=64");
  TaskGraph tg = lower(g, split_largest(g, 2));
  SimResult r = simulate(tg, two_workers(true), {});
  for (std::size_t a = 0; a < r.timeline.spans.size(); ++a)
    for (std::size_t b = a + 1; b < r.timeline.spans.size(); ++b) {
      const Span& x = r.timeline.spans[a];
      const Span& y = r.timeline.spans[b];
      if (x.device != y.device || x.start_s == x.end_s || y.start_s == y.end_s) continue;
      EXPECT_TRUE(x.end_s <= y.start_s || y.end_s <= x.start_s)
          << "tasks " << x.task << " and " << y.task << " overlap on device " << x.device;
    }
}

TEST(SingleLane, MakespanIsAtLeastTheBusiestDevicesSumOfDurations) {
  Graph g = build_workload("ffn:tokens=64,dim=32,hidden=64");
  TaskGraph tg = lower(g, split_largest(g, 2));
  Machine separate = two_workers(false), single = two_workers(true);
  SimResult a = simulate(tg, separate, {});
  SimResult b = simulate(tg, single, {});
  EXPECT_GE(b.makespan_s, a.makespan_s);
  for (const auto& d : b.devices) EXPECT_LE(d.compute_busy_s + d.comm_busy_s + d.copy_busy_s, b.makespan_s * (1 + 1e-12));
}

TEST(ComputeModel, NonContractionsUseTheGenericRateWhenSet) {
  Graph g = build_workload("ffn:tokens=64,dim=32,hidden=64");
  TaskGraph tg = lower(g, split_largest(g, 1));
  DeviceType dt = machine_preset("cpu:1").device_types[0];
  dt.memory_bytes_per_s = 1e30;  // take memory out of the roofline
  dt.efficiency.clear();
  dt.generic_flops_per_s = dt.peak(DType::f32) / 10;
  int contractions = 0, generic = 0;
  for (const Task& t : tg.tasks) {
    if (t.kind != TaskKind::compute || t.flops == 0) continue;
    double s = compute_seconds(t, tg, dt);
    if (t.contraction) {
      ++contractions;
      EXPECT_DOUBLE_EQ(s, t.flops / dt.peak(DType::f32) + dt.launch_latency_s);
    } else {
      ++generic;
      EXPECT_DOUBLE_EQ(s, t.flops / dt.generic_flops_per_s + dt.launch_latency_s);
    }
  }
  EXPECT_EQ(contractions, 3);  // gate, up, down
  EXPECT_EQ(generic, 1);       // act
}

TEST(Machine, SingleLaneAndGenericRateRoundTripThroughJson) {
  Machine m = two_workers(true);
  m.device_types[0].generic_flops_per_s = 1.5e9;
  EXPECT_EQ(machine_from_json(to_json(m)), m);
}

// The cache rule: a task whose distinct bytes fit in the cache moves its traffic at the
// cache's bandwidth. An accumulating touch of R bytes reads R, reads and writes the same
// R of destination: 3R of traffic over 2R of lines, so 2R decides where it runs.
TEST(ComputeModel, TheFootprintNotTheTrafficDecidesWhetherATaskRunsInCache) {
  DeviceType dt;
  dt.memory_bytes_per_s = 1e10;
  dt.cache_bytes_per_s = 1e11;
  dt.cache_capacity_bytes = 1 << 20;
  TaskGraph tg;
  Task touch;
  touch.kind = TaskKind::touch;
  touch.op = TouchOp::accumulate;
  touch.bytes = 1 << 19;  // footprint exactly the cache, traffic 1.5x it
  EXPECT_DOUBLE_EQ(footprint_bytes(touch), 1 << 20);
  EXPECT_DOUBLE_EQ(memory_traffic_bytes(touch), 3.0 * (1 << 19));
  EXPECT_DOUBLE_EQ(compute_seconds(touch, tg, dt), 3.0 * (1 << 19) / 1e11);
  touch.bytes = (1 << 19) + 4;  // one element more: past the cache
  EXPECT_DOUBLE_EQ(compute_seconds(touch, tg, dt), 3.0 * ((1 << 19) + 4) / 1e10);
  Task copy = touch;
  copy.op = TouchOp::copy;
  copy.bytes = 1 << 18;
  EXPECT_DOUBLE_EQ(compute_seconds(copy, tg, dt), 2.0 * (1 << 18) / 1e11);
  // A second level between the first and the memory: past the first, within it.
  dt.outer_cache_capacity_bytes = 8 << 20;
  dt.outer_cache_bytes_per_s = 4e10;
  copy.bytes = 4 << 20;  // 8 MiB of lines: the outer level exactly
  EXPECT_DOUBLE_EQ(compute_seconds(copy, tg, dt), 2.0 * (4 << 20) / 4e10);
  copy.bytes = (4 << 20) + 4;
  EXPECT_DOUBLE_EQ(compute_seconds(copy, tg, dt), 2.0 * ((4 << 20) + 4) / 1e10);
  touch.bytes = 1 << 19;  // still the first level
  EXPECT_DOUBLE_EQ(compute_seconds(touch, tg, dt), 3.0 * (1 << 19) / 1e11);
}

// A strided copy pays copy_row_s per contiguous run beside its bytes: a touch out of
// rows of 16 floats copies elements / 16 rows; a whole-row copy of the same bytes, one.
TEST(ComputeModel, TouchesPayPerRowTheirCopyLoopRuns) {
  DeviceType dt;
  dt.memory_bytes_per_s = 1e10;
  dt.copy_row_s = 5e-9;
  TaskGraph tg;
  Task touch;
  touch.kind = TaskKind::touch;
  touch.op = TouchOp::copy;
  touch.src = Rect{4, {0, 0, 0, 0}, {1, 2, 64, 16}};  // 2048 floats in 128 rows
  touch.bytes = 2048 * 4;
  EXPECT_DOUBLE_EQ(inner_rows(touch), 128);
  EXPECT_DOUBLE_EQ(compute_seconds(touch, tg, dt), 2.0 * 8192 / 1e10 + 128 * 5e-9);
  touch.src = Rect{1, {0}, {2048}};  // the same bytes in one row
  EXPECT_DOUBLE_EQ(compute_seconds(touch, tg, dt), 2.0 * 8192 / 1e10 + 5e-9);
  dt.copy_row_s = 0;  // GPUs: bytes only
  EXPECT_DOUBLE_EQ(compute_seconds(touch, tg, dt), 2.0 * 8192 / 1e10);
}

// A generic (non-contraction) kernel pays generic_row_s per row of its block's innermost
// dimension beside its flops; a contraction does not.
TEST(ComputeModel, GenericKernelsPayPerRowOfTheirBlock) {
  DeviceType dt;
  dt.memory_bytes_per_s = 1e30;  // flops decide
  dt.peak_flops_per_s[static_cast<int>(DType::f32)] = 1e12;
  dt.generic_flops_per_s = 1e9;
  dt.generic_row_s = 2e-8;
  TaskGraph tg;
  tg.buffers.push_back(Buffer{DeviceId(0), Shape{4}, DType::f32, Agg::none, NodeId(0)});
  Task t;
  t.kind = TaskKind::compute;
  t.writes = BufferId(0);
  t.src = Rect{3, {0, 0, 0}, {4, 32, 64}};  // 128 rows of 64
  t.flops = 8192;
  EXPECT_DOUBLE_EQ(inner_rows(t), 128);
  EXPECT_DOUBLE_EQ(compute_seconds(t, tg, dt), 8192 / 1e9 + 128 * 2e-8);
  t.contraction = true;  // the peak and efficiency table only
  EXPECT_DOUBLE_EQ(compute_seconds(t, tg, dt), 8192 / 1e12);
}

// A move into a device whose type has copy_row_s occupies its channel for its rows
// first, then its bytes cross the route: latency + rows × copy_row_s + bytes / bandwidth.
TEST(SingleLane, MovesPayPerRowBeforeTheirBytesFlow) {
  for (const char* network : {"alpha-beta", "flow"}) {
    Machine m = two_workers(true);
    const double row_s = 1e-6;
    Graph g = build_workload("chain:m=8,k=8,n=8,p=8");
    TaskGraph tg = lower(g, split_largest(g, 2));
    SimOptions o;
    o.network = network;
    SimResult plain = simulate(tg, m, o);
    m.device_types[0].copy_row_s = row_s;
    SimResult rows = simulate(tg, m, o);
    int moves = 0;
    for (std::size_t i = 0; i < tg.size(); ++i) {
      const Task& t = tg.tasks[i];
      if (t.kind != TaskKind::move) continue;
      ++moves;
      const double before = plain.timeline.spans[i].end_s - plain.timeline.spans[i].start_s;
      const double after = rows.timeline.spans[i].end_s - rows.timeline.spans[i].start_s;
      EXPECT_NEAR(after - before, inner_rows(t) * row_s, 1e-12) << network << " move " << i;
    }
    EXPECT_GT(moves, 0);
  }
}

}  // namespace
}  // namespace tessel::sim
