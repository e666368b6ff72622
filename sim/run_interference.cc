// Re-timing running work (sim/run.h): a device whose compute and comm lanes are both
// busy runs its compute task and its outgoing moves slower (interference; on a chip shared
// by virtual devices, when any of them computes and any communicates), and virtual devices
// of one chip share it: compute tasks running on a chip at once each run max(1, sum of
// their chip shares) times slower. The factors are re-applied whenever a lane starts or
// stops.

#include <algorithm>
#include <cmath>

#include "sim/run.h"

namespace tessel::sim::detail {

// The factors per device (Interference::resolve()'s row for its type's SM count); off
// when the options turn interference off or no factor exceeds 1. The chip groups.
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
  chip_of_.assign(d, -1);
  chip_members_.clear();
  std::vector<std::int32_t> group_of_chip;  // Device::chip -> group index
  for (std::size_t dev = 0; dev < d && dev < m_.devices.size(); ++dev) {
    const std::int32_t chip = m_.devices[dev].chip;
    if (chip < 0) continue;
    if (static_cast<std::size_t>(chip) >= group_of_chip.size()) group_of_chip.resize(static_cast<std::size_t>(chip) + 1, -1);
    std::int32_t& g = group_of_chip[static_cast<std::size_t>(chip)];
    if (g < 0) {
      g = static_cast<std::int32_t>(chip_members_.size());
      chip_members_.emplace_back();
    }
    chip_of_[dev] = g;
    chip_members_[static_cast<std::size_t>(g)].push_back(static_cast<std::int32_t>(dev));
  }
  share_ = std::any_of(chip_members_.begin(), chip_members_.end(), [](const auto& v) { return v.size() > 1; });
  chip_load_.assign(chip_members_.size(), 0);
  if (!o_.task_chip_share.empty() && o_.task_chip_share.size() != tg_.tasks.size())
    fail("simulate: task_chip_share has ", o_.task_chip_share.size(), " entries for ", tg_.tasks.size(), " tasks");
  retime_ = interfere_ || share_;
}

// The factor a compute task `task` running on `dev` runs slower by now.
double Run::compute_factor(std::size_t dev, std::int32_t task) const {
  double f = interfere_ && applied_comm_[dev] && !is_fused(task) ? compute_slowdown_[dev] : 1.0;
  if (share_ && chip_of_[dev] >= 0) {
    const std::int64_t load = chip_load_[static_cast<std::size_t>(chip_of_[dev])];
    if (load > kShareUnits) f *= static_cast<double>(load) / static_cast<double>(kShareUnits);
  }
  return f;
}

// A compute task's share of its chip (SimOptions::task_chip_share), in units.
std::int64_t Run::chip_share_units(std::int32_t task) const {
  if (o_.task_chip_share.empty()) return kShareUnits;
  const double s = o_.task_chip_share[static_cast<std::size_t>(task)];
  if (!(s > 0) || s >= 1) return kShareUnits;
  return std::max<std::int64_t>(1, std::llround(s * static_cast<double>(kShareUnits)));
}

// Compute task `task` starts (+1) or ends (-1) on `dev`: every device of its chip is re-timed.
void Run::chip_compute(std::size_t dev, std::int32_t task, int sign) {
  const std::int32_t g = chip_of_[dev];
  if (g < 0) return;
  chip_load_[static_cast<std::size_t>(g)] += sign * chip_share_units(task);
  for (std::int32_t other : chip_members_[static_cast<std::size_t>(g)]) mark_interference(static_cast<std::size_t>(other));
}

// Once the state at time t has settled: devices whose lanes changed between busy and
// idle (or whose chip's load changed) get their running work re-timed.
void Run::apply_interference(SimTime t) {
  for (std::int32_t d : interf_list_) {
    const auto dev = static_cast<std::size_t>(d);
    interf_dirty_[dev] = 0;
    // On a chip shared by virtual devices, interference is the chip's: a copy on one
    // virtual device is slowed by a GEMM on another (the streams of one GPU, as the overlap
    // benchmark measures them), and compute by communication on any of them.
    char comm_now = 0, compute_now = 0;
    const std::int32_t g = share_ ? chip_of_[dev] : -1;
    if (g >= 0) {
      for (std::int32_t other : chip_members_[static_cast<std::size_t>(g)]) {
        comm_now = comm_now || (interfere_ && lane_busy_[static_cast<std::size_t>(other) * kLanes + kComm] > 0);
        compute_now = compute_now || compute_running_[static_cast<std::size_t>(other)] >= 0;
      }
    } else {
      comm_now = interfere_ && lane_busy_[dev * kLanes + kComm] > 0;
      compute_now = compute_running_[dev] >= 0;
    }
    applied_comm_[dev] = comm_now;
    const std::int32_t c = compute_running_[dev];
    if (c >= 0) {
      const double factor = compute_factor(dev, c);
      if (factor != run_factor_[dev]) {
        run_remaining_[dev] -= static_cast<double>(t - run_last_[dev]) / run_factor_[dev];
        if (run_remaining_[dev] < 0) run_remaining_[dev] = 0;
        run_last_[dev] = t;
        run_factor_[dev] = factor;
        schedule_compute(c, dev, t);
      }
    }
    if (interfere_ && compute_now != applied_compute_[dev]) {
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
