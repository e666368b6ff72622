// The overlap benchmark's inversion (runtime/cuda/cuda_overlap.h) against the simulator:
// factors computed from four measured times make the simulator reproduce those times
// (ctest label cuda: no GPU needed).
#include <gtest/gtest.h>

#include "core/machine.h"
#include "runtime/cuda/cuda_overlap.h"
#include "runtime/cuda/nvrtc.h"
#include "sim/simulator.h"

namespace tessel::runtime {
namespace {

// A compute task of C seconds and a move of M seconds (bytes at 1e10 B/s) start together
// on device 0; returns their ends.
std::pair<double, double> simulate_pair(double C, double M, double a, double b) {
  Machine m;
  m.name = "pair";
  DeviceType t;
  t.name = "gpu";
  t.peak_flops_per_s[static_cast<int>(DType::f32)] = 1e12;
  t.memory_bytes_per_s = 1e30;
  t.memory_capacity_bytes = 1'000'000'000'000;
  m.device_types = {t};
  m.hosts = {Host{"h", 0, {}, {}}};
  m.devices.assign(2, Device{});
  m.links = {Link{"up", LinkKind::custom, 1e10, 0}, Link{"down", LinkKind::custom, 1e10, 0}};
  m.devices[0].fabric_out = {LinkId(0)};
  m.devices[1].fabric_in = {LinkId(1)};
  m.interference.normal = {a, b, "test"};
  TaskGraph tg;
  tg.num_devices = 2;
  tg.buffers.push_back(Buffer{DeviceId(0), Shape{static_cast<std::int64_t>(M * 1e10 / 4)}, DType::f32, Agg::none, NodeId(0)});
  tg.buffers.push_back(Buffer{DeviceId(1), Shape{static_cast<std::int64_t>(M * 1e10 / 4)}, DType::f32, Agg::none, NodeId(0)});
  tg.buffers.push_back(Buffer{DeviceId(0), Shape{1}, DType::f32, Agg::none, NodeId(0)});
  Task in;
  in.kind = TaskKind::input;
  in.device = in.dst_device = DeviceId(0);
  in.node = NodeId(0);
  in.writes = BufferId(0);
  in.bytes = tg.buffers[0].bytes();
  Task comp;
  comp.kind = TaskKind::compute;
  comp.device = comp.dst_device = DeviceId(0);
  comp.node = NodeId(0);
  comp.writes = BufferId(2);
  comp.flops = C * 1e12;
  Task mv;
  mv.kind = TaskKind::move;
  mv.device = DeviceId(0);
  mv.dst_device = DeviceId(1);
  mv.node = NodeId(0);
  mv.reads = {BufferId(0)};
  mv.writes = BufferId(1);
  mv.bytes = tg.buffers[0].bytes();
  mv.deps = {TaskId(0)};
  tg.tasks = {in, comp, mv};
  const sim::SimResult r = sim::simulate(tg, m);
  return {r.timeline.spans[1].end_s, r.timeline.spans[2].end_s};
}

TEST(OverlapInversion, TheSimulatorReproducesTheMeasuredTimes) {
  struct Case {
    double C, M, Tc, Tm;
  };
  // Communication ends first; compute ends first; both slowed little.
  for (const Case c : {Case{10e-3, 8e-3, 12e-3, 11e-3}, Case{10e-3, 10e-3, 11e-3, 14e-3}, Case{5e-3, 5e-3, 5.2e-3, 5.1e-3}}) {
    const OverlapPoint p = overlap_point("sm_kernels", "normal", 0, c.C, c.M, c.Tc, c.Tm);
    EXPECT_GE(p.compute_slowdown, 1);
    EXPECT_GE(p.comm_slowdown, 1);
    const auto [tc, tm] = simulate_pair(c.C, c.M, p.compute_slowdown, p.comm_slowdown);
    EXPECT_NEAR(tc, c.Tc, 1e-9) << c.C << " " << c.M;
    EXPECT_NEAR(tm, c.Tm, 1e-9) << c.C << " " << c.M;
    EXPECT_NEAR(p.total_s, std::max(c.Tc, c.Tm), 1e-15);
    EXPECT_NEAR(p.overlap_captured, (c.C + c.M - p.total_s) / (c.C + c.M - std::max(c.C, c.M)), 1e-12);
  }
}

TEST(OverlapKernels, CompileForHopper) {
  cuda::KernelSource ks;
  ks.name = "tessel_overlap";
  ks.key = "overlap-kernels-test";
  ks.source = overlap_kernel_source();
  const cuda::CompiledKernel k = cuda::compile(ks, "sm_90");
  EXPECT_FALSE(k.image.empty());
}

TEST(OverlapInversion, MeasuredRowsNameTheirSourceAndFillEveryConfiguration) {
  OverlapCalibration c;
  c.device_name = "NVIDIA H100";
  for (const char* mech : {"copy_engine", "sm_kernels"})
    for (const char* prio : {"normal", "high"}) c.points.push_back(overlap_point(mech, prio, 0, 1, 1, 1.2, 1.3));
  c.points.push_back(overlap_point("sm_kernels", "normal", 16, 1, 1, 1.3, 1.1));
  c.points.push_back(overlap_point("sm_kernels", "high", 16, 1, 1, 1.3, 1.05));
  const Interference f = interference_from_overlap(c, "2026-11-24");
  EXPECT_TRUE(f.measured);
  EXPECT_NE(f.normal.source.find("NVIDIA H100 (2026-11-24)"), std::string::npos);
  Interference g = f;
  for (CommMechanism m : {CommMechanism::sm_kernels, CommMechanism::copy_engine})
    for (CommPriority p : {CommPriority::normal, CommPriority::high}) {
      g.comm_mechanism = m;
      g.comm_priority = p;
      g.comm_sms = m == CommMechanism::sm_kernels ? 16 : 0;
      EXPECT_EQ(g.resolve(132).source.substr(0, 9), "measured:");
    }
}

}  // namespace
}  // namespace tessel::runtime
