#include "sim/offload.h"

#include "core/checked.h"
#include "core/error.h"

namespace tessel::sim {

SimTime host_copy_ps(const Machine& m, const Task& t, std::vector<std::int64_t>& link_bytes) {
  const std::vector<LinkId> route = m.host_route(t.device, t.kind == TaskKind::evict);
  for (LinkId l : route)
    link_bytes[l.index()] = checked_add(link_bytes[l.index()], t.bytes, "simulate: bytes over one link");
  // One copy alone on its route: the rate its size reaches (Link::bytes_per_s_by_size).
  const double bw = m.route_bytes_per_s(route, static_cast<double>(t.bytes));
  const double s = m.route_latency_s(route) + (t.bytes > 0 ? static_cast<double>(t.bytes) / bw : 0.0);
  return to_sim_time(s);
}

void check_host_memory(const TaskGraph& tg, const Machine& m) {
  std::vector<std::int64_t> held(m.hosts.size(), 0);
  bool any = false;
  for (const Buffer& b : tg.buffers) {
    if (!b.host) continue;
    any = true;
    const auto h = static_cast<std::size_t>(m.device(b.device).host);
    held[h] = checked_add(held[h], b.bytes(), "simulate: host bytes");
  }
  if (!any) return;
  for (std::size_t h = 0; h < held.size(); ++h) {
    const std::int64_t cap = m.hosts[h].memory_capacity_bytes;
    if (cap > 0 && held[h] > cap)
      fail("simulate: host ", h, " ('", m.hosts[h].name, "') must hold ", held[h],
           " bytes of evicted buffers and host-resident inputs, more than its memory_capacity_bytes (", cap, ")");
  }
}

}  // namespace tessel::sim
