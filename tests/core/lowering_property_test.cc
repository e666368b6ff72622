// Property tests of lower(): seeded random graphs (contractions, broadcasts, reductions,
// elementwise chains, selects, fills), random partitions (uneven ones and split
// aggregated indices) and random placements on 1-8 devices. Block execution must equal
// the reference evaluator, the task graph must be well formed, and the bytes moved must
// equal what the partitions and placements imply, computed here independently.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <tuple>

#include "core/partition.h"
#include "core/task_graph.h"
#include "runtime/executor.h"

namespace tessel {
namespace {

using Rng = std::mt19937_64;

int uniform(Rng& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// A random graph of 2-D and 1-D tensors built from a pool of live nodes.
Graph random_graph(Rng& rng) {
  GraphBuilder g(DType::f64);
  const std::int64_t a = uniform(rng, 3, 9), b = uniform(rng, 3, 9), c = uniform(rng, 2, 7);
  std::vector<NodeId> ab = {g.input("x", {a, b})}, bc = {g.input("w", {b, c})}, vec_b = {g.input("v", {b})};
  std::vector<NodeId> ac;
  const int ops = uniform(rng, 3, 7);
  for (int i = 0; i < ops; ++i) {
    auto pick = [&](const std::vector<NodeId>& pool) { return pool[static_cast<std::size_t>(uniform(rng, 0, static_cast<int>(pool.size()) - 1))]; };
    switch (uniform(rng, 0, 7)) {
      case 0: ac.push_back(g.einsum("ij,jk->ik", {pick(ab), pick(bc)})); break;                          // contraction
      case 1: ab.push_back(g.einsum("ij,j->ij", {pick(ab), pick(vec_b)}, "sub(x0,x1)")); break;           // broadcast
      case 2: vec_b.push_back(g.reduce("ij->j", pick(ab), uniform(rng, 0, 1) ? Agg::max : Agg::sum)); break;  // reduction
      case 3: ab.push_back(g.map("tanh(add(x0,x1))", {pick(ab), pick(ab)})); break;                       // elementwise
      case 4: {                                                                                            // slice + concat
        NodeId x = pick(ab);
        std::int64_t cut = uniform(rng, 1, static_cast<int>(a) - 1);
        NodeId top = g.slice(x, {0, 0}, {cut, b});
        NodeId bottom = g.slice(x, {cut, 0}, {a - cut, b});
        ab.push_back(g.concat({bottom, top}, 0));  // rows rotated
        break;
      }
      case 5: ab.push_back(g.map("mul(x0,x1)", {pick(ab), g.lower_triangular({a, b}, 1.0, 0.5)})); break;  // fill
      case 6: ac.push_back(g.einsum("ij,ij,jk->ik", {pick(ab), pick(ab), pick(bc)})); break;             // n-ary
      default: vec_b.push_back(g.einsum("ij,ij->j", {pick(ab), pick(ab)})); break;
    }
  }
  g.output(ab.back(), "out_ab");
  if (!ac.empty()) g.output(ac.back(), "out_ac");
  g.output(vec_b.back(), "out_b");
  return g.build();
}

Partition random_partition(Rng& rng, const Shape& shape) {
  if (uniform(rng, 0, 2) == 0) {  // uneven bounds
    std::vector<std::vector<std::int64_t>> bounds;
    for (std::int64_t size : shape) {
      std::set<std::int64_t> cuts{0, size};
      int extra = uniform(rng, 0, std::min<int>(3, static_cast<int>(size) - 1));
      while (static_cast<int>(cuts.size()) < extra + 2) cuts.insert(uniform(rng, 1, static_cast<int>(size) - 1));
      bounds.emplace_back(cuts.begin(), cuts.end());
    }
    return Partition::from_bounds(bounds);
  }
  std::vector<int> parts;
  for (std::int64_t size : shape) parts.push_back(uniform(rng, 1, std::min<int>(4, static_cast<int>(size))));
  return Partition::even(shape, parts);
}

Decomposition random_decomposition(Rng& rng, const Graph& g, int devices) {
  Decomposition d;
  d.num_devices = devices;
  for (NodeId id : g.ids()) {
    NodePlan p;
    p.partition = random_partition(rng, g.join_shape(id));
    for (std::int64_t b = 0; b < p.partition.num_blocks(); ++b) p.devices.emplace_back(uniform(rng, 0, devices - 1));
    std::int64_t partials = partials_per_output_block(g, id, p.partition);
    if (partials > 1 && uniform(rng, 0, 2) == 0) {  // aggregate into another partition
      p.output = random_partition(rng, g.node(id).shape);
      for (std::int64_t o = 0; o < p.output->num_blocks(); ++o) p.agg_devices.emplace_back(uniform(rng, 0, devices - 1));
    } else if (partials > 1 && uniform(rng, 0, 1)) {
      for (std::int64_t o = 0; o < p.partition.num_blocks() / partials; ++o)
        p.agg_devices.emplace_back(uniform(rng, 0, devices - 1));
    }
    d.nodes.push_back(std::move(p));
  }
  return d;
}

// Bytes the partitions and placements imply, from the rules of DESIGN.md: every
// consumer block gets each piece of the producer blocks it overlaps, moved once per
// destination device when the piece lives elsewhere; every output block whose
// aggregated indices are split receives one partial-sized move from each other device
// that holds partials of it.
std::int64_t implied_bytes_moved(const Graph& g, const Decomposition& d) {
  struct OutBlocks {
    Partition partition;
    std::vector<DeviceId> devices;
  };
  std::vector<OutBlocks> out(g.size());
  std::set<std::tuple<std::int32_t, std::int64_t, std::string, std::int32_t>> moves;  // node, block, region, device
  std::int64_t bytes = 0;
  auto need = [&](NodeId producer, const Rect& region, DeviceId dev) {
    const OutBlocks& p = out[producer.index()];
    for (std::int64_t b = 0; b < p.partition.num_blocks(); ++b) {
      Rect inter;
      if (!intersect(region, p.partition.block(b), &inter) || p.devices[b] == dev) continue;
      if (moves.emplace(producer.value, b, to_string(inter), dev.value).second)
        bytes += inter.elements() * dtype_bytes(g.node(producer).dtype);
    }
  };
  for (NodeId id : g.ids()) {
    const Node& n = g.node(id);
    const NodePlan& plan = d.plan(id);
    const int out_rank = g.out_rank(id);
    if (n.kind == NodeKind::einsum) {
      for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b) {
        Rect j = plan.partition.block(b);
        for (std::size_t i = 0; i < n.inputs.size(); ++i) {
          Rect r;
          r.rank = static_cast<int>(n.einsum.inputs[i].size());
          for (int k = 0; k < r.rank; ++k) {
            r.offset[k] = j.offset[n.einsum.inputs[i][k]];
            r.size[k] = j.size[n.einsum.inputs[i][k]];
          }
          need(n.inputs[i], r, plan.devices[b]);
        }
      }
      std::int64_t partials = partials_per_output_block(g, id, plan.partition);
      Partition op = plan.partition.prefix(out_rank);
      if (plan.output) {  // each piece of the partials overlapping an output block moves once per other device
        out[id.index()].partition = *plan.output;
        out[id.index()].devices = plan.agg_devices;
        for (std::int64_t o = 0; o < plan.output->num_blocks(); ++o)
          for (std::int64_t pb = 0; pb < op.num_blocks(); ++pb) {
            Rect inter;
            if (!intersect(plan.output->block(o), op.block(pb), &inter)) continue;
            std::set<std::int32_t> others;
            for (std::int64_t a = 0; a < partials; ++a)
              if (plan.devices[pb * partials + a] != plan.agg_devices[o]) others.insert(plan.devices[pb * partials + a].value);
            bytes += static_cast<std::int64_t>(others.size()) * inter.elements() * dtype_bytes(n.dtype);
          }
        continue;
      }
      out[id.index()].partition = op;
      for (std::int64_t o = 0; o < op.num_blocks(); ++o) {
        DeviceId site = partials == 1 || plan.agg_devices.empty() ? plan.devices[o * partials] : plan.agg_devices[o];
        out[id.index()].devices.push_back(site);
        if (partials == 1) continue;
        std::set<std::int32_t> others;
        for (std::int64_t a = 0; a < partials; ++a)
          if (plan.devices[o * partials + a] != site) others.insert(plan.devices[o * partials + a].value);
        bytes += static_cast<std::int64_t>(others.size()) * op.block(o).elements() * dtype_bytes(n.dtype);
      }
      continue;
    }
    out[id.index()].partition = plan.partition;
    out[id.index()].devices = plan.devices;
    for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b) {
      Rect o = plan.partition.block(b);
      if (n.kind == NodeKind::output) need(n.inputs[0], o, plan.devices[b]);
      if (n.kind != NodeKind::select) continue;
      for (const SelectPiece& pc : n.pieces) {
        Rect dst;
        dst.rank = o.rank;
        for (int k = 0; k < o.rank; ++k) {
          dst.offset[k] = pc.dst_offset[k];
          dst.size[k] = pc.size[k];
        }
        Rect inter;
        if (!intersect(o, dst, &inter)) continue;
        Rect src = inter;
        for (int k = 0; k < o.rank; ++k) src.offset[k] = pc.src_offset[k] + inter.offset[k] - dst.offset[k];
        need(n.inputs[pc.input], src, plan.devices[b]);
      }
    }
  }
  return bytes;
}

void expect_well_formed(const TaskGraph& tg, const std::string& label) {
  std::vector<std::vector<std::int32_t>> writers(tg.buffers.size());
  for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
    const Task& t = tg.tasks[i];
    std::set<std::int32_t> want;
    for (BufferId b : t.reads) {
      EXPECT_FALSE(writers[b.index()].empty()) << label << ": task " << i << " reads unwritten buffer " << b;
      want.insert(writers[b.index()].begin(), writers[b.index()].end());
    }
    std::set<std::int32_t> have;
    for (TaskId d : t.deps) {
      EXPECT_LT(d.index(), i) << label << ": task " << i << " depends on a later task";
      have.insert(d.value);
    }
    EXPECT_EQ(have, want) << label << ": task " << i << " deps differ from the writers of what it reads";
    if (t.kind == TaskKind::move) {
      EXPECT_NE(t.device, t.dst_device) << label << ": move " << i << " within one device";
      EXPECT_EQ(tg.buffer(t.reads[0]).device, t.device) << label;
      EXPECT_EQ(tg.buffer(t.writes).device, t.dst_device) << label;
    } else {
      for (BufferId b : t.reads) EXPECT_EQ(tg.buffer(b).device, t.device) << label << ": task " << i;
      if (t.writes.valid()) {
        EXPECT_EQ(tg.buffer(t.writes).device, t.device) << label << ": task " << i;
      }
    }
    if (t.writes.valid()) writers[t.writes.index()].push_back(static_cast<std::int32_t>(i));
  }
}

TEST(LoweringProperty, RandomGraphsPartitionsAndPlacementsMatchTheReference) {
  int checked = 0, other_output_partitions = 0;
  for (std::uint64_t seed = 1; seed <= 120; ++seed) {
    Rng rng(seed);
    Graph g = random_graph(rng);
    runtime::TensorMap inputs = runtime::random_inputs(g, seed);
    runtime::TensorMap want = runtime::evaluate_reference(g, inputs);
    for (int devices : {1, 2, 3, 5, 8}) {
      Decomposition d = random_decomposition(rng, g, devices);
      for (const NodePlan& p : d.nodes) other_output_partitions += p.output.has_value();
      std::string label = "seed " + std::to_string(seed) + ", " + std::to_string(devices) + " devices";
      TaskGraph tg = lower(g, d);
      expect_well_formed(tg, label);
      EXPECT_EQ(tg.summary().bytes_moved, implied_bytes_moved(g, d)) << label;
      runtime::RunResult r = runtime::BlockExecutor().run(g, tg, inputs);  // throws on a lowering bug
      for (const auto& [name, tensor] : want) {
        Difference diff = compare(r.outputs.at(name), tensor);
        EXPECT_LE(diff.normwise_rel, 1e-12) << label << " output " << name << " at " << diff.index;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 600);
  EXPECT_GT(other_output_partitions, 50);  // the aggregate-into-another-partition path ran
}

TEST(LoweringProperty, OneDeviceMovesNothingAndMatchingPartitionsTouchNothing) {
  Rng rng(99);
  Graph g = random_graph(rng);
  TaskGraph one = lower(g, random_decomposition(rng, g, 1));
  EXPECT_EQ(one.summary().count[static_cast<int>(TaskKind::move)], 0);
  // Every node whole on device 0: no moves and no touches at all.
  TaskGraph whole = lower(g, decomposition_from_parts(g, 1, {}));
  EXPECT_EQ(whole.summary().count[static_cast<int>(TaskKind::move)], 0);
  std::int64_t selects = 0;
  for (const Node& n : g.nodes()) selects += n.kind == NodeKind::select ? static_cast<std::int64_t>(n.pieces.size()) : 0;
  EXPECT_EQ(whole.summary().count[static_cast<int>(TaskKind::touch)], selects);  // selects copy their pieces
}

TEST(LoweringProperty, SplitAggregatedIndexYieldsOnePartialPerSplitCombinedByTouches) {
  GraphBuilder b(DType::f64);
  auto x = b.input("x", {4, 12});
  auto w = b.input("w", {12, 4});
  b.output(b.einsum("ij,jk->ik", {x, w}), "out");
  Graph g = b.build();
  // j split 3 ways, partials on devices 0, 1, 2, aggregated on device 0.
  Decomposition d = decomposition_from_parts(g, 3, {{1, 1}, {1, 1}, {1, 1, 3}, {1, 1}});
  d.nodes[2].devices = {DeviceId(0), DeviceId(1), DeviceId(2)};
  TaskGraph tg = lower(g, d);
  int partial_computes = 0, accumulates = 0;
  for (const Task& t : tg.tasks) {
    partial_computes += t.kind == TaskKind::compute;
    accumulates += t.kind == TaskKind::touch && t.op == TouchOp::accumulate;
  }
  EXPECT_EQ(partial_computes, 3);
  EXPECT_EQ(accumulates, 3);
  // Two partials of 4x4 doubles travel to device 0.
  std::int64_t partial_moves = 0;
  for (const Task& t : tg.tasks)
    if (t.kind == TaskKind::move && t.dst_device == DeviceId(0) && t.node == NodeId(2)) partial_moves += t.bytes;
  EXPECT_EQ(partial_moves, 2 * 16 * 8);
}

}  // namespace
}  // namespace tessel
