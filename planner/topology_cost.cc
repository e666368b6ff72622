// EinDecomp's cost weighted by the links moved elements cross (eindecomp.h).
//
// Under round-robin placement block b of a node runs on device b mod n, blocks numbered
// row-major over the node's parts (last index fastest; core/partition.h). With n and the
// devices per host G powers of two and hosts holding consecutive devices, the bits of a
// block number split into fields, one per index j (log2 p_j bits above log2 of the
// product of the later parts); the device is the low log2 n bits and the host the bits
// from log2 G up. The blocks that share an operand block (the indices R the operand
// does not use) or whose partials are summed (the aggregated indices R) differ only in
// R's fields, so of their Π_{j∈R} p_j members, Π_{j∈R} p_j / 2^{overlap_j} are on any
// one member's host, overlap_j being how many of j's bits fall among the host bits.
//
//   join         Σ_inputs elements × (same host + w × other hosts) × n / holders
//   aggregation  out_elements × (same host − 1 + w × other hosts) × n / holders
//   repartition  elements moved × ((G − 1) + w (n − G)) / (n − 1): its peers are any
//                devices, so the mean over them
//
// with w = B_intra / B_inter, the bandwidths of the routes from device 0 to device 1
// (inside its host) and to device G (the first on another host). `holders` is how many
// devices the term's traffic converges on: an operand replicated R ways over B blocks
// has B / R blocks, each sent R times by the one device holding it; partials summed P
// ways meet at B / P aggregation sites. Each device has its own links, so the term
// takes time in proportion to what its busiest device sends or receives, which is the
// volume × n / holders of a perfectly spread one (holders capped at n). Partials are
// summed into the join's own output partition (DpCost::aggregates_into_need).
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "planner/eindecomp.h"

namespace tessel::planner {
namespace {

class TopologyCost final : public DpCost {
 public:
  TopologyCost(Prices prices, int devices_log2, int host_log2, double w)
      : DpCost(std::move(prices)), n_log2_(devices_log2), g_log2_(host_log2), w_(w) {
    const double n = std::ldexp(1.0, n_log2_), g = std::ldexp(1.0, g_log2_);
    repartition_weight_ = ((g - 1) + w_ * (n - g)) / (n - 1);
  }

  double join(const Graph& g, NodeId id, const Parts& p) const override {
    const Node& n = g.node(id);
    if (n.kind != NodeKind::einsum) return 0;
    const auto fields = bit_fields(p);
    double cost = 0;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const double at = price(n.inputs[i]);
      if (at == 0) continue;  // at rest wherever it is read: nothing moves
      const auto& used = n.einsum.inputs[i];
      double all = 1, same = 1;
      for (int j = 0; j < n.einsum.rank(); ++j) {
        if (std::find(used.begin(), used.end(), j) != used.end()) continue;
        all *= p[static_cast<std::size_t>(j)];
        same *= same_host(fields[static_cast<std::size_t>(j)]);
      }
      cost += at * static_cast<double>(elements(g.node(n.inputs[i]).shape)) * (same + w_ * (all - same)) *
              concentration(blocks(p) / all);
    }
    return cost;
  }

  double aggregation(const Graph& g, NodeId id, const Parts& p) const override {
    const Node& n = g.node(id);
    if (n.kind != NodeKind::einsum) return 0;
    const auto fields = bit_fields(p);
    double all = 1, same = 1;
    for (int j = n.einsum.out_rank; j < n.einsum.rank(); ++j) {
      all *= p[static_cast<std::size_t>(j)];
      same *= same_host(fields[static_cast<std::size_t>(j)]);
    }
    return static_cast<double>(elements(n.shape)) * (same - 1 + w_ * (all - same)) * concentration(blocks(p) / all);
  }

  double repartition(double elems, const Parts& from, const Parts& to) const override {
    return repartition_weight_ * repartition_cost(elems, from, to);
  }

  bool aggregates_into_need() const override { return false; }

 private:
  struct Field {
    int lo = 0, bits = 0;  // bits [lo, lo + bits) of the block number
  };
  static std::vector<Field> bit_fields(const Parts& p) {
    std::vector<Field> f(p.size());
    int lo = 0;
    for (std::size_t j = p.size(); j-- > 0;) {
      f[j].lo = lo;
      f[j].bits = std::max(0, log2_exact(p[j]));  // candidates are powers of two
      lo += f[j].bits;
    }
    return f;
  }
  static double blocks(const Parts& p) {
    double b = 1;
    for (int x : p) b *= x;
    return b;
  }
  // n over the devices that send (or receive) a term's elements, when only `holders` of
  // the n devices hold what is sent (or receive what is summed).
  double concentration(double holders) const {
    const double n = std::ldexp(1.0, n_log2_);
    return n / std::clamp(holders, 1.0, n);
  }
  // Members along one index that share a host with a given one: 2^(bits off the host bits).
  double same_host(const Field& f) const {
    const int overlap = std::max(0, std::min(f.lo + f.bits, n_log2_) - std::max(f.lo, g_log2_));
    return std::ldexp(1.0, f.bits - overlap);
  }

  int n_log2_, g_log2_;
  double w_;
  double repartition_weight_ = 1;
};

}  // namespace

bool topology_weighted(const Graph& g, const PlanOptions& o) {
  return dynamic_cast<const TopologyCost*>(make_dp_cost(g, o).get()) != nullptr;
}

std::unique_ptr<DpCost> make_dp_cost(const Graph& g, const PlanOptions& o, double at_rest_price) {
  Prices prices = input_prices(g, o.weights, at_rest_price);
  if (!o.machine) return std::make_unique<DpCost>(std::move(prices));
  const Machine& m = *o.machine;
  if (m.num_devices() < o.devices)
    fail("plan: machine '", m.name, "' has ", m.num_devices(), " devices, fewer than the ", o.devices, " asked for");
  // Devices per host: the run of devices sharing device 0's host.
  int per_host = 0;
  while (per_host < o.devices && m.device(DeviceId(per_host)).host == m.device(DeviceId(0)).host) ++per_host;
  const int n_log2 = log2_exact(o.devices), g_log2 = log2_exact(per_host);
  // One host, one device per host, or a layout the bit fields do not describe: elements.
  if (per_host >= o.devices || per_host < 2 || n_log2 < 0 || g_log2 < 0)
    return std::make_unique<DpCost>(std::move(prices));
  for (int d = 0; d < o.devices; ++d)
    if (m.device(DeviceId(d)).host != m.device(DeviceId(d - d % per_host)).host ||
        (d % per_host == 0 && d > 0 && m.device(DeviceId(d)).host == m.device(DeviceId(d - 1)).host))
      return std::make_unique<DpCost>(std::move(prices));
  const double intra = m.route_bytes_per_s(m.route(DeviceId(0), DeviceId(1)));
  const double inter = m.route_bytes_per_s(m.route(DeviceId(0), DeviceId(per_host)));
  if (!(intra > 0) || !(inter > 0)) return std::make_unique<DpCost>(std::move(prices));
  return std::make_unique<TopologyCost>(std::move(prices), n_log2, g_log2, std::max(1.0, intra / inter));
}

}  // namespace tessel::planner
