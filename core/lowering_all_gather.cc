#include "core/lowering_all_gather.h"

#include <algorithm>
#include <array>
#include <unordered_map>

namespace tessel {

namespace {

struct RectHash {
  std::size_t operator()(const Rect& r) const { return hash_rect(r); }
};

// The region of operand `operand` that join block `j` reads.
Rect operand_region(const Einsum& e, std::size_t operand, const Rect& j) {
  const auto& idx = e.inputs[operand];
  Rect r;
  r.rank = static_cast<int>(idx.size());
  for (int k = 0; k < r.rank; ++k) {
    r.offset[k] = j.offset[idx[static_cast<std::size_t>(k)]];
    r.size[k] = j.size[idx[static_cast<std::size_t>(k)]];
  }
  return r;
}

// Blocks of `p` overlapping `r`, ascending; false when one of them is not inside `r`.
bool blocks_inside(const Partition& p, const Rect& r, std::vector<std::int64_t>* out) {
  const int rank = p.rank();
  std::array<int, kMaxRank> first{}, last{}, c{};
  for (int d = 0; d < rank; ++d) {
    p.overlapping(d, r.offset[d], r.offset[d] + r.size[d], &first[d], &last[d]);
    if (first[d] >= last[d]) return false;
    c[d] = first[d];
  }
  for (;;) {
    const std::int64_t b = p.block_index(c);
    if (!r.contains(p.block(b))) return false;
    out->push_back(b);
    int d = rank - 1;
    while (d >= 0 && ++c[d] == last[d]) {
      c[d] = first[d];
      --d;
    }
    if (d < 0) break;
  }
  std::sort(out->begin(), out->end());
  return true;
}

}  // namespace

std::vector<AllGather> find_all_gathers(const Einsum& e, std::size_t operand, const NodePlan& plan,
                                        const Partition& produced, const std::vector<DeviceId>& produced_devices) {
  // Distinct regions read, in first-read order, with the devices reading each.
  std::vector<Rect> regions;
  std::vector<std::vector<DeviceId>> readers;
  std::unordered_map<Rect, std::size_t, RectHash> seen;
  for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b) {
    const Rect r = operand_region(e, operand, plan.partition.block(b));
    auto [it, added] = seen.emplace(r, regions.size());
    if (added) {
      regions.push_back(r);
      readers.emplace_back();
    }
    readers[it->second].push_back(plan.devices[static_cast<std::size_t>(b)]);
  }
  std::vector<AllGather> out;
  for (std::size_t i = 0; i < regions.size(); ++i) {
    AllGather ag;
    ag.region = regions[i];
    if (!blocks_inside(produced, ag.region, &ag.blocks) || ag.blocks.size() < 2) continue;
    auto& who = readers[i];
    std::sort(who.begin(), who.end());
    bool ok = true;
    for (std::int64_t b : ag.blocks) {
      const DeviceId dev = produced_devices[static_cast<std::size_t>(b)];
      ok = ok && std::find(ag.devices.begin(), ag.devices.end(), dev) == ag.devices.end() &&
           std::binary_search(who.begin(), who.end(), dev);
      ag.devices.push_back(dev);
    }
    if (ok) out.push_back(std::move(ag));
  }
  return out;
}

}  // namespace tessel
