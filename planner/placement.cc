#include "planner/placement.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
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

}  // namespace

Decomposition place(const Graph& g, const Partitioning& parts, int devices, std::string_view placement,
                    double flops_per_byte) {
  const std::vector<std::string> known = placement_names();
  if (std::find(known.begin(), known.end(), placement) == known.end()) {
    std::string names;
    for (const auto& n : known) names += (names.empty() ? "" : ", ") + n;
    fail("unknown placement '", placement, "' (known: ", names, ")");
  }
  Decomposition d = decomposition_from_parts(g, devices, parts.join);  // round-robin
  for (NodeId id : g.ids())
    if (!parts.output.empty() && !parts.output[id.index()].empty())
      d.nodes[id.index()].output = Partition::even(g.node(id).shape, parts.output[id.index()]);
  if (placement == "round-robin") return d;
  std::vector<double> load(static_cast<std::size_t>(devices), 0.0);
  for (NodeId id : g.ids()) {
    NodePlan& plan = d.nodes[id.index()];
    const Node& n = g.node(id);
    for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b) {
      if (n.kind == NodeKind::input || n.kind == NodeKind::fill) continue;  // loaded where first needed: keep
      std::vector<double> have = operand_bytes_by_device(g, d, id, b);
      double total = 0;
      for (double h : have) total += h;
      Rect j = plan.partition.block(b);
      double flops = n.kind == NodeKind::einsum ? n.einsum.flops_per_join_element() * static_cast<double>(j.elements()) : 0;
      int best = static_cast<int>(b % devices);
      if (placement == "locality") {
        double most = 0;
        for (int dev = 0; dev < devices; ++dev)
          if (have[static_cast<std::size_t>(dev)] > most) {
            most = have[static_cast<std::size_t>(dev)];
            best = dev;
          }
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
    // Aggregate split partials where most of their volume already is.
    const std::int64_t partials = partials_per_output_block(g, id, plan.partition);
    if (partials > 1) {
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
  d.validate(g);
  return d;
}

}  // namespace tessel::planner
