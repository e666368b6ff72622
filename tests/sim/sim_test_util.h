#pragma once
// Small machines and hand-built task graphs for the simulator tests.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "tests/support/error_of.h"

namespace tessel::sim::testing {

// n devices of one type; no links. f32 peak `peak_flops_per_s`.
inline Machine bare_machine(int n, double peak_flops_per_s = 1e12, double memory_bytes_per_s = 1e11,
                            double launch_latency_s = 0) {
  Machine m;
  m.name = "test";
  DeviceType t;
  t.name = "dev";
  t.peak_flops_per_s[static_cast<int>(DType::f32)] = peak_flops_per_s;
  t.memory_bytes_per_s = memory_bytes_per_s;
  t.memory_capacity_bytes = 1'000'000'000'000;
  t.launch_latency_s = launch_latency_s;
  t.sm_count = 100;
  m.device_types = {t};
  m.hosts = {Host{"host0", 0, {}, {}}};
  m.devices.assign(static_cast<std::size_t>(n), Device{});
  m.interference = Interference::none();
  return m;
}

inline LinkId add_link(Machine& m, std::string name, double bytes_per_s, double latency_s) {
  m.links.push_back(Link{std::move(name), LinkKind::custom, bytes_per_s, latency_s});
  return LinkId(static_cast<std::int32_t>(m.links.size() - 1));
}

// A unidirectional ring: link i carries device i → i + 1 (mod n) at `bytes_per_s` with
// latency `alpha_s`; routes only between neighbours. Memory bandwidth and peak so high
// that reductions take (almost) no time.
inline Machine ring_machine(int n, double alpha_s, double bytes_per_s) {
  Machine m = bare_machine(n, 1e30, 1e30);
  for (int i = 0; i < n; ++i) {
    LinkId l = add_link(m, "ring" + std::to_string(i), bytes_per_s, alpha_s);
    m.routes.push_back(RouteEntry{DeviceId(i), DeviceId((i + 1) % n), {l}});
  }
  return m;
}

// A full-bisection switch: every device has one link to it and one from it, each of
// `bytes_per_s`; a route's latency `alpha_s` sits on the sender's link. f32 peak 1 TFLOP/s.
inline Machine switch_machine(int n, double alpha_s, double bytes_per_s, double memory_bytes_per_s = 1e30) {
  Machine m = bare_machine(n, 1e12, memory_bytes_per_s);
  for (int i = 0; i < n; ++i) {
    auto& d = m.devices[static_cast<std::size_t>(i)];
    d.fabric_out = {add_link(m, "up" + std::to_string(i), bytes_per_s, alpha_s)};
    d.fabric_in = {add_link(m, "down" + std::to_string(i), bytes_per_s, 0)};
  }
  return m;
}

// Builds task graphs by hand; dependencies come from the buffers a task reads, as in lower().
class TgBuilder {
 public:
  explicit TgBuilder(int devices) { tg_.num_devices = devices; }

  BufferId buffer(int device, std::int64_t bytes, Agg init = Agg::none, int node = 0) {
    tg_.buffers.push_back(Buffer{DeviceId(device), Shape{bytes / 4}, DType::f32, init, NodeId(node)});
    writers_.emplace_back();
    return BufferId(static_cast<std::int32_t>(tg_.buffers.size() - 1));
  }
  BufferId input(int device, std::int64_t bytes, int node = 0) {
    Task t = base(TaskKind::input, device, node);
    t.writes = buffer(device, bytes, Agg::none, node);
    t.bytes = bytes;
    add(t);
    return t.writes;
  }
  BufferId compute(int device, double flops, std::int64_t bytes, std::vector<BufferId> reads,
                   std::int64_t out_bytes = 4, int node = 0) {
    Task t = base(TaskKind::compute, device, node);
    t.reads = std::move(reads);
    t.writes = buffer(device, out_bytes, Agg::none, node);
    t.flops = flops;
    t.bytes = bytes;
    add(t);
    return t.writes;
  }
  BufferId move(BufferId src, int to, int node = 0) {
    Task t = base(TaskKind::move, tg_.buffer(src).device.value, node);
    t.dst_device = DeviceId(to);
    t.reads = {src};
    t.bytes = tg_.buffer(src).bytes();
    t.writes = buffer(to, t.bytes, Agg::none, node);
    add(t);
    return t.writes;
  }
  void touch(BufferId src, BufferId dst, TouchOp op = TouchOp::copy, int node = 0) {
    Task t = base(TaskKind::touch, tg_.buffer(dst).device.value, node);
    t.reads = {src};
    t.writes = dst;
    t.op = op;
    t.agg = op == TouchOp::accumulate ? Agg::sum : Agg::none;
    t.bytes = tg_.buffer(src).bytes();
    t.flops = op == TouchOp::accumulate ? static_cast<double>(t.bytes / 4) : 0.0;
    add(t);
  }
  void output(BufferId src, int node = 0) {
    Task t = base(TaskKind::output, tg_.buffer(src).device.value, node);
    t.reads = {src};
    t.bytes = tg_.buffer(src).bytes();
    add(t);
  }
  [[nodiscard]] TaskId last() const { return TaskId(static_cast<std::int32_t>(tg_.tasks.size() - 1)); }
  [[nodiscard]] const TaskGraph& graph() const { return tg_; }

 private:
  static Task base(TaskKind kind, int device, int node) {
    Task t;
    t.kind = kind;
    t.device = t.dst_device = DeviceId(device);
    t.node = NodeId(node);
    return t;
  }
  void add(Task t) {
    const TaskId id(static_cast<std::int32_t>(tg_.tasks.size()));
    for (BufferId b : t.reads)
      for (TaskId w : writers_[b.index()]) t.deps.push_back(w);
    std::sort(t.deps.begin(), t.deps.end());
    t.deps.erase(std::unique(t.deps.begin(), t.deps.end()), t.deps.end());
    if (t.writes.valid()) writers_[t.writes.index()].push_back(id);
    tg_.tasks.push_back(std::move(t));
  }
  TaskGraph tg_;
  std::vector<std::vector<TaskId>> writers_;
};

// Picoseconds of a span, for exact comparisons.
inline std::int64_t ps(double seconds) { return static_cast<std::int64_t>(seconds * 1e12 + (seconds >= 0 ? 0.5 : -0.5)); }

using tessel::testing::error_of;

}  // namespace tessel::sim::testing
