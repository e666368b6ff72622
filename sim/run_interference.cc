// Interference (sim/run.h): a device whose compute and comm lanes are both busy runs
// its compute task and its outgoing moves slower; the factors are re-applied whenever
// either lane starts or stops.

#include <algorithm>

#include "sim/run.h"

namespace tessel::sim::detail {

// The factors per device (Interference::resolve()'s row for its type's SM count); off
// when the options turn interference off or no factor exceeds 1.
void Run::setup_interference() {
  const auto d = static_cast<std::size_t>(devices_);
  interfere_ = o_.interference;
  if (interfere_) {
    compute_slowdown_.resize(d);
    for (std::size_t dev = 0; dev < d; ++dev)
      compute_slowdown_[dev] = m_.interference.compute_slowdown(m_.type_of(DeviceId(static_cast<std::int32_t>(dev))).sm_count);
    comm_slowdown_ = m_.interference.comm_slowdown();
    interfere_ = comm_slowdown_ > 1 ||
                 std::any_of(compute_slowdown_.begin(), compute_slowdown_.end(), [](double s) { return s > 1; });
  }
}

// Once the state at time t has settled: devices whose compute or comm lane changed
// between busy and idle get their running work re-timed.
void Run::apply_interference(SimTime t) {
  for (std::int32_t d : interf_list_) {
    const auto dev = static_cast<std::size_t>(d);
    interf_dirty_[dev] = 0;
    const std::size_t slot = dev * kLanes;
    const char comm_now = lane_busy_[slot + kComm] > 0;
    const char compute_now = compute_running_[dev] >= 0;
    if (comm_now != applied_comm_[dev]) {
      applied_comm_[dev] = comm_now;
      const std::int32_t c = compute_running_[dev];
      const double factor = comm_now && !is_fused(c) ? compute_slowdown_[dev] : 1.0;
      if (c >= 0 && factor != run_factor_[dev]) {
        run_remaining_[dev] -= static_cast<double>(t - run_last_[dev]) / run_factor_[dev];
        if (run_remaining_[dev] < 0) run_remaining_[dev] = 0;
        run_last_[dev] = t;
        run_factor_[dev] = factor;
        schedule_compute(c, dev, t);
      }
    }
    if (compute_now != applied_compute_[dev]) {
      applied_compute_[dev] = compute_now;
      const std::size_t base = dev * chan_stride_;
      for (std::size_t c = 0; c < static_cast<std::size_t>(o_.comm_channels); ++c)
        if (moves_active_[base + c] >= 0)
          network_->set_slowdown(static_cast<std::int32_t>(base + c),
                                 compute_now && !is_fused(moves_active_[base + c]) ? comm_slowdown_ : 1.0, t);
    }
  }
  interf_list_.clear();
}

}  // namespace tessel::sim::detail
