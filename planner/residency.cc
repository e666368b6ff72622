#include "planner/residency.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>

#include "core/error.h"

namespace tessel::planner {

std::vector<Read> reads_of(const Graph& g, const Decomposition& d, NodeId producer,
                           const std::vector<NodeId>& consumers) {
  std::vector<Read> out;
  for (NodeId c : consumers) {
    const Node& n = g.node(c);
    const NodePlan& plan = d.plan(c);
    for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b) {
      const Rect j = plan.partition.block(b);
      const DeviceId dev = plan.devices[static_cast<std::size_t>(b)];
      for (std::size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] != producer) continue;
        if (n.kind == NodeKind::einsum) {
          Rect r;
          r.rank = static_cast<int>(n.einsum.inputs[i].size());
          for (int k = 0; k < r.rank; ++k) {
            r.offset[k] = j.offset[n.einsum.inputs[i][static_cast<std::size_t>(k)]];
            r.size[k] = j.size[n.einsum.inputs[i][static_cast<std::size_t>(k)]];
          }
          out.push_back({r, dev});
        } else if (n.kind == NodeKind::select) {
          for (const SelectPiece& pc : n.pieces) {
            if (pc.input != static_cast<int>(i)) continue;
            Rect piece;
            piece.rank = j.rank;
            for (int k = 0; k < j.rank; ++k) {
              piece.offset[k] = pc.dst_offset[static_cast<std::size_t>(k)];
              piece.size[k] = pc.size[static_cast<std::size_t>(k)];
            }
            Rect inter;
            if (!intersect(j, piece, &inter)) continue;
            Rect src = inter;
            for (int k = 0; k < j.rank; ++k)
              src.offset[k] = pc.src_offset[static_cast<std::size_t>(k)] + (inter.offset[k] - piece.offset[k]);
            out.push_back({src, dev});
          }
        } else {  // an output reads its operand as it is
          out.push_back({j, dev});
        }
      }
    }
  }
  return out;
}

std::vector<std::int64_t> blocks_within(const Partition& p, const Rect& region) {
  std::vector<std::int64_t> out;
  std::array<int, kMaxRank> first{}, last{}, c{};
  for (int k = 0; k < p.rank(); ++k) {
    p.overlapping(k, region.offset[k], region.offset[k] + region.size[k], &first[k], &last[k]);
    if (first[k] >= last[k]) return out;
    c[k] = first[k];
  }
  for (;;) {
    out.push_back(p.block_index(c));
    int k = p.rank() - 1;
    while (k >= 0 && ++c[k] == last[k]) {
      c[k] = first[k];
      --k;
    }
    if (k < 0) return out;
  }
}


void make_resident(const Graph& g, Decomposition& d) {
  const std::vector<bool> weights = weight_inputs(g);
  const auto consumers = g.consumers();
  for (NodeId id : g.ids()) {
    const Node& n = g.node(id);
    if (!weights[id.index()] && n.kind != NodeKind::fill) continue;
    const std::vector<Read> reads = reads_of(g, d, id, consumers[id.index()]);
    if (reads.empty()) continue;
    // The common refinement of every region read: each block is then read whole or not
    // at all by every reading block.
    const Shape& shape = n.shape;
    std::vector<std::vector<std::int64_t>> bounds(shape.size());
    for (std::size_t k = 0; k < shape.size(); ++k) {
      std::set<std::int64_t> cuts = {0, shape[k]};
      for (const Read& r : reads) {
        cuts.insert(r.region.offset[k]);
        cuts.insert(r.region.offset[k] + r.region.size[k]);
      }
      bounds[k].assign(cuts.begin(), cuts.end());
    }
    NodePlan plan;
    plan.partition = Partition::from_bounds(std::move(bounds));
    const std::int64_t blocks = plan.partition.num_blocks();
    std::vector<std::vector<DeviceId>> holders(static_cast<std::size_t>(blocks));
    for (const Read& r : reads)
      for (std::int64_t b : blocks_within(plan.partition, r.region))
        holders[static_cast<std::size_t>(b)].push_back(r.device);
    for (std::int64_t b = 0; b < blocks; ++b) {
      auto& h = holders[static_cast<std::size_t>(b)];
      std::sort(h.begin(), h.end());
      h.erase(std::unique(h.begin(), h.end()), h.end());
      if (h.empty()) {
        plan.devices.emplace_back(static_cast<std::int32_t>(b % d.num_devices));
        plan.replicas.emplace_back();
        continue;
      }
      plan.devices.push_back(h.front());
      plan.replicas.emplace_back(h.begin() + 1, h.end());
    }
    bool any = false;
    for (const auto& r : plan.replicas) any = any || !r.empty();
    if (!any) plan.replicas.clear();
    d.nodes[id.index()] = std::move(plan);
  }
  d.validate(g);
}

std::vector<std::int64_t> resident_weight_bytes(const Graph& g, const Decomposition& d) {
  std::vector<std::int64_t> bytes(static_cast<std::size_t>(d.num_devices), 0);
  const std::vector<bool> weights = weight_inputs(g);
  for (NodeId id : g.ids()) {
    if (!weights[id.index()]) continue;
    const NodePlan& plan = d.plan(id);
    const std::int64_t per = dtype_bytes(g.node(id).dtype);
    for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b) {
      const std::int64_t block = plan.partition.block(b).elements() * per;
      bytes[plan.devices[static_cast<std::size_t>(b)].index()] += block;
      if (!plan.replicas.empty())
        for (DeviceId r : plan.replicas[static_cast<std::size_t>(b)]) bytes[r.index()] += block;
    }
  }
  return bytes;
}

int device_over_memory(const Graph& g, const Decomposition& d, const Machine& m) {
  const std::vector<std::int64_t> bytes = resident_weight_bytes(g, d);
  for (int dev = 0; dev < d.num_devices && dev < m.num_devices(); ++dev) {
    const std::int64_t capacity = m.type_of(DeviceId(dev)).memory_capacity_bytes;
    if (capacity > 0 && bytes[static_cast<std::size_t>(dev)] > capacity) return dev;
  }
  return -1;
}

void check_resident_memory(const Graph& g, const Decomposition& d, const Machine& m) {
  const int dev = device_over_memory(g, d, m);
  if (dev < 0) return;
  const std::int64_t capacity = m.type_of(DeviceId(dev)).memory_capacity_bytes;
  const std::int64_t held = resident_weight_bytes(g, d)[static_cast<std::size_t>(dev)];
  char gib[64];
  std::snprintf(gib, sizeof gib, "%.2f GiB of weights (%lld bytes)", static_cast<double>(held) / (1 << 30),
                static_cast<long long>(held));
  char cap[64];
  std::snprintf(cap, sizeof cap, "%.2f GiB (%lld bytes)", static_cast<double>(capacity) / (1 << 30),
                static_cast<long long>(capacity));
  fail("--weights resident: device ", dev, " of machine '", m.name, "' would hold ", gib,
       " at rest, more than its memory of ", cap,
       "; shard the weights (megatron, dp-tp), use more devices, or --weights fetched");
}

}  // namespace tessel::planner
