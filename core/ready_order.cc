#include "core/ready_order.h"

#include <cassert>

#include "core/machine.h"
#include "core/task_graph.h"

namespace tessel {

namespace {
std::int32_t mod(std::int32_t v, std::int32_t n) { return ((v % n) + n) % n; }
}  // namespace

std::int32_t stagger_step(std::int32_t src, std::int32_t dst, StaggerLayout layout) {
  const std::int32_t n = layout.devices;
  assert(src >= 0 && src < n && dst >= 0 && dst < n);
  if (!layout.two_level()) return mod(dst - src, n);
  const std::int32_t g = layout.per_node, nodes = n / g;
  const std::int32_t q = src / g, l = src % g, q2 = dst / g, l2 = dst % g;
  if (q == q2) return mod(l2 - l, g);
  return g + (mod(q2 - q, nodes) - 1) * g + mod(l2 - l, g);
}

std::int32_t stagger_peer(std::int32_t src, std::int32_t step, StaggerLayout layout) {
  const std::int32_t n = layout.devices;
  assert(src >= 0 && src < n && step >= 0 && step < n);
  if (!layout.two_level()) return (src + step) % n;
  const std::int32_t g = layout.per_node, nodes = n / g;
  const std::int32_t q = src / g, l = src % g;
  if (step < g) return q * g + (l + step) % g;
  const std::int32_t u = step - g, d = u / g + 1, t = u % g;
  return ((q + d) % nodes) * g + (l + t) % g;
}

std::uint64_t ready_tie(const Task& t, TaskId id, StaggerLayout layout) {
  const std::int32_t step = t.kind == TaskKind::move ? stagger_step(t.device.value, t.dst_device.value, layout) : 0;
  return ready_tie(step, id.value);
}

std::vector<std::uint64_t> ready_ties(const TaskGraph& tg, StaggerLayout layout) {
  std::vector<std::uint64_t> ties(tg.tasks.size());
  for (std::size_t i = 0; i < tg.tasks.size(); ++i)
    ties[i] = ready_tie(tg.tasks[i], TaskId(static_cast<std::int32_t>(i)), layout);
  return ties;
}

std::int32_t devices_per_host(const Machine& m, std::int32_t devices) {
  auto host = [&](std::int32_t d) { return m.device(DeviceId(d)).host; };
  std::int32_t g = 0;
  while (g < devices && host(g) == host(0)) ++g;
  if (g == devices || devices % g != 0) return 0;
  for (std::int32_t i = 0; i < devices; ++i)
    if (host(i) != host(i - i % g) || (i % g == 0 && i > 0 && host(i) == host(i - g))) return 0;
  return g;
}

}  // namespace tessel
