#include "planner/baselines.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace tessel::planner {
namespace {

using detail::fill_unplanned;
using detail::is_planned;

// Splits `blocks` over the indices `order` of `shape`, first index first, by factors of
// two, each index capped at its size.
Parts split_in_order(const Shape& shape, const std::vector<int>& order, int blocks) {
  Parts p(shape.size(), 1);
  int left = blocks;
  for (int j : order) {
    if (j < 0) continue;
    while (left > 1 && left % 2 == 0 &&
           static_cast<std::int64_t>(p[static_cast<std::size_t>(j)]) * 2 <= shape[static_cast<std::size_t>(j)]) {
      p[static_cast<std::size_t>(j)] *= 2;
      left /= 2;
    }
  }
  return p;
}

// The join index (per node) that carries a dimension of some input as it flows through
// the graph, or -1. An input carries its seeded dimension; an einsum the index its first
// labelled operand maps it to, when that label is one of the operand's output indices;
// an output or select of the same shape its operand's.
std::vector<int> follow(const Graph& g, const std::vector<std::pair<NodeId, int>>& seeds) {
  std::vector<int> label(g.size(), -1);
  for (auto [id, dim] : seeds)
    if (dim >= 0) label[id.index()] = dim;
  for (NodeId id : g.ids()) {
    const Node& n = g.node(id);
    if (n.kind == NodeKind::einsum) {
      for (std::size_t i = 0; i < n.inputs.size() && label[id.index()] < 0; ++i) {
        int l = label[n.inputs[i].index()];
        if (l >= 0 && l < g.out_rank(n.inputs[i])) label[id.index()] = n.einsum.inputs[i][static_cast<std::size_t>(l)];
      }
    } else if (n.kind == NodeKind::output || n.kind == NodeKind::select) {
      if (!n.inputs.empty() && label[n.inputs[0].index()] >= 0 && g.node(n.inputs[0]).shape == n.shape)
        label[id.index()] = label[n.inputs[0].index()];
    }
  }
  return label;
}

// What the baselines split, from the graph's annotations (or the convention for graphs
// without them: the first input is the data, dimension 0 its batch and 1 its sequence).
struct Roles {
  NodeId data;
  int batch_dim = -1, sequence_dim = -1;
  std::vector<bool> weight;                 // per node
  std::vector<int> batch, sequence, heads;  // per node: the join index carrying it, or -1
};

Roles roles_of(const Graph& g) {
  Roles r;
  r.weight = weight_inputs(g);
  const auto inputs = g.inputs();
  if (inputs.empty()) fail("this strategy needs a graph with an input node");
  r.data = inputs.front();
  for (NodeId id : inputs)
    if (!r.weight[id.index()]) {
      r.data = id;
      break;
    }
  const Node& x = g.node(r.data);
  r.batch_dim = x.index_roles.batch;
  r.sequence_dim = x.index_roles.sequence;
  if (!x.index_roles.any()) {
    r.batch_dim = x.shape.empty() ? -1 : 0;
    r.sequence_dim = x.shape.size() > 1 ? 1 : -1;
  }
  r.batch = follow(g, {{r.data, r.batch_dim}});
  r.sequence = follow(g, {{r.data, r.sequence_dim}});
  std::vector<std::pair<NodeId, int>> heads;
  for (NodeId id : inputs)
    if (g.node(id).index_roles.heads >= 0) heads.emplace_back(id, g.node(id).index_roles.heads);
  r.heads = follow(g, heads);
  return r;
}

// ---- data-parallel -------------------------------------------------------------

class DataParallel final : public Strategy {
 public:
  std::string name() const override { return "data-parallel"; }
  std::string help() const override {
    return "data parallelism (PyTorch DDP: Li et al., PVLDB 13(12), 2020): the batch split everywhere it flows (then the "
           "sequence, when the batch is smaller than n); weights resident and replicated on every device";
  }
  Partitioning partition(const Graph& g, const PlanOptions& o) const override {
    const Roles r = roles_of(g);
    std::vector<Parts> parts(g.size());
    for (NodeId id : g.ids()) {
      if (!is_planned(g, id)) continue;
      std::vector<int> order = {r.batch[id.index()]};
      if (r.sequence[id.index()] != r.batch[id.index()]) order.push_back(r.sequence[id.index()]);
      parts[id.index()] = split_in_order(g.join_shape(id), order, o.devices * o.blocks_per_device);
    }
    fill_unplanned(g, parts);
    return {parts, {}};
  }
};

// ---- megatron ------------------------------------------------------------------

// Megatron-LM's partition of every planned node into `blocks` tensor-parallel blocks
// (leaves not yet filled in): see baselines.h.
Partitioning megatron_partitioning(const Graph& g, const Roles& r, int blocks) {
  const std::size_t count = g.size();
  Partitioning p;
  p.join.assign(count, {});
  p.output.assign(count, {});
  std::vector<int> tp(count, -1);  // the output index a node is tensor-parallel split on
  // Between the tensor-parallel regions: the sequence (or else the batch), when it is an
  // output index of the node.
  auto sequence_index = [&](NodeId id) {
    for (int l : {r.sequence[id.index()], r.batch[id.index()]})
      if (l >= 0 && l < g.out_rank(id)) return l;
    return -1;
  };
  for (NodeId id : g.ids()) {
    const Node& n = g.node(id);
    if (!is_planned(g, id)) continue;
    const Shape js = g.join_shape(id);
    if (n.kind != NodeKind::einsum) {  // selects stay whole
      p.join[id.index()] = Parts(js.size(), 1);
      continue;
    }
    const Einsum& e = n.einsum;
    int j = -1;
    // An operand arrives split by the tensor-parallel region: go on splitting that index
    // (heads through the attention, the hidden units through the FFN's activation); when
    // this node contracts it, this is the row-parallel projection (WO, W2).
    for (std::size_t i = 0; i < n.inputs.size() && j < 0; ++i) {
      const int l = tp[n.inputs[i].index()];
      if (l >= 0) j = e.inputs[i][static_cast<std::size_t>(l)];
    }
    // Column-parallel: a weight's heads index when it reaches the output (Q, K, V) ...
    for (std::size_t i = 0; i < n.inputs.size() && j < 0; ++i) {
      const Node& in = g.node(n.inputs[i]);
      if (!r.weight[n.inputs[i].index()] || in.index_roles.heads < 0) continue;
      const int idx = e.inputs[i][static_cast<std::size_t>(in.index_roles.heads)];
      if (idx < e.out_rank) j = idx;
    }
    // ... or else the largest index of a weight that reaches the output (W1, W3).
    if (j < 0 && e.is_contraction())
      for (std::size_t i = 0; i < n.inputs.size(); ++i) {
        if (!r.weight[n.inputs[i].index()]) continue;
        for (int idx : e.inputs[i])
          if (idx < e.out_rank &&
              (j < 0 || js[static_cast<std::size_t>(idx)] > js[static_cast<std::size_t>(j)]))
            j = idx;
      }
    if (j < 0) {  // between the regions: the sequence
      const int s = sequence_index(id);
      p.join[id.index()] = s >= 0 ? split_in_order(js, {s}, blocks) : Parts(js.size(), 1);
      continue;
    }
    p.join[id.index()] = split_in_order(js, {j}, blocks);
    if (j < e.out_rank) {
      tp[id.index()] = j;
    } else if (p.join[id.index()][static_cast<std::size_t>(j)] > 1) {
      // Row-parallel: the partials are summed into the sequence split that follows
      // (a reduce-scatter).
      const int s = sequence_index(id);
      if (s >= 0) {
        Parts out = split_in_order(n.shape, {s}, blocks);
        if (out[static_cast<std::size_t>(s)] > 1) p.output[id.index()] = out;
      }
    }
  }
  return p;
}

class Megatron final : public Strategy {
 public:
  std::string name() const override { return "megatron"; }
  std::string help() const override {
    return "Megatron-LM tensor parallelism (Shoeybi et al. 2019, arXiv 1909.08053): Q/K/V and W1/W3 column-parallel, attention "
           "split by heads, WO and W2 row-parallel with the sum of partials after them, norms and residuals split "
           "along the sequence (Korthikanti et al. 2022); weights resident in their shards";
  }
  Partitioning partition(const Graph& g, const PlanOptions& o) const override {
    Partitioning p = megatron_partitioning(g, roles_of(g), o.devices * o.blocks_per_device);
    fill_unplanned(g, p.join, p.output);
    return p;
  }
};

// ---- dp-tp ---------------------------------------------------------------------

// Row-major grid coordinates of block `b` of a partition with `parts`.
std::vector<int> coords(const Parts& parts, std::int64_t b) {
  std::vector<int> c(parts.size());
  for (std::size_t d = parts.size(); d-- > 0;) {
    c[d] = static_cast<int>(b % parts[d]);
    b /= parts[d];
  }
  return c;
}

// Device of block `b` of a partition whose batch index is split `nodes` ways over the
// nodes (times however it is split within one): the node its batch coordinate falls in,
// and within it the block's linear index over the node's own split.
int grouped_device(const Parts& parts, std::int64_t b, int batch_index, int nodes, int per_node) {
  const std::vector<int> c = coords(parts, b);
  std::int64_t rest = 0;
  int node = 0;
  for (std::size_t d = 0; d < parts.size(); ++d) {
    if (static_cast<int>(d) == batch_index) {
      const int within = parts[d] / nodes;  // the batch index's split inside a node
      node = c[d] / within;
      rest = rest * within + c[d] % within;
    } else {
      rest = rest * parts[d] + c[d];
    }
  }
  return node * per_node + static_cast<int>(rest % per_node);
}

class DpTp final : public Strategy {
 public:
  std::string name() const override { return "dp-tp"; }
  std::string help() const override {
    return "megatron inside each node, data parallel across nodes (Narayanan et al., SC 2021, arXiv 2104.04473); "
           "needs -m (its devices per host are a node), whole nodes and batch >= the node count";
  }
  Partitioning partition(const Graph& g, const PlanOptions& o) const override {
    if (!o.machine) fail("strategy 'dp-tp' needs a machine (-m) to know how many devices share a node");
    const Machine& m = *o.machine;
    if (m.num_devices() < o.devices)
      fail("strategy 'dp-tp': machine '", m.name, "' has ", m.num_devices(), " devices, fewer than the ", o.devices,
           " asked for");
    if (o.blocks_per_device != 1) fail("strategy 'dp-tp' places one block per device: give -k 1, not ", o.blocks_per_device);
    int per_node = 0;
    for (const Device& d : m.devices) per_node += d.host == m.devices.front().host;
    per_node = std::min(per_node, o.devices);
    if (o.devices % per_node != 0) {
      fail("strategy 'dp-tp': ", o.devices, " devices are not whole nodes of machine '", m.name, "' (", per_node,
           " devices each); use a multiple of ", per_node);
    }
    const int nodes = o.devices / per_node;
    const Roles r = roles_of(g);
    if (r.batch_dim < 0 && nodes > 1)
      fail("strategy 'dp-tp': the graph names no batch index to split over ", nodes,
           " nodes (annotate its data input's batch dimension), or use at most ", per_node, " devices");
    const std::int64_t batch = r.batch_dim < 0 ? 1 : g.node(r.data).shape[static_cast<std::size_t>(r.batch_dim)];
    if (batch < nodes)
      fail("strategy 'dp-tp': batch ", batch, " is smaller than the ", nodes, " nodes that ", o.devices,
           " devices span on machine '", m.name, "' (", per_node, " per node); use batch >= ", nodes, ", or at most ",
           batch * per_node, " devices");
    Partitioning p = megatron_partitioning(g, r, per_node);
    p.devices.assign(g.size(), {});
    p.agg_devices.assign(g.size(), {});
    for (NodeId id : g.ids()) {
      if (!is_planned(g, id)) continue;
      const int b = r.batch[id.index()];
      Parts& join = p.join[id.index()];
      if (b >= 0 && nodes > 1) {
        join[static_cast<std::size_t>(b)] *= nodes;
        if (!p.output[id.index()].empty() && b < g.out_rank(id)) p.output[id.index()][static_cast<std::size_t>(b)] *= nodes;
      }
      if (b < 0) continue;  // no batch: placed by --placement
      const std::int64_t blocks = std::accumulate(join.begin(), join.end(), std::int64_t{1}, std::multiplies<>());
      for (std::int64_t k = 0; k < blocks; ++k) p.devices[id.index()].push_back(grouped_device(join, k, b, nodes, per_node));
      Parts out = p.output[id.index()].empty() ? output_partition(g, id, join) : p.output[id.index()];
      std::int64_t partials = blocks;
      for (int d = 0; d < g.out_rank(id); ++d) partials /= join[static_cast<std::size_t>(d)];
      if (partials > 1) {
        const std::int64_t outs = std::accumulate(out.begin(), out.end(), std::int64_t{1}, std::multiplies<>());
        for (std::int64_t k = 0; k < outs; ++k)
          p.agg_devices[id.index()].push_back(grouped_device(out, k, b < g.out_rank(id) ? b : -1, nodes, per_node));
      }
    }
    fill_unplanned(g, p.join, p.output);
    return p;
  }
};

}  // namespace

std::unique_ptr<Strategy> make_data_parallel() { return std::make_unique<DataParallel>(); }
std::unique_ptr<Strategy> make_megatron() { return std::make_unique<Megatron>(); }
std::unique_ptr<Strategy> make_dp_tp() { return std::make_unique<DpTp>(); }

}  // namespace tessel::planner
