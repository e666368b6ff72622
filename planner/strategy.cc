#include "planner/strategy.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"
#include "planner/baselines.h"
#include "planner/eindecomp.h"
#include "planner/placement.h"
#include "planner/residency.h"
#include "planner/search.h"

namespace tessel::planner {
namespace detail {

bool is_leaf(const Graph& g, NodeId id) {
  NodeKind k = g.node(id).kind;
  return k == NodeKind::input || k == NodeKind::fill;
}

// Nodes whose partition a strategy chooses: einsums and selects.
bool is_planned(const Graph& g, NodeId id) {
  NodeKind k = g.node(id).kind;
  return k == NodeKind::einsum || k == NodeKind::select;
}

int require_power_of_two(const std::string& strategy, const PlanOptions& o) {
  int e = log2_exact(static_cast<std::int64_t>(o.devices) * o.blocks_per_device);
  if (e < 0)
    fail("strategy '", strategy, "' needs n·k to be a power of two (1, 2, 4, 8, ...); got n=", o.devices, ", k=",
         o.blocks_per_device);
  return e;
}

// Leaves and outputs take the partition their (first) consumer / producer implies.
void fill_unplanned(const Graph& g, std::vector<Parts>& parts, const std::vector<Parts>& outputs) {
  auto consumers = g.consumers();
  auto out_of = [&](NodeId id) {
    if (!outputs.empty() && !outputs[id.index()].empty()) return outputs[id.index()];
    assert(parts[id.index()].size() == g.join_shape(id).size());
    return output_partition(g, id, parts[id.index()]);
  };
  // Leaves first: an output may read a leaf directly (a graph without an einsum).
  for (NodeId id : g.ids()) {
    if (!is_leaf(g, id)) continue;
    Parts p(g.node(id).shape.size(), 1);
    if (!consumers[id.index()].empty()) {
      NodeId c = consumers[id.index()][0];
      const Node& cn = g.node(c);
      for (std::size_t i = 0; i < cn.inputs.size(); ++i)
        if (cn.inputs[i] == id && !parts[c.index()].empty()) {
          Parts need = operand_partition(g, c, static_cast<int>(i), parts[c.index()]);
          if (need.size() == p.size()) p = need;
          break;
        }
    }
    // Repeated indices ("ii") can ask for more parts than a dimension has.
    for (std::size_t d = 0; d < p.size(); ++d) p[d] = static_cast<int>(std::min<std::int64_t>(p[d], g.node(id).shape[d]));
    parts[id.index()] = p;
  }
  for (NodeId id : g.ids()) {
    const Node& n = g.node(id);
    if (n.kind == NodeKind::output) parts[id.index()] = out_of(n.inputs[0]);
  }
}

bool splits_aggregation(const Graph& g, NodeId id, const Parts& p) {
  for (int j = g.out_rank(id); j < static_cast<int>(p.size()); ++j)
    if (p[static_cast<std::size_t>(j)] > 1) return true;
  return false;
}

// An einsum whose only consumer is an einsum may aggregate its partials straight into
// the partition that consumer needs (EinDecomp's post-aggregation partition): the
// aggregation costs the same whatever the target, so the repartition after it is 0.
bool may_choose_output(const Graph& g, NodeId id, const std::vector<std::vector<NodeId>>& consumers) {
  return g.node(id).kind == NodeKind::einsum && g.node(id).einsum.aggregates() && consumers[id.index()].size() == 1 &&
         g.node(consumers[id.index()][0]).kind == NodeKind::einsum;
}

}  // namespace detail

namespace {

using namespace detail;

// ---- exhaustive --------------------------------------------------------------

class Exhaustive final : public Strategy {
 public:
  std::string name() const override { return "exhaustive"; }
  std::string help() const override { return "the global optimum of eindecomp's cost over every combination (small graphs)"; }

  Partitioning partition(const Graph& g, const PlanOptions& o) const override {
    const int total = require_power_of_two(name(), o);
    const auto consumers = g.consumers();
    std::vector<NodeId> planned;
    std::vector<std::vector<Parts>> cands;
    double combos = 1;
    for (NodeId id : g.ids()) {
      if (!is_planned(g, id)) continue;
      planned.push_back(id);
      auto c = node_candidates(g.join_shape(id), total);
      combos *= static_cast<double>(c.size());
      cands.push_back(std::move(c));
    }
    if (combos > static_cast<double>(o.exhaustive_limit))
      fail("strategy 'exhaustive': ", planned.size(), " nodes give ", combos, " combinations, over the limit of ",
           o.exhaustive_limit, " (use eindecomp, or a smaller graph or device count)");
    const Prices prices = input_prices(g, o.weights);
    Partitioning p, best_p;
    p.join.assign(g.size(), {});
    p.output.assign(g.size(), {});
    double best = std::numeric_limits<double>::infinity();
    std::vector<std::size_t> idx(planned.size(), 0);
    for (;;) {
      for (std::size_t k = 0; k < planned.size(); ++k) p.join[planned[k].index()] = cands[k][idx[k]];
      // Given every join partition, aggregating straight into the single consumer's
      // need is optimal (the aggregation costs the same whatever its target).
      for (NodeId id : planned) {
        p.output[id.index()].clear();
        if (!may_choose_output(g, id, consumers) || !splits_aggregation(g, id, p.join[id.index()])) continue;
        NodeId c = consumers[id.index()][0];
        const Node& cn = g.node(c);
        for (std::size_t i = 0; i < cn.inputs.size(); ++i)
          if (cn.inputs[i] == id) {
            Parts need = operand_partition(g, c, static_cast<int>(i), p.join[c.index()]);
            if (need != output_partition(g, id, p.join[id.index()])) p.output[id.index()] = need;
            break;
          }
      }
      double cost = 0;
      for (const NodeCost& c : evaluate(g, p, prices)) cost += c.total();
      if (cost < best) {  // strict: the first optimum in enumeration order wins ties
        best = cost;
        best_p = p;
      }
      std::size_t k = 0;
      while (k < planned.size() && ++idx[k] == cands[k].size()) idx[k++] = 0;
      if (k == planned.size()) break;
    }
    fill_unplanned(g, best_p.join, best_p.output);
    return best_p;
  }
};

// ---- baselines (data-parallel, megatron, dp-tp: baselines.cc) ---------------------

class SqrtSplit final : public Strategy {
 public:
  std::string name() const override { return "sqrt-split"; }
  std::string help() const override { return "every node's output indices split about √n ways each (n blocks in all)"; }
  Partitioning partition(const Graph& g, const PlanOptions& o) const override {
    const int total = require_power_of_two(name(), o);
    std::vector<Parts> parts(g.size());
    for (NodeId id : g.ids()) {
      if (!is_planned(g, id)) continue;
      Shape js = g.join_shape(id);
      const int out = g.out_rank(id);
      Parts p(js.size(), 1);
      // Hand out factors of two round-robin over the output indices.
      for (int left = total, d = 0, stuck = 0; left > 0 && out > 0 && stuck < out; d = (d + 1) % out) {
        if (static_cast<std::int64_t>(p[static_cast<std::size_t>(d)]) * 2 <= js[static_cast<std::size_t>(d)]) {
          p[static_cast<std::size_t>(d)] *= 2;
          --left;
          stuck = 0;
        } else {
          ++stuck;
        }
      }
      parts[id.index()] = p;
    }
    fill_unplanned(g, parts);
    return {parts, {}};
  }
};

class BlockPerDevice final : public Strategy {
 public:
  std::string name() const override { return "block-per-device"; }
  std::string help() const override { return "one block per device along each node's largest output index"; }
  Partitioning partition(const Graph& g, const PlanOptions& o) const override {
    std::vector<Parts> parts(g.size());
    for (NodeId id : g.ids()) {
      if (!is_planned(g, id)) continue;
      Shape js = g.join_shape(id);
      Parts p(js.size(), 1);
      const int out = g.out_rank(id);
      if (out > 0) {
        int j = static_cast<int>(std::max_element(js.begin(), js.begin() + out) - js.begin());
        p[static_cast<std::size_t>(j)] = static_cast<int>(std::min<std::int64_t>(js[static_cast<std::size_t>(j)], o.devices));
      }
      parts[id.index()] = p;
    }
    fill_unplanned(g, parts);
    return {parts, {}};
  }
};

class SplitLargest final : public Strategy {
 public:
  std::string name() const override { return "split-largest"; }
  std::string help() const override { return "every node cut into n·k blocks along its largest indices (tessel's default)"; }
  Partitioning partition(const Graph& g, const PlanOptions& o) const override {
    std::vector<Parts> parts;
    for (NodeId id : g.ids()) parts.push_back(split_largest_parts(g.join_shape(id), o.devices * o.blocks_per_device));
    return {parts, {}};
  }
};

class Manual final : public Strategy {
 public:
  std::string name() const override { return "manual"; }
  std::string help() const override { return "a decomposition JSON file (--decomposition / -o of tessel plan)"; }
  Partitioning partition(const Graph&, const PlanOptions&) const override {
    fail("strategy 'manual' is planned from its file");  // plan() reads the file itself
  }
};

}  // namespace

double Plan::total_cost() const {
  double t = 0;
  for (const NodeCost& c : costs) t += c.total();
  return t;
}

const std::vector<std::unique_ptr<Strategy>>& strategies() {
  static const auto list = [] {
    std::vector<std::unique_ptr<Strategy>> v;
    v.push_back(make_eindecomp());
    v.push_back(std::make_unique<Exhaustive>());
    v.push_back(make_data_parallel());
    v.push_back(make_megatron());
    v.push_back(make_dp_tp());
    v.push_back(std::make_unique<SqrtSplit>());
    v.push_back(std::make_unique<BlockPerDevice>());
    v.push_back(std::make_unique<SplitLargest>());
    v.push_back(std::make_unique<Manual>());
    v.push_back(make_search());
    return v;
  }();
  return list;
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> out;
  for (const auto& s : strategies()) out.push_back(s->name());
  return out;
}

Parts Partitioning::output_of(const Graph& g, NodeId id) const {
  if (!output.empty() && !output[id.index()].empty()) return output[id.index()];
  return output_partition(g, id, join[id.index()]);
}

Prices input_prices(const Graph& g, Weights w, double at_rest) {
  Prices prices(g.size(), 1.0);
  if (w != Weights::resident) return prices;
  const std::vector<bool> weights = weight_inputs(g);
  for (NodeId id : g.ids())
    if (weights[id.index()] || g.node(id).kind == NodeKind::fill) prices[id.index()] = at_rest;
  return prices;
}

std::vector<NodeCost> evaluate(const Graph& g, const Partitioning& p, const Prices& prices) {
  std::vector<NodeCost> costs(g.size());
  for (NodeId id : g.ids()) {
    const Node& n = g.node(id);
    if (n.kind != NodeKind::einsum || p.join[id.index()].empty()) continue;
    const Parts& parts = p.join[id.index()];
    NodeCost& c = costs[id.index()];
    c.join = join_cost(g, id, parts, prices);
    c.aggregation = aggregation_cost(g, id, parts);
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      NodeId child = n.inputs[i];
      if (!is_planned(g, child) || p.join[child.index()].empty()) continue;
      c.repartition += repartition_cost(static_cast<double>(elements(g.node(child).shape)), p.output_of(g, child),
                                        operand_partition(g, id, static_cast<int>(i), parts));
    }
  }
  return costs;
}

double flops_per_byte(const PlanOptions& o) {
  if (!o.machine) return o.flops_per_byte;
  const Machine& m = *o.machine;
  if (m.num_devices() < o.devices)
    fail("plan: machine '", m.name, "' has ", m.num_devices(), " devices, fewer than the ", o.devices, " asked for");
  double peak = m.type_of(DeviceId(0)).peak(o.dtype);
  if (!(peak > 0)) fail("plan: machine '", m.name, "' has no peak flop/s for ", to_string(o.dtype));
  if (m.num_devices() < 2) return o.flops_per_byte;
  return peak / m.route_bytes_per_s(m.route(DeviceId(0), DeviceId(1)));
}

Plan plan(const Graph& g, std::string_view name, const PlanOptions& o) {
  if (o.devices < 1 || o.devices > kMaxDevices)
    fail("plan: device count ", o.devices, " must be in [1, ", kMaxDevices, "]");
  if (o.blocks_per_device < 1 || o.blocks_per_device > kMaxDevices)
    fail("plan: blocks per device ", o.blocks_per_device, " must be in [1, ", kMaxDevices, "]");
  if (static_cast<std::int64_t>(o.devices) * o.blocks_per_device > kMaxBlocks)
    fail("plan: n·k = ", o.devices, " x ", o.blocks_per_device, " blocks per node exceeds the maximum of ", kMaxBlocks);
  Plan result;
  result.strategy = std::string(name);
  if (name == "manual") {
    if (o.manual_file.empty()) fail("strategy 'manual' needs a decomposition file");
    result.decomposition = decomposition_from_json(read_json_file(o.manual_file), g, o.manual_file);
    if (result.decomposition.num_devices != o.devices)
      fail(o.manual_file, ": the decomposition is for ", result.decomposition.num_devices, " devices, not ", o.devices);
    Partitioning p;
    for (NodeId id : g.ids()) {
      const NodePlan& np = result.decomposition.plan(id);
      p.join.push_back(np.partition.parts());
      p.output.push_back(np.output ? np.output->parts() : Parts{});
    }
    result.costs = evaluate(g, p, input_prices(g, o.weights));
    return result;
  }
  if (name == "search") return search_plan(g, o);
  const Strategy* strategy = nullptr;
  for (const auto& st : strategies())
    if (st->name() == name) strategy = st.get();
  if (!strategy) {
    std::string names;
    for (const auto& n : strategy_names()) names += (names.empty() ? "" : ", ") + n;
    fail("unknown strategy '", name, "' (known: ", names, ")");
  }
  Partitioning p = strategy->partition(g, o);
  result.costs = evaluate(g, p, input_prices(g, o.weights));
  result.decomposition = place(g, p, o.devices, o.placement, flops_per_byte(o));
  if (o.weights == Weights::resident) {
    make_resident(g, result.decomposition);
    if (o.machine) check_resident_memory(g, result.decomposition, *o.machine);
  }
  result.idle_devices = idle_devices(g, result.decomposition);
  return result;
}

std::string_view to_string(Weights w) { return w == Weights::resident ? "resident" : "fetched"; }

Weights parse_weights(std::string_view text) {
  if (text == "resident") return Weights::resident;
  if (text == "fetched") return Weights::fetched;
  fail("--weights '", text, "': expected resident or fetched");
}

}  // namespace tessel::planner
