#include "core/partition.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <sstream>

#include "core/error.h"

namespace tessel {

namespace {

// Error unless the product of `parts` is at most kMaxBlocks (checked as it grows, so
// that it cannot overflow).
template <class T>
void check_block_count(const std::vector<T>& parts, const char* what) {
  std::int64_t n = 1;
  for (T p : parts) {
    if (static_cast<std::int64_t>(p) > kMaxBlocks || (n *= static_cast<std::int64_t>(p)) > kMaxBlocks) {
      std::ostringstream os;
      for (std::size_t d = 0; d < parts.size(); ++d) os << (d ? "x" : "") << parts[d];
      fail(what, " ", os.str(), ": more than ", kMaxBlocks, " blocks");
    }
  }
}

}  // namespace

Partition Partition::even(const Shape& shape, const std::vector<int>& parts) {
  if (parts.size() != shape.size())
    fail("partition ", tessel::to_string(Shape(parts.begin(), parts.end())), " has ", parts.size(),
         " entries but the shape ", tessel::to_string(shape), " has rank ", shape.size());
  Partition p;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (parts[d] < 1) fail("partition: dimension ", d, " has ", parts[d], " parts (must be >= 1)");
    if (parts[d] > shape[d])
      fail("partition: dimension ", d, " of size ", shape[d], " cannot be split into ", parts[d], " parts");
  }
  check_block_count(parts, "partition");
  for (std::size_t d = 0; d < shape.size(); ++d) {
    // floor(size i / parts) without forming size i, which overflows for sizes near 2^62.
    const std::int64_t q = shape[d] / parts[d], r = shape[d] % parts[d];
    std::vector<std::int64_t> b(parts[d] + 1);
    for (int i = 0; i <= parts[d]; ++i) b[i] = q * i + r * i / parts[d];
    p.bounds_.push_back(std::move(b));
  }
  return p;
}

Partition Partition::from_bounds(std::vector<std::vector<std::int64_t>> bounds) {
  for (std::size_t d = 0; d < bounds.size(); ++d) {
    const auto& b = bounds[d];
    if (b.size() < 2 || b.front() != 0) fail("partition: bounds of dimension ", d, " must start at 0 and end at the size");
    for (std::size_t i = 1; i < b.size(); ++i)
      if (b[i] <= b[i - 1]) fail("partition: bounds of dimension ", d, " are not strictly increasing");
  }
  if (bounds.size() > static_cast<std::size_t>(kMaxRank)) fail("partition: rank ", bounds.size(), " too high");
  std::vector<std::size_t> parts;
  for (const auto& b : bounds) parts.push_back(b.size() - 1);
  check_block_count(parts, "partition");
  Partition p;
  p.bounds_ = std::move(bounds);
  return p;
}

std::vector<int> Partition::parts() const {
  std::vector<int> out;
  for (int d = 0; d < rank(); ++d) out.push_back(parts(d));
  return out;
}

std::int64_t Partition::num_blocks() const {
  std::int64_t n = 1;
  for (int d = 0; d < rank(); ++d) n *= parts(d);
  return n;
}

Shape Partition::shape() const {
  Shape s;
  for (const auto& b : bounds_) s.push_back(b.back());
  return s;
}

bool Partition::is_even() const { return *this == even(shape(), parts()); }

Rect Partition::block(std::int64_t index) const {
  Rect r;
  r.rank = rank();
  for (int d = rank() - 1; d >= 0; --d) {
    int p = parts(d);
    int c = static_cast<int>(index % p);
    index /= p;
    r.offset[d] = bounds_[d][c];
    r.size[d] = bounds_[d][c + 1] - bounds_[d][c];
  }
  return r;
}

std::int64_t Partition::block_index(const std::array<int, kMaxRank>& coord) const {
  std::int64_t idx = 0;
  for (int d = 0; d < rank(); ++d) idx = idx * parts(d) + coord[d];
  return idx;
}

Partition Partition::prefix(int r) const {
  Partition p;
  p.bounds_.assign(bounds_.begin(), bounds_.begin() + r);
  return p;
}

void Partition::overlapping(int dim, std::int64_t lo, std::int64_t hi, int* first, int* last) const {
  const auto& b = bounds_[dim];
  // first part whose end is > lo; last part whose start is < hi.
  *first = static_cast<int>(std::upper_bound(b.begin() + 1, b.end(), lo) - (b.begin() + 1));
  *last = static_cast<int>(std::lower_bound(b.begin(), b.end() - 1, hi) - b.begin());
}

std::string Partition::to_string() const {
  std::ostringstream os;
  if (is_even()) {
    for (int d = 0; d < rank(); ++d) os << (d ? "x" : "") << parts(d);
    if (rank() == 0) os << "scalar";
    return os.str();
  }
  os << '[';
  for (int d = 0; d < rank(); ++d) {
    os << (d ? "," : "") << '[';
    for (std::size_t i = 0; i < bounds_[d].size(); ++i) os << (i ? "," : "") << bounds_[d][i];
    os << ']';
  }
  os << ']';
  return os.str();
}

std::int64_t partials_per_output_block(const Graph& g, NodeId id, const Partition& p) {
  std::int64_t n = 1;
  for (int d = g.out_rank(id); d < p.rank(); ++d) n *= p.parts(d);
  return n;
}

OutputBlocks output_blocks(const Graph& g, NodeId id, const NodePlan& plan) {
  const int out_rank = g.out_rank(id);
  const Partition prefix = plan.partition.prefix(out_rank);
  const std::int64_t partials = partials_per_output_block(g, id, plan.partition);
  OutputBlocks out;
  out.partition = plan.output ? *plan.output : prefix;
  for (std::int64_t o = 0; o < out.partition.num_blocks(); ++o) {
    if (partials > 1 && !plan.agg_devices.empty()) {
      out.devices.push_back(plan.agg_devices[static_cast<std::size_t>(o)]);
    } else if (!plan.output) {
      out.devices.push_back(plan.devices[static_cast<std::size_t>(o * partials)]);
    } else {
      // The first partial overlapping the block (prefix blocks are in row-major order).
      Rect block = out.partition.block(o);
      std::array<int, kMaxRank> c{};
      for (int d = 0; d < out_rank; ++d) {
        int last = 0;
        prefix.overlapping(d, block.offset[d], block.offset[d] + block.size[d], &c[d], &last);
      }
      out.devices.push_back(plan.devices[static_cast<std::size_t>(prefix.block_index(c) * partials)]);
    }
  }
  return out;
}

void Decomposition::validate(const Graph& g) const {
  if (num_devices < 1 || num_devices > kMaxDevices)
    fail("decomposition: device count ", num_devices, " must be in [1, ", kMaxDevices, "]");
  if (nodes.size() != g.size())
    fail("decomposition: has plans for ", nodes.size(), " nodes but the graph has ", g.size());
  for (NodeId id : g.ids()) {
    const Node& n = g.node(id);
    const NodePlan& plan = nodes[id.index()];
    Shape js = g.join_shape(id);
    if (plan.partition.shape() != js)
      fail("decomposition: node '", n.name, "': partition covers ", tessel::to_string(plan.partition.shape()),
           " but its join shape is ", tessel::to_string(js));
    if (static_cast<std::int64_t>(plan.devices.size()) != plan.partition.num_blocks())
      fail("decomposition: node '", n.name, "': ", plan.devices.size(), " devices for ", plan.partition.num_blocks(),
           " blocks");
    for (DeviceId d : plan.devices)
      if (!d.valid() || d.value >= num_devices)
        fail("decomposition: node '", n.name, "': device ", d.value, " out of range [0, ", num_devices, ")");
    std::int64_t partials = partials_per_output_block(g, id, plan.partition);
    std::int64_t out_blocks = plan.partition.num_blocks() / partials;
    if (plan.output) {
      if (partials == 1)
        fail("decomposition: node '", n.name, "': an output partition is given but no aggregated index is split");
      if (plan.output->shape() != n.shape)
        fail("decomposition: node '", n.name, "': output partition covers ", tessel::to_string(plan.output->shape()),
             " but the output shape is ", tessel::to_string(n.shape));
      out_blocks = plan.output->num_blocks();
    }
    if (partials > 1) {
      if (!plan.agg_devices.empty() && static_cast<std::int64_t>(plan.agg_devices.size()) != out_blocks)
        fail("decomposition: node '", n.name, "': ", plan.agg_devices.size(), " aggregation devices for ", out_blocks,
             " output blocks");
      for (DeviceId d : plan.agg_devices)
        if (!d.valid() || d.value >= num_devices)
          fail("decomposition: node '", n.name, "': aggregation device ", d.value, " out of range [0, ", num_devices,
               ")");
    } else if (!plan.agg_devices.empty()) {
      fail("decomposition: node '", n.name, "': aggregation devices given but no aggregated index is split");
    }
    if (!plan.replicas.empty()) {
      if (n.kind != NodeKind::input && n.kind != NodeKind::fill)
        fail("decomposition: node '", n.name, "': only inputs and fills may be replicated");
      if (static_cast<std::int64_t>(plan.replicas.size()) != plan.partition.num_blocks())
        fail("decomposition: node '", n.name, "': replicas for ", plan.replicas.size(), " blocks but it has ",
             plan.partition.num_blocks());
      for (std::size_t b = 0; b < plan.replicas.size(); ++b)
        for (std::size_t i = 0; i < plan.replicas[b].size(); ++i) {
          DeviceId d = plan.replicas[b][i];
          if (!d.valid() || d.value >= num_devices)
            fail("decomposition: node '", n.name, "': block ", b, ": replica device ", d.value, " out of range [0, ",
                 num_devices, ")");
          if (d == plan.devices[b] || (i > 0 && !(plan.replicas[b][i - 1] < d)))
            fail("decomposition: node '", n.name, "': block ", b,
                 ": replica devices must ascend and differ from the block's own device ", plan.devices[b].value);
        }
    }
  }
}

Decomposition decomposition_from_parts(const Graph& g, int num_devices, const std::vector<std::vector<int>>& parts) {
  if (num_devices < 1 || num_devices > kMaxDevices)
    fail("decomposition: device count ", num_devices, " must be in [1, ", kMaxDevices, "]");
  Decomposition d;
  d.num_devices = num_devices;
  for (NodeId id : g.ids()) {
    Shape js = g.join_shape(id);
    std::vector<int> p = id.index() < parts.size() && !parts[id.index()].empty() ? parts[id.index()]
                                                                                 : std::vector<int>(js.size(), 1);
    NodePlan plan;
    try {
      plan.partition = Partition::even(js, p);
    } catch (const Error& e) {
      fail("node '", g.node(id).name, "': ", e.what());
    }
    for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b)
      plan.devices.emplace_back(static_cast<std::int32_t>(b % num_devices));
    d.nodes.push_back(std::move(plan));
  }
  return d;
}

std::vector<int> split_largest_parts(const Shape& join_shape, int blocks) {
  std::vector<int> parts(join_shape.size(), 1);
  std::vector<int> primes;
  for (int n = blocks, f = 2; n > 1;) {
    if (static_cast<std::int64_t>(f) * f > n) {  // what is left is prime: O(sqrt(blocks)), not O(blocks)
      primes.push_back(n);
      break;
    }
    if (n % f == 0) {
      primes.push_back(f);
      n /= f;
    } else {
      ++f;
    }
  }
  std::sort(primes.rbegin(), primes.rend());
  for (int f : primes) {
    int best = -1;
    double best_len = 0;
    for (std::size_t d = 0; d < join_shape.size(); ++d) {
      double len = static_cast<double>(join_shape[d]) / parts[d];
      if (static_cast<std::int64_t>(parts[d]) * f <= join_shape[d] && len > best_len) {
        best = static_cast<int>(d);
        best_len = len;
      }
    }
    if (best >= 0) parts[best] *= f;
  }
  return parts;
}

Decomposition split_largest(const Graph& g, int num_devices) {
  std::vector<std::vector<int>> parts;
  for (NodeId id : g.ids()) parts.push_back(split_largest_parts(g.join_shape(id), num_devices));
  return decomposition_from_parts(g, num_devices, parts);
}

}  // namespace tessel
