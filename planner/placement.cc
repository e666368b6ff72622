#include "planner/placement.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "planner/residency.h"
#include "planner/strategy.h"

namespace tessel::planner {

std::vector<std::string> placement_names() { return {"round-robin", "greedy", "locality"}; }

namespace {

// Bytes of each device's share of the operands block `b` of `id` reads, given the
// placement of the nodes before it.
std::vector<double> operand_bytes_by_device(const Graph& g, const Decomposition& d, NodeId id, std::int64_t b) {
  std::vector<double> by(static_cast<std::size_t>(d.num_devices), 0.0);
  const Node& n = g.node(id);
  Rect j = d.plan(id).partition.block(b);
  for (std::size_t i = 0; i < n.inputs.size(); ++i) {
    NodeId p = n.inputs[i];
    Rect r;
    if (n.kind == NodeKind::einsum) {
      r.rank = static_cast<int>(n.einsum.inputs[i].size());
      for (int k = 0; k < r.rank; ++k) {
        r.offset[k] = j.offset[n.einsum.inputs[i][static_cast<std::size_t>(k)]];
        r.size[k] = j.size[n.einsum.inputs[i][static_cast<std::size_t>(k)]];
      }
    } else if (g.node(p).shape == n.shape) {
      r = j;
    } else {
      continue;  // a select of another shape: not modelled
    }
    const OutputBlocks out = output_blocks(g, p, d.plan(p));
    for (std::int64_t ob = 0; ob < out.partition.num_blocks(); ++ob) {
      Rect inter;
      if (!intersect(r, out.partition.block(ob), &inter)) continue;
      by[out.devices[static_cast<std::size_t>(ob)].index()] +=
          static_cast<double>(inter.elements() * dtype_bytes(g.node(p).dtype));
    }
  }
  return by;
}

// Inputs and fills start where they are first read: each block on one of the devices
// of its first consumer that reads it (then the next consumer's, when the first does
// not read it), the one holding the fewest of this node's elements so far (ties: the first
// reader), so that a block read on one device starts there and the blocks a group of
// devices all read are spread over that group; a block no one reads keeps its
// round-robin device. Their partition is their first consumer's need (strategy.cc,
// fill_unplanned), but numbered in their own index order, so that round-robin alone
// would put a block of a weight [d, f] split (4, 2) on another device than the block of
// its reader's join (…, f, d) split (…, 2, 4) that reads it, and every step would move
// it there. Spreading matters for a block many devices read: an FFN's x split by rows
// is read whole by the four devices of its row group, and all of it on the first of
// them made that device send every block three times while it computed (its sends
// slowed by interference, the other three waiting); spread, the four exchange one
// block each, an all-gather. (Resident weights and fills are then made resident on
// every reader: residency.h.)
void place_leaves_at_first_reader(const Graph& g, Decomposition& d, const std::vector<char>& placed) {
  const auto consumers = g.consumers();
  for (NodeId id : g.ids()) {
    const NodeKind kind = g.node(id).kind;
    if ((kind != NodeKind::input && kind != NodeKind::fill) || placed[id.index()]) continue;
    NodePlan& plan = d.nodes[id.index()];
    // Per block, the devices of the first consumer that reads it, in read order.
    std::vector<std::vector<DeviceId>> readers(plan.devices.size());
    std::vector<std::int32_t> by(plan.devices.size(), -1);  // that consumer
    for (std::size_t c = 0; c < consumers[id.index()].size(); ++c)
      for (const Read& r : reads_of(g, d, id, {consumers[id.index()][c]}))
        for (std::int64_t b : blocks_within(plan.partition, r.region)) {
          const auto u = static_cast<std::size_t>(b);
          if (by[u] >= 0 && by[u] != static_cast<std::int32_t>(c)) continue;
          by[u] = static_cast<std::int32_t>(c);
          if (std::find(readers[u].begin(), readers[u].end(), r.device) == readers[u].end())
            readers[u].push_back(r.device);
        }
    std::vector<std::int64_t> held(static_cast<std::size_t>(d.num_devices), 0);
    for (std::size_t u = 0; u < readers.size(); ++u) {
      if (readers[u].empty()) continue;
      DeviceId best = readers[u].front();
      for (DeviceId dev : readers[u])
        if (held[dev.index()] < held[best.index()]) best = dev;
      plan.devices[u] = best;
      held[best.index()] += plan.partition.block(static_cast<std::int64_t>(u)).elements();
    }
  }
}

// A node of fewer blocks than devices, B dividing n: block b on device b·n/B rather than
// b, so that its blocks sit among the n-block nodes around it instead of on the first B
// devices. On 1,024 devices a sequence of 1,000 takes 512 blocks: the RMSNorm's rsqrt
// [1, 512] read the sums of blocks 2b and 2b + 1 (devices 2b, 2b + 1) from device b,
// mostly on another host, and sent its result back across (two 14 µs hops on the
// critical path, twice per block).
void spread_small_nodes(const Graph& g, Decomposition& d, const std::vector<char>& placed) {
  const std::int64_t n = d.num_devices;
  for (NodeId id : g.ids()) {
    const NodeKind kind = g.node(id).kind;
    NodePlan& plan = d.nodes[id.index()];
    const auto blocks = static_cast<std::int64_t>(plan.devices.size());
    if (placed[id.index()] || kind == NodeKind::input || kind == NodeKind::fill || blocks >= n || n % blocks != 0)
      continue;
    for (std::int64_t b = 0; b < blocks; ++b)
      plan.devices[static_cast<std::size_t>(b)] = DeviceId(static_cast<std::int32_t>(b * (n / blocks)));
  }
}

}  // namespace

Decomposition place(const Graph& g, const Partitioning& parts, int devices, std::string_view placement,
                    double flops_per_byte, bool spread) {
  const std::vector<std::string> known = placement_names();
  if (std::find(known.begin(), known.end(), placement) == known.end()) {
    std::string names;
    for (const auto& n : known) names += (names.empty() ? "" : ", ") + n;
    fail("unknown placement '", placement, "' (known: ", names, ")");
  }
  Decomposition d = decomposition_from_parts(g, devices, parts.join);  // round-robin
  std::vector<char> placed(g.size(), 0);  // by the strategy itself
  for (NodeId id : g.ids()) {
    NodePlan& plan = d.nodes[id.index()];
    if (!parts.output.empty() && !parts.output[id.index()].empty())
      plan.output = Partition::even(g.node(id).shape, parts.output[id.index()]);
    if (!parts.devices.empty() && !parts.devices[id.index()].empty()) {
      plan.devices.clear();
      for (int dev : parts.devices[id.index()]) plan.devices.emplace_back(dev);
      if (!parts.agg_devices.empty())
        for (int dev : parts.agg_devices[id.index()]) plan.agg_devices.emplace_back(dev);
      placed[id.index()] = 1;
    }
  }
  if (placement == "round-robin") {
    // A node aggregating into a finer partition than its join partition's output
    // indices: the first partial's device would take several output blocks (all of them
    // when only aggregated indices are split); spread them instead.
    for (NodeId id : g.ids()) {
      NodePlan& plan = d.nodes[id.index()];
      if (placed[id.index()] || !plan.output || partials_per_output_block(g, id, plan.partition) < 2) continue;
      if (plan.partition.prefix(g.out_rank(id)).num_blocks() >= plan.output->num_blocks()) continue;
      plan.agg_devices.clear();
      for (std::int64_t o = 0; o < plan.output->num_blocks(); ++o)
        plan.agg_devices.emplace_back(static_cast<std::int32_t>(o % devices));
    }
    if (spread) spread_small_nodes(g, d, placed);
    place_leaves_at_first_reader(g, d, placed);
    d.validate(g);
    return d;
  }
  std::vector<double> load(static_cast<std::size_t>(devices), 0.0);     // greedy: weighted cost
  std::vector<double> compute(static_cast<std::size_t>(devices), 0.0);  // locality: flops so far
  for (NodeId id : g.ids()) {
    NodePlan& plan = d.nodes[id.index()];
    const Node& n = g.node(id);
    if (n.kind == NodeKind::input || n.kind == NodeKind::fill) continue;  // placed at their first reader, below
    const std::int64_t blocks = plan.partition.num_blocks();
    if (!placed[id.index()]) {
      // locality's bound: at most ⌈blocks / n⌉ blocks of this node per device, and as
      // many devices used as there are blocks (up to n).
      const std::int64_t cap = (blocks + devices - 1) / devices;
      const std::int64_t want_used = std::min<std::int64_t>(blocks, devices);
      std::vector<std::int64_t> count(static_cast<std::size_t>(devices), 0);
      std::int64_t used = 0;
      for (std::int64_t b = 0; b < blocks; ++b) {
        std::vector<double> have = operand_bytes_by_device(g, d, id, b);
        double total = 0;
        for (double h : have) total += h;
        Rect j = plan.partition.block(b);
        double flops = n.kind == NodeKind::einsum ? n.einsum.flops_per_join_element() * static_cast<double>(j.elements()) : 0;
        int best = static_cast<int>(b % devices);
        if (placement == "locality") {
          const bool must_be_new = blocks - b <= want_used - used;
          best = -1;
          for (int dev = 0; dev < devices; ++dev) {
            const auto u = static_cast<std::size_t>(dev);
            if (count[u] >= cap || (must_be_new && count[u] > 0)) continue;
            if (best < 0) {
              best = dev;
              continue;
            }
            const auto bu = static_cast<std::size_t>(best);
            if (have[u] > have[bu] || (have[u] == have[bu] && compute[u] < compute[bu])) best = dev;
          }
          if (count[static_cast<std::size_t>(best)]++ == 0) ++used;
          compute[static_cast<std::size_t>(best)] += flops;
        } else {  // greedy: the lowest resulting load
          double lowest = std::numeric_limits<double>::infinity();
          for (int dev = 0; dev < devices; ++dev) {
            double cost = load[static_cast<std::size_t>(dev)] + flops + flops_per_byte * (total - have[static_cast<std::size_t>(dev)]);
            if (cost < lowest) {
              lowest = cost;
              best = dev;
            }
          }
          load[static_cast<std::size_t>(best)] += flops + flops_per_byte * (total - have[static_cast<std::size_t>(best)]);
        }
        plan.devices[static_cast<std::size_t>(b)] = DeviceId(best);
      }
    }
    // Aggregate split partials where most of their volume already is.
    const std::int64_t partials = partials_per_output_block(g, id, plan.partition);
    if (partials > 1 && !placed[id.index()]) {
      plan.agg_devices.clear();
      const Partition prefix = plan.partition.prefix(g.out_rank(id));
      const Partition out = plan.output ? *plan.output : prefix;
      for (std::int64_t o = 0; o < out.num_blocks(); ++o) {
        std::vector<double> volume(static_cast<std::size_t>(devices), 0.0);
        for (std::int64_t pb = 0; pb < prefix.num_blocks(); ++pb) {
          Rect inter;
          if (!intersect(out.block(o), prefix.block(pb), &inter)) continue;
          for (std::int64_t a = 0; a < partials; ++a)
            volume[plan.devices[pb * partials + a].index()] += static_cast<double>(inter.elements());
        }
        plan.agg_devices.emplace_back(
            static_cast<std::int32_t>(std::max_element(volume.begin(), volume.end()) - volume.begin()));
      }
    }
  }
  place_leaves_at_first_reader(g, d, placed);
  d.validate(g);
  return d;
}

std::vector<int> idle_devices(const Graph& g, const Decomposition& d) {
  std::vector<char> busy(static_cast<std::size_t>(d.num_devices), 0);
  bool any = false;
  for (NodeId id : g.ids()) {
    if (g.node(id).kind != NodeKind::einsum) continue;
    any = true;
    for (DeviceId dev : d.plan(id).devices) busy[dev.index()] = 1;
  }
  std::vector<int> idle;
  if (!any) return idle;
  for (int dev = 0; dev < d.num_devices; ++dev)
    if (!busy[static_cast<std::size_t>(dev)]) idle.push_back(dev);
  return idle;
}

}  // namespace tessel::planner
