// The cache model (SimOptions::task_seconds_cold, sim/run.h): per device an LRU set of
// the buffers it used last, and the extra time a compute task takes for its bytes not
// in it. Evicts and loads on a host_copy_lane copy lane run on another core: they leave
// the worker's LRU alone, and a load's destination leaves it.

#include <algorithm>

#include "sim/run.h"

namespace tessel::sim::detail {

void Run::setup_cache() {
  cache_model_ = !o_.task_seconds_cold.empty();
  if (!cache_model_) return;
  const auto d = static_cast<std::size_t>(devices_);
  const std::size_t nb = bufs_.size();
  cache_cap_.assign(d, 0);
  for (std::size_t dev = 0; dev < d; ++dev) {
    const std::int64_t known = m_.type_of(DeviceId(static_cast<std::int32_t>(dev))).cache_capacity_bytes;
    cache_cap_[dev] = known > 0 && o_.cache_capacity_bytes > 0 ? o_.cache_capacity_bytes : known;
  }
  cache_used_.assign(d, 0);
  lru_head_.assign(d, -1);
  lru_tail_.assign(d, -1);
  lru_prev_.assign(nb, -1);
  lru_next_.assign(nb, -1);
  in_cache_.assign(nb, 0);
  cold_extra_.assign(static_cast<std::size_t>(n_), 0);
  for (std::size_t i = 0; i < static_cast<std::size_t>(n_); ++i) {
    const double cold = o_.task_seconds_cold[i];
    // Devices without a known cache keep their hot times.
    if (tg_.tasks[i].kind == TaskKind::compute && cold >= 0 && cache_cap_[static_cast<std::size_t>(info_[i].dev)] > 0)
      cold_extra_[i] = std::max<SimTime>(0, to_sim_time(cold) - static_cast<SimTime>(info_[i].amount));
  }
  // As the CPU executor starts a run: each worker first touches every buffer of its
  // device in id order, then writes its input blocks. (The executor preallocates so
  // while all buffers fit in a quarter of the RAM; beyond, it allocates each buffer
  // when first written, and this start state is then only an approximation.)
  for (std::size_t b = 0; b < nb; ++b) cache_use(static_cast<std::int32_t>(b));
  for (std::size_t i = 0; i < static_cast<std::size_t>(n_); ++i)
    if (tg_.tasks[i].kind == TaskKind::input) cache_use(info_[i].writes);
}

void Run::lru_unlink(std::int32_t b, std::size_t dev) {
  const auto ub = static_cast<std::size_t>(b);
  const std::int32_t p = lru_prev_[ub], nx = lru_next_[ub];
  if (p >= 0) lru_next_[static_cast<std::size_t>(p)] = nx; else lru_head_[dev] = nx;
  if (nx >= 0) lru_prev_[static_cast<std::size_t>(nx)] = p; else lru_tail_[dev] = p;
  lru_prev_[ub] = lru_next_[ub] = -1;
  in_cache_[ub] = 0;
  cache_used_[dev] -= bufs_[ub].bytes;
}

// Buffer b was just used on its device: most recently used, evicting the least
// recently used beyond the capacity.
void Run::cache_use(std::int32_t b) {
  if (b < 0) return;
  const auto ub = static_cast<std::size_t>(b);
  const auto dev = static_cast<std::size_t>(bufs_[ub].dev);
  const std::int64_t cap = cache_cap_[dev];
  if (cap <= 0) return;
  if (in_cache_[ub]) lru_unlink(b, dev);
  if (bufs_[ub].bytes > cap) {  // flushes the cache and does not fit itself
    while (lru_tail_[dev] >= 0) lru_unlink(lru_tail_[dev], dev);
    return;
  }
  lru_next_[ub] = lru_head_[dev];
  if (lru_head_[dev] >= 0) lru_prev_[static_cast<std::size_t>(lru_head_[dev])] = b; else lru_tail_[dev] = b;
  lru_head_[dev] = b;
  in_cache_[ub] = 1;
  cache_used_[dev] += bufs_[ub].bytes;
  while (cache_used_[dev] > cap) lru_unlink(lru_tail_[dev], dev);
}

// Task i starts: the extra picoseconds its data's absence from the cache costs it
// (compute tasks with a cold time), then its buffers become the most recently used.
SimTime Run::cache_start(std::int32_t i) {
  const auto ui = static_cast<std::size_t>(i);
  const Info& in = info_[ui];
  const auto reads = adj_.begin() + adj_offset_[ui];
  SimTime extra = 0;
  if (cold_extra_[ui] > 0) {
    std::int64_t total = 0, missing = 0;
    auto count = [&](std::int32_t b) {
      const auto ub = static_cast<std::size_t>(b);
      total += bufs_[ub].bytes;
      if (!in_cache_[ub]) missing += bufs_[ub].bytes;
    };
    // Each buffer once: an operand read twice (x·x of RMSNorm) or read and written is
    // one set of cache lines.
    auto seen_before = [&](std::uint16_t k, std::int32_t b) {
      for (std::uint16_t j = 0; j < k; ++j)
        if (reads[j] == b) return true;
      return false;
    };
    for (std::uint16_t k = 0; k < in.reads; ++k)
      if (!seen_before(k, reads[k])) count(reads[k]);
    if (in.writes >= 0 && !seen_before(in.reads, in.writes)) count(in.writes);
    if (total > 0)
      extra = to_sim_ps(static_cast<double>(cold_extra_[ui]) * static_cast<double>(missing) /
                        static_cast<double>(total));
  }
  if (in.lane == kComm) {  // a move: its destination, on the receiving device
    cache_use(in.writes);
  } else if (in.lane == kCopy && in.slot_lane != kCompute) {
    // An evict or load beside the worker (host_copy_lane: the executor's copy lane, on
    // another thread and core): the worker touched none of its buffers, so its LRU stays
    // as it was, and a load's destination, written by the other core, is not in the
    // worker's cache: the compute that reads it is charged its cold extra.
    if (tg_.tasks[ui].kind == TaskKind::load && in.writes >= 0 && in_cache_[static_cast<std::size_t>(in.writes)])
      lru_unlink(in.writes, static_cast<std::size_t>(bufs_[static_cast<std::size_t>(in.writes)].dev));
  } else {
    for (std::uint16_t k = 0; k < in.reads; ++k) cache_use(reads[k]);
    cache_use(in.writes);
  }
  return extra;
}

}  // namespace tessel::sim::detail
