// A run's result (sim/run.h): statistics per device, bytes per link, memory peaks,
// the critical path and the timeline; and SimResult as JSON.

#include <algorithm>

#include <nlohmann/json.hpp>

#include "sim/run.h"

namespace tessel::sim {

namespace detail {

SimResult Run::finish() {
  SimResult r;
  r.network = std::string(network_->name());
  r.policy = o_.policy;
  SimTime makespan = 0;
  std::int32_t last = -1;
  for (std::int32_t i = 0; i < n_; ++i)
    if (rec_[static_cast<std::size_t>(i)].end >= makespan) {
      makespan = rec_[static_cast<std::size_t>(i)].end;
      last = i;
    }
  r.makespan_s = to_seconds(makespan);
  r.events = events_;
  r.dispatch_held_tasks = gate_held_;
  r.dispatch_wait_s = to_seconds(gate_wait_);
  r.events_unreduced = events_;
  r.bytes_moved = bytes_moved_;
  r.link_bytes = std::move(link_bytes_);
  r.devices.resize(static_cast<std::size_t>(devices_));
  for (std::size_t dev = 0; dev < r.devices.size(); ++dev) {
    DeviceStats& s = r.devices[dev];
    s.compute_busy_s = to_seconds(lane_total_[dev * kLanes + kCompute]);
    s.comm_busy_s = to_seconds(lane_total_[dev * kLanes + kComm]);
    s.copy_busy_s = to_seconds(lane_total_[dev * kLanes + kCopy]);
    s.busy_s = to_seconds(any_total_[dev]);
    s.idle_s = to_seconds(makespan - any_total_[dev]);
    s.tasks = tasks_on_[dev];
    s.peak_memory_bytes = peak_[dev];
    s.peak_memory_time_s = to_seconds(peak_ps_[dev]);
    r.peak_memory_bytes = std::max(r.peak_memory_bytes, peak_[dev]);
    if (peak_[dev] > capacity_[dev])
      r.over_capacity.push_back(MemoryOverflow{DeviceId(static_cast<std::int32_t>(dev)), capacity_[dev], peak_[dev],
                                               peak_[dev] - capacity_[dev], to_seconds(first_over_ps_[dev]),
                                               to_seconds(peak_ps_[dev])});
  }
  for (std::int32_t i = last; i >= 0; i = rec_[static_cast<std::size_t>(i)].cause) r.critical_path.emplace_back(i);
  std::reverse(r.critical_path.begin(), r.critical_path.end());
  r.memory = std::move(memory_);
  r.timeline.source = "sim";
  r.timeline.spans.reserve(static_cast<std::size_t>(n_));
  for (std::int32_t i = 0; i < n_; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    // Inputs and outputs have no lane of their own; the timeline shows them on compute.
    const Lane lane = info_[ui].lane == kNoLane ? Lane::compute : static_cast<Lane>(info_[ui].lane);
    r.timeline.spans.push_back(Span{TaskId(i), DeviceId(info_[ui].dev), lane, to_seconds(rec_[ui].start),
                                    to_seconds(rec_[ui].end)});
  }
  return r;
}

}  // namespace detail

nlohmann::json to_json(const SimResult& r, const Machine& m) {
  using nlohmann::json;
  json devices = json::array();
  for (std::size_t d = 0; d < r.devices.size(); ++d) {
    const DeviceStats& s = r.devices[d];
    devices.push_back({{"device", d},
                       {"compute_busy_s", s.compute_busy_s},
                       {"comm_busy_s", s.comm_busy_s},
                       {"copy_busy_s", s.copy_busy_s},
                       {"idle_s", s.idle_s},
                       {"tasks", s.tasks},
                       {"peak_memory_bytes", s.peak_memory_bytes}});
  }
  json links = json::array();
  for (std::size_t l = 0; l < r.link_bytes.size(); ++l) {
    if (r.link_bytes[l] == 0) continue;
    const Link& link = m.links.at(l);
    double util = r.makespan_s > 0 ? static_cast<double>(r.link_bytes[l]) / (link.bytes_per_s * r.makespan_s) : 0.0;
    links.push_back({{"link", link.name}, {"bytes", r.link_bytes[l]}, {"utilization", util}});
  }
  json over = json::array();
  for (const MemoryOverflow& o : r.over_capacity)
    over.push_back({{"device", o.device.value},
                    {"memory_capacity_bytes", o.capacity_bytes},
                    {"peak_memory_bytes", o.peak_bytes},
                    {"excess_bytes", o.excess_bytes},
                    {"first_exceeded_s", o.first_exceeded_s},
                    {"peak_memory_time_s", o.peak_time_s}});
  json path = json::array();
  for (TaskId t : r.critical_path) path.push_back(t.value);
  return {{"network", r.network},
          {"policy", std::string(to_string(r.policy))},
          {"machine", m.name},
          {"makespan_s", r.makespan_s},
          {"events", r.events},
          {"sim_wall_s", r.sim_wall_s},
          {"events_per_s", r.sim_wall_s > 0 ? static_cast<double>(r.events) / r.sim_wall_s : 0.0},
          // A collective node reduced by symmetry (sim/collective_symmetry.h): events and
          // events_per_s count what was simulated, events_unreduced what the full run has.
          {"symmetry", r.symmetry_period > 0 ? "reduced" : "full"},
          {"symmetry_period", r.symmetry_period},
          {"events_unreduced", r.events_unreduced},
          {"symmetry_note", r.symmetry_note},
          {"bytes_moved", r.bytes_moved},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"dispatch_held_tasks", r.dispatch_held_tasks},
          {"dispatch_wait_s", r.dispatch_wait_s},
          {"devices", devices},
          {"links", links},
          {"critical_path", {{"tasks", path.size()}, {"task_ids", path}}},
          {"over_capacity", over}};
}

}  // namespace tessel::sim
