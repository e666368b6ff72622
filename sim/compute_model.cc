#include "sim/compute_model.h"

#include <algorithm>

#include "core/error.h"

namespace tessel::sim {

double memory_traffic_bytes(const Task& t) {
  const auto b = static_cast<double>(t.bytes);
  if (t.kind == TaskKind::touch) return t.op == TouchOp::accumulate ? 3 * b : 2 * b;
  return b;
}

double footprint_bytes(const Task& t) {
  const auto b = static_cast<double>(t.bytes);
  return t.kind == TaskKind::touch ? 2 * b : b;
}

double inner_rows(const Task& t) {
  if (t.src.rank == 0) return 1;
  const std::int64_t inner = t.src.size[t.src.rank - 1];
  return inner > 0 ? static_cast<double>(t.src.elements() / inner) : 0.0;
}

double compute_seconds(const Task& t, const TaskGraph& tg, const DeviceType& dt) {
  if (t.kind == TaskKind::input || t.kind == TaskKind::output || t.kind == TaskKind::move) return 0;
  double flop_s = 0;
  if (t.flops > 0) {
    DType dtype = tg.buffer(t.writes).dtype;
    double peak = dt.peak(dtype);
    if (!(peak > 0))
      fail("device type '", dt.name, "' has no peak_flops_per_s for ", to_string(dtype), " (needed by ",
           to_string(t.kind), " tasks)");
    const bool generic_rate = t.kind == TaskKind::compute && !t.contraction && dt.generic_flops_per_s > 0;
    if (!generic_rate) {
      flop_s = t.flops / (peak * dt.efficiency_at(t.flops));
    } else if (dt.transcendental_flops_per_s > 0) {
      flop_s = (t.flops - t.transcendental_flops) / dt.generic_flops_per_s +
               t.transcendental_flops / dt.transcendental_flops_per_s;
    } else {
      flop_s = t.flops / dt.generic_flops_per_s;
    }
    if (generic_rate) flop_s += inner_rows(t) * dt.generic_row_s;
  }
  const double traffic = memory_traffic_bytes(t);
  const double footprint = footprint_bytes(t);
  double bandwidth = dt.memory_bytes_per_s;
  if (dt.cache_bytes_per_s > 0 && footprint <= static_cast<double>(dt.cache_capacity_bytes))
    bandwidth = dt.cache_bytes_per_s;
  else if (dt.outer_cache_bytes_per_s > 0 && footprint <= static_cast<double>(dt.outer_cache_capacity_bytes))
    bandwidth = dt.outer_cache_bytes_per_s;
  double mem_s = traffic / bandwidth;
  if (t.kind == TaskKind::touch && dt.copy_row_s > 0) mem_s += inner_rows(t) * dt.copy_row_s;
  return std::max(flop_s, mem_s) + dt.launch_latency_s;
}

}  // namespace tessel::sim
