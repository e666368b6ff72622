#include "planner/cost.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace tessel::planner {

int log2_exact(std::int64_t n) {
  if (n < 1 || (n & (n - 1)) != 0) return -1;
  int e = 0;
  while ((std::int64_t{1} << e) < n) ++e;
  return e;
}

std::vector<Parts> candidate_partitions(const Shape& shape, int total_log2) {
  std::vector<Parts> out;
  const int rank = static_cast<int>(shape.size());
  Parts cur(static_cast<std::size_t>(rank), 0);
  std::vector<int> cap(static_cast<std::size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    int c = 0;
    while (c < 30 && (std::int64_t{2} << c) <= shape[d]) ++c;
    cap[d] = c;  // 2^cap <= size, and parts fit an int
  }
  std::function<void(int, int)> rec = [&](int d, int left) {
    if (d == rank) {
      if (left == 0) {
        Parts p;
        for (int e : cur) p.push_back(1 << e);
        out.push_back(p);
      }
      return;
    }
    for (int e = 0; e <= std::min(left, cap[d]); ++e) {
      cur[d] = e;
      rec(d + 1, left - e);
    }
    cur[d] = 0;
  };
  rec(0, total_log2);
  return out;
}

std::vector<Parts> node_candidates(const Shape& shape, int total_log2) {
  for (int t = total_log2; t > 0; --t) {
    auto c = candidate_partitions(shape, t);
    if (!c.empty()) return c;
  }
  return {Parts(shape.size(), 1)};
}

double join_cost(const Graph& g, NodeId id, const Parts& p, const Prices& prices) {
  const Node& n = g.node(id);
  if (n.kind != NodeKind::einsum) return 0;
  double cost = 0;
  for (std::size_t i = 0; i < n.inputs.size(); ++i) {
    const double price = prices.empty() ? 1.0 : prices[n.inputs[i].index()];
    if (price == 0) continue;
    double replicas = 1;
    for (int j = 0; j < n.einsum.rank(); ++j)
      if (std::find(n.einsum.inputs[i].begin(), n.einsum.inputs[i].end(), j) == n.einsum.inputs[i].end())
        replicas *= p[static_cast<std::size_t>(j)];
    cost += price * static_cast<double>(elements(g.node(n.inputs[i]).shape)) * replicas;
  }
  return cost;
}

double aggregation_cost(const Graph& g, NodeId id, const Parts& p) {
  const Node& n = g.node(id);
  if (n.kind != NodeKind::einsum) return 0;
  double partials = 1;
  for (int j = n.einsum.out_rank; j < n.einsum.rank(); ++j) partials *= p[static_cast<std::size_t>(j)];
  return static_cast<double>(elements(n.shape)) * (partials - 1);
}

double repartition_cost(double elems, const Parts& a, const Parts& b) {
  if (a == b) return 0;
  double over_a = 1, over_b = 1;
  for (std::size_t d = 0; d < a.size(); ++d) {
    double m = std::max(a[d], b[d]);
    over_a *= m / a[d];
    over_b *= m / b[d];
  }
  return elems * over_a + elems * (over_b - 1);
}

Parts operand_partition(const Graph& g, NodeId id, int operand, const Parts& p) {
  const Node& n = g.node(id);
  if (n.kind != NodeKind::einsum) return p;  // output, select: same space as the operand
  Parts out;
  for (int j : n.einsum.inputs[static_cast<std::size_t>(operand)]) out.push_back(p[static_cast<std::size_t>(j)]);
  return out;
}

Parts output_partition(const Graph& g, NodeId id, const Parts& p) {
  return Parts(p.begin(), p.begin() + g.out_rank(id));
}

}  // namespace tessel::planner
