#include "core/task_graph.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <unordered_map>

#include "core/checked.h"
#include "core/error.h"
#include "core/lowering_all_gather.h"

namespace tessel {

std::string_view to_string(TaskKind k) {
  switch (k) {
    case TaskKind::input: return "input";
    case TaskKind::compute: return "compute";
    case TaskKind::touch: return "touch";
    case TaskKind::move: return "move";
    case TaskKind::output: return "output";
    case TaskKind::evict: return "evict";
    case TaskKind::load: return "load";
    case TaskKind::collective: return "collective";
  }
  return "?";
}

TaskGraph::Summary TaskGraph::summary() const {
  Summary s;
  s.tasks = static_cast<std::int64_t>(tasks.size());
  for (const Task& t : tasks) {
    ++s.count[static_cast<int>(t.kind)];
    if (t.kind == TaskKind::move) s.bytes_moved = checked_add(s.bytes_moved, t.bytes, "task graph: bytes moved");
    if (t.kind == TaskKind::touch) s.bytes_touched = checked_add(s.bytes_touched, t.bytes, "task graph: bytes touched");
    if (t.kind == TaskKind::evict) s.bytes_evicted = checked_add(s.bytes_evicted, t.bytes, "task graph: bytes evicted");
    if (t.kind == TaskKind::load) s.bytes_loaded = checked_add(s.bytes_loaded, t.bytes, "task graph: bytes loaded");
    s.flops += t.flops;
    s.edges += static_cast<std::int64_t>(t.deps.size());
  }
  return s;
}

void TaskGraph::validate() const {
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    for (TaskId d : t.deps)
      if (!d.valid() || d.index() >= i) fail("task graph: task ", i, " depends on task ", d.value, ", which does not precede it");
    for (BufferId b : t.reads)
      if (!b.valid() || b.index() >= buffers.size()) fail("task graph: task ", i, " reads unknown buffer ", b.value);
    if (t.kind == TaskKind::collective) {
      if (t.block < 0 || static_cast<std::size_t>(t.block) >= collectives.size())
        fail("task graph: collective task ", i, " names collective ", t.block, " of ", collectives.size());
      const CollectiveSpec& s = collectives[static_cast<std::size_t>(t.block)];
      if (s.ranks > num_devices)
        fail("task graph: collective task ", i, " spans ", s.ranks, " ranks of ", num_devices, " devices");
      if (s.lowered()) {
        const auto r = static_cast<std::size_t>(s.ranks);
        if (s.devices.size() != r || s.outputs.size() != r || s.regions.size() != r || t.reads.size() != r)
          fail("task graph: collective task ", i, " has ", s.ranks, " ranks but ", s.devices.size(), " devices, ",
               s.outputs.size(), " outputs, ", s.regions.size(), " regions and reads ", t.reads.size(), " buffers");
        for (std::size_t k = 0; k < r; ++k) {
          if (!s.devices[k].valid() || s.devices[k].value >= num_devices)
            fail("task graph: collective task ", i, " puts rank ", k, " on device ", s.devices[k].value, " of ", num_devices);
          if (!s.outputs[k].valid() || s.outputs[k].index() >= buffers.size())
            fail("task graph: collective task ", i, " writes unknown buffer ", s.outputs[k].value);
          if (buffer(t.reads[k]).device != s.devices[k] || buffer(s.outputs[k]).device != s.devices[k])
            fail("task graph: collective task ", i, ": rank ", k, "'s buffers are not on its device ", s.devices[k].value);
        }
      }
      continue;
    }
    if (t.kind != TaskKind::output && (!t.writes.valid() || t.writes.index() >= buffers.size()))
      fail("task graph: task ", i, " writes unknown buffer ", t.writes.value);
    if (!t.device.valid() || t.device.value >= num_devices || !t.dst_device.valid() || t.dst_device.value >= num_devices)
      fail("task graph: task ", i, " runs on device ", t.device.value, " of ", num_devices);
  }
}

std::optional<BackwardBspDependency> first_backward_bsp_dependency(const TaskGraph& tg) {
  for (std::size_t i = 0; i < tg.tasks.size(); ++i)
    for (TaskId d : tg.tasks[i].deps)
      if (bsp_phase(tg.tasks[d.index()]) > bsp_phase(tg.tasks[i]))
        return BackwardBspDependency{TaskId(static_cast<std::int32_t>(i)), d};
  return std::nullopt;
}

std::vector<std::vector<TaskId>> successors(const TaskGraph& tg) {
  std::vector<std::vector<TaskId>> out(tg.tasks.size());
  for (std::size_t i = 0; i < tg.tasks.size(); ++i)
    for (TaskId d : tg.tasks[i].deps) out[d.index()].emplace_back(static_cast<std::int32_t>(i));
  return out;
}

namespace {

struct RegionKey {
  std::int32_t a;  // buffer id (moves) or node id (assemblies)
  std::int32_t device;
  Rect region;
  friend bool operator==(const RegionKey& x, const RegionKey& y) {
    return x.a == y.a && x.device == y.device && x.region == y.region;
  }
};
struct RegionKeyHash {
  std::size_t operator()(const RegionKey& k) const {
    std::uint64_t h = hash_rect(k.region);
    h = (h ^ static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.a))) * 0x9e3779b97f4a7c15ULL;
    h = (h ^ (h >> 29) ^ static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.device))) * 0xbf58476d1ce4e5b9ULL;
    return static_cast<std::size_t>(h ^ (h >> 32));
  }
};

// Moves already emitted, by (source buffer, destination device, region): an
// open-addressing table of 16-byte slots holding the key's hash and the move task, whose
// own fields are the key (so a hit is verified without storing the 136-byte region).
// Lowering at 1,024 devices makes hundreds of thousands of moves; the slots stay cache
// friendly where a node-based map does not.
class MoveCache {
 public:
  void reserve(std::size_t n) { rehash(std::bit_ceil(std::max<std::size_t>(16, n * 2))); }

  // The move task for the key, or a slot holding -1 for the caller to fill in.
  std::int32_t& find_or_add(BufferId src, DeviceId to, const Rect& region, const std::vector<Task>& tasks) {
    if ((used_ + 1) * 2 > slots_.size()) rehash(std::max<std::size_t>(16, slots_.size() * 2));
    const std::uint64_t h = hash(src, to, region);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.task == kEmpty) {
        s.hash = h;
        ++used_;
        return s.task;  // kEmpty == -1
      }
      if (s.hash == h) {
        const Task& t = tasks[static_cast<std::size_t>(s.task)];
        if (t.reads[0] == src && t.dst_device == to && t.src == region) return s.task;
      }
    }
  }

 private:
  static constexpr std::int32_t kEmpty = -1;
  struct Slot {
    std::uint64_t hash = 0;
    std::int32_t task = kEmpty;
  };

  static std::uint64_t hash(BufferId src, DeviceId to, const Rect& region) {
    std::uint64_t h = hash_rect(region);
    h = (h ^ static_cast<std::uint32_t>(src.value)) * 0x9e3779b97f4a7c15ULL;
    h = (h ^ (h >> 29) ^ static_cast<std::uint32_t>(to.value)) * 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
  }

  void rehash(std::size_t size) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(size, Slot{});
    mask_ = size - 1;
    for (const Slot& s : old) {
      if (s.task == kEmpty) continue;
      std::size_t i = s.hash & mask_;
      while (slots_[i].task != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t used_ = 0;
};

// The final (aggregated) output of a lowered node: one buffer per output block.
struct Produced {
  Partition partition;  // output partition
  std::vector<BufferId> buffers;
  std::vector<DeviceId> devices;
  // Inputs and fills with replicas at rest: per block, the further copies (empty = none).
  std::vector<std::vector<std::pair<DeviceId, BufferId>>> replicas;

  // Block b's buffer on `device`, or an invalid id when no copy of it is there.
  [[nodiscard]] BufferId on(std::int64_t b, DeviceId device) const {
    if (devices[static_cast<std::size_t>(b)] == device) return buffers[static_cast<std::size_t>(b)];
    if (!replicas.empty())
      for (const auto& [d, buf] : replicas[static_cast<std::size_t>(b)])
        if (d == device) return buf;
    return BufferId();
  }
};

class Lowering {
 public:
  Lowering(const Graph& g, const Decomposition& d, const LowerOptions& options) : g_(g), d_(d), options_(options) {
    tg_.num_devices = d.num_devices;
    produced_.resize(g.size());
    group_of_device_.assign(static_cast<std::size_t>(d.num_devices), -1);
    // A rough size estimate spares the big vectors most of their regrowth copies.
    std::size_t blocks = 0;
    for (NodeId id : g.ids()) blocks += static_cast<std::size_t>(d.plan(id).partition.num_blocks());
    tg_.tasks.reserve(blocks * 8);
    tg_.buffers.reserve(blocks * 5);
    prev_writer_.reserve(blocks * 8);
    last_writer_.reserve(blocks * 5);
    moves_.reserve(blocks * 4);
  }

  TaskGraph run() {
    for (NodeId id : g_.ids()) {
      switch (g_.node(id).kind) {
        case NodeKind::input: lower_source(id, TaskKind::input); break;
        case NodeKind::fill: lower_source(id, TaskKind::compute); break;
        case NodeKind::einsum: lower_einsum(id); break;
        case NodeKind::select: lower_select(id); break;
        case NodeKind::output: lower_output(id); break;
      }
    }
    return std::move(tg_);
  }

 private:
  BufferId new_buffer(DeviceId device, Shape shape, DType dtype, Agg init, NodeId node) {
    tg_.buffers.push_back(Buffer{device, std::move(shape), dtype, init, node});
    last_writer_.push_back(-1);
    return BufferId(static_cast<std::int32_t>(tg_.buffers.size() - 1));
  }

  TaskId emit(Task t) {
    TaskId id(static_cast<std::int32_t>(tg_.tasks.size()));
    if (options_.max_tasks > 0 && id.value >= options_.max_tasks)
      throw ResourceError("lowering: more than " + std::to_string(options_.max_tasks) +
                          " tasks (LowerOptions::max_tasks)");
    if (options_.cancel && (id.value & 4095) == 0 && options_.cancel->load(std::memory_order_relaxed))
      fail("lowering: cancelled (LowerOptions::cancel)");
    // All writers of a buffer are emitted before its first reader (asserted by
    // TaskGraph::validate's ordering check in tests), so they are known here.
    for (BufferId b : t.reads)
      for (std::int32_t w = last_writer_[b.index()]; w >= 0; w = prev_writer_[w]) t.deps.emplace_back(w);
    if (t.deps.size() > 1) {
      std::sort(t.deps.begin(), t.deps.end());
      t.deps.erase(std::unique(t.deps.begin(), t.deps.end()), t.deps.end());
    }
    if (t.writes.valid()) {
      prev_writer_.push_back(last_writer_[t.writes.index()]);
      last_writer_[t.writes.index()] = id.value;
    } else {
      prev_writer_.push_back(-1);
    }
    tg_.tasks.push_back(std::move(t));
    return id;
  }

  BufferId move(BufferId src, const Rect& region, DeviceId to) {
    std::int32_t& slot = moves_.find_or_add(src, to, region, tg_.tasks);
    if (slot >= 0) return tg_.tasks[static_cast<std::size_t>(slot)].writes;
    slot = static_cast<std::int32_t>(tg_.tasks.size());  // the move task emitted below
    const Buffer& b = tg_.buffers[src.index()];
    DType dtype = b.dtype;
    NodeId node = b.node;
    Task t;
    t.kind = TaskKind::move;
    t.device = b.device;
    t.dst_device = to;
    t.node = node;
    t.reads = {src};
    t.src = region;
    t.bytes = region.elements() * dtype_bytes(dtype);
    BufferId out = new_buffer(to, region.shape(), dtype, Agg::none, node);
    t.writes = out;
    emit(std::move(t));
    return out;
  }

  void touch(BufferId src, const Rect& src_region, BufferId dst, const Rect& dst_region, TouchOp op, Agg agg) {
    const Buffer& b = tg_.buffers[dst.index()];
    Task t;
    t.kind = TaskKind::touch;
    t.device = b.device;
    t.dst_device = b.device;
    t.node = b.node;
    t.reads = {src};
    t.writes = dst;
    t.src = src_region;
    t.dst = dst_region;
    t.op = op;
    t.agg = agg;
    t.bytes = src_region.elements() * dtype_bytes(b.dtype);
    t.flops = op == TouchOp::accumulate ? static_cast<double>(src_region.elements()) : 0.0;
    emit(std::move(t));
  }

  // Calls fn(block index, block rect) for every output block of `p` overlapping `r`.
  template <class Fn>
  void for_overlapping(const Partition& p, const Rect& r, Fn&& fn) {
    int rank = p.rank();
    std::array<int, kMaxRank> first{}, last{}, c{};
    for (int d = 0; d < rank; ++d) {
      p.overlapping(d, r.offset[d], r.offset[d] + r.size[d], &first[d], &last[d]);
      if (first[d] >= last[d]) return;
      c[d] = first[d];
    }
    for (;;) {
      std::int64_t idx = p.block_index(c);
      fn(idx, p.block(idx));
      int d = rank - 1;
      while (d >= 0 && ++c[d] == last[d]) {
        c[d] = first[d];
        --d;
      }
      if (d < 0) return;
    }
  }

  // Writes region `r` of node `producer`'s output into buffer `dst` on `device`; the
  // element at producer coordinate x lands at x - origin in `dst`.
  void gather_into(NodeId producer, const Rect& r, DeviceId device, BufferId dst, const Rect& origin) {
    const Produced& pr = produced_[producer.index()];
    for_overlapping(pr.partition, r, [&](std::int64_t b, const Rect& block) {
      Rect inter;
      bool ok = intersect(r, block, &inter);
      assert(ok);
      (void)ok;
      Rect dst_region = relative_to(inter, origin);
      Rect src_region = relative_to(inter, block);
      BufferId src = pr.on(b, device);
      if (!src.valid()) {
        src = move(pr.buffers[b], src_region, device);
        src_region = Rect::whole(inter.shape());
      }
      touch(src, src_region, dst, dst_region, TouchOp::copy, Agg::none);
    });
  }

  // A buffer on `device` holding exactly region `r` of `producer`'s output.
  BufferId need(NodeId producer, const Rect& r, DeviceId device) {
    const Produced& pr = produced_[producer.index()];
    int count = 0;
    std::int64_t only = -1;
    Rect only_rect;
    for_overlapping(pr.partition, r, [&](std::int64_t b, const Rect& block) {
      ++count;
      only = b;
      only_rect = block;
    });
    assert(count >= 1);
    if (count == 1) {
      const BufferId local = pr.on(only, device);
      if (only_rect == r && local.valid()) return local;
      if (!local.valid()) return move(pr.buffers[only], relative_to(r, only_rect), device);
    }
    RegionKey key{producer.value, device.value, r};
    if (auto it = assembled_.find(key); it != assembled_.end()) return it->second;
    const Node& n = g_.node(producer);
    BufferId buf = new_buffer(device, r.shape(), n.dtype, Agg::none, producer);
    gather_into(producer, r, device, buf, r);
    assembled_.emplace(key, buf);
    return buf;
  }

  // input and fill nodes: one task per block and copy of it (replicas), no operands.
  void lower_source(NodeId id, TaskKind kind) {
    const Node& n = g_.node(id);
    const NodePlan& plan = d_.plan(id);
    Produced& pr = produced_[id.index()];
    pr.partition = plan.partition;
    if (!plan.replicas.empty()) pr.replicas.resize(plan.replicas.size());
    for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b) {
      Rect r = plan.partition.block(b);
      auto create = [&](DeviceId device) {
        Task t;
        t.kind = kind;
        t.device = t.dst_device = device;
        t.node = id;
        t.block = b;
        t.src = r;
        t.bytes = r.elements() * dtype_bytes(n.dtype);
        t.writes = new_buffer(t.device, r.shape(), n.dtype, Agg::none, id);
        const BufferId out = t.writes;
        emit(std::move(t));
        return out;
      };
      pr.buffers.push_back(create(plan.devices[b]));
      pr.devices.push_back(plan.devices[b]);
      if (!plan.replicas.empty())
        for (DeviceId d : plan.replicas[static_cast<std::size_t>(b)]) pr.replicas[static_cast<std::size_t>(b)].emplace_back(d, create(d));
    }
  }

  void lower_einsum(NodeId id) {
    const Node& n = g_.node(id);
    const Einsum& e = n.einsum;
    const NodePlan& plan = d_.plan(id);
    const Partition& part = plan.partition;
    std::int64_t partials = partials_per_output_block(g_, id, part);
    if (options_.collectives) all_gathers(id);
    std::vector<BufferId> block_out(part.num_blocks());
    for (std::int64_t b = 0; b < part.num_blocks(); ++b) {
      Rect j = part.block(b);
      DeviceId dev = plan.devices[b];
      Task t;
      t.kind = TaskKind::compute;
      t.device = t.dst_device = dev;
      t.node = id;
      t.block = b;
      t.src = j;
      t.contraction = e.is_contraction();
      std::int64_t in_elems = 0;
      for (std::size_t i = 0; i < e.inputs.size(); ++i) {
        const auto& idx = e.inputs[i];
        Rect r;
        r.rank = static_cast<int>(idx.size());
        for (int k = 0; k < r.rank; ++k) {
          r.offset[k] = j.offset[idx[k]];
          r.size[k] = j.size[idx[k]];
        }
        in_elems += r.elements();
        t.reads.push_back(need(n.inputs[i], r, dev));
      }
      Shape out_shape(j.size.begin(), j.size.begin() + e.out_rank);
      std::int64_t out_elems = elements(out_shape);
      t.flops = e.flops_per_join_element() * static_cast<double>(j.elements());
      t.transcendental_flops = e.join.transcendentals() * static_cast<double>(j.elements());
      t.bytes = (in_elems + out_elems) * dtype_bytes(n.dtype);
      t.writes = new_buffer(dev, std::move(out_shape), n.dtype, Agg::none, id);
      block_out[b] = t.writes;
      emit(std::move(t));
    }
    Produced& pr = produced_[id.index()];
    pr.partition = part.prefix(e.out_rank);
    if (partials == 1) {
      pr.buffers = std::move(block_out);
      pr.devices = plan.devices;
      return;
    }
    // Aggregate the partials into the output partition (NodePlan::output, or the join
    // partition's output indices): every output block accumulates, at its site, the piece
    // of each partial that overlaps it; pieces on one device are combined there first and
    // moved once.
    {
      const Partition prefix = pr.partition;
      OutputBlocks ob = output_blocks(g_, id, plan);
      pr.partition = ob.partition;
      const std::vector<BufferId> collected =
          options_.collectives ? reduce_scatters(id, prefix, ob, partials, block_out) : std::vector<BufferId>();
      for (std::int64_t o = 0; o < ob.partition.num_blocks(); ++o) {
        const Rect out_rect = ob.partition.block(o);
        const DeviceId site = ob.devices[static_cast<std::size_t>(o)];
        if (!collected.empty() && collected[static_cast<std::size_t>(o)].valid()) {  // written by a collective node
          pr.buffers.push_back(collected[static_cast<std::size_t>(o)]);
          pr.devices.push_back(site);
          continue;
        }
        BufferId result = new_buffer(site, out_rect.shape(), n.dtype, e.agg, id);
        for_overlapping(prefix, out_rect, [&](std::int64_t pb, const Rect& partial_rect) {
          Rect inter;
          bool ok = intersect(out_rect, partial_rect, &inter);
          assert(ok);
          (void)ok;
          const Rect src_region = relative_to(inter, partial_rect);
          const Rect dst_region = relative_to(inter, out_rect);
          const Rect whole = Rect::whole(inter.shape());
          // Partials of this piece on one device are combined there first, then moved once.
          std::vector<DeviceId> order;
          std::vector<std::vector<BufferId>> groups;
          for (std::int64_t a = 0; a < partials; ++a) {
            DeviceId dev = plan.devices[pb * partials + a];
            std::int32_t& slot = group_of_device_[dev.index()];
            if (slot < 0) {
              slot = static_cast<std::int32_t>(order.size());
              order.push_back(dev);
              groups.emplace_back();
            }
            groups[slot].push_back(block_out[pb * partials + a]);
          }
          for (DeviceId dev : order) group_of_device_[dev.index()] = -1;
          for (std::size_t gi = 0; gi < order.size(); ++gi) {
            if (order[gi] == site) {
              for (BufferId b : groups[gi]) touch(b, src_region, result, dst_region, TouchOp::accumulate, e.agg);
              continue;
            }
            BufferId piece;
            Rect piece_region = src_region;
            if (groups[gi].size() == 1) {
              piece = groups[gi][0];
            } else {
              piece = new_buffer(order[gi], inter.shape(), n.dtype, e.agg, id);
              for (BufferId b : groups[gi]) touch(b, src_region, piece, whole, TouchOp::accumulate, e.agg);
              piece_region = whole;
            }
            BufferId moved = move(piece, piece_region, site);
            touch(moved, whole, result, dst_region, TouchOp::accumulate, e.agg);
          }
        });
        pr.buffers.push_back(result);
        pr.devices.push_back(site);
      }
    }
  }

  // LowerOptions::collectives: per output block, the buffer a reduce-scatter collective
  // node writes (invalid where the aggregation stays moves and touches). A block of the
  // join partition's output qualifies when its k >= 2 partials lie on k distinct devices
  // and exactly k output blocks lie inside it, one sited on each of those devices.
  std::vector<BufferId> reduce_scatters(NodeId id, const Partition& prefix, const OutputBlocks& ob,
                                        std::int64_t partials, const std::vector<BufferId>& block_out) {
    const Node& n = g_.node(id);
    const NodePlan& plan = d_.plan(id);
    std::vector<BufferId> out(static_cast<std::size_t>(ob.partition.num_blocks()));
    if (partials < 2) return out;
    std::vector<std::vector<std::int64_t>> inside(static_cast<std::size_t>(prefix.num_blocks()));
    std::vector<char> split(static_cast<std::size_t>(prefix.num_blocks()), 0);
    for (std::int64_t o = 0; o < ob.partition.num_blocks(); ++o) {
      std::vector<std::int64_t> over;
      for_overlapping(prefix, ob.partition.block(o), [&](std::int64_t pb, const Rect&) { over.push_back(pb); });
      if (over.size() == 1) {
        inside[static_cast<std::size_t>(over[0])].push_back(o);
      } else {
        for (std::int64_t pb : over) split[static_cast<std::size_t>(pb)] = 1;
      }
    }
    for (std::int64_t pb = 0; pb < prefix.num_blocks(); ++pb) {
      const auto& blocks = inside[static_cast<std::size_t>(pb)];
      if (split[static_cast<std::size_t>(pb)] || static_cast<std::int64_t>(blocks.size()) != partials) continue;
      CollectiveSpec spec;
      std::vector<std::int64_t> block_of_rank;
      for (std::int64_t a = 0; a < partials; ++a) {
        const DeviceId dev = plan.devices[static_cast<std::size_t>(pb * partials + a)];
        if (std::find(spec.devices.begin(), spec.devices.end(), dev) != spec.devices.end()) break;
        auto at = std::find_if(blocks.begin(), blocks.end(),
                               [&](std::int64_t o) { return ob.devices[static_cast<std::size_t>(o)] == dev; });
        if (at == blocks.end()) break;
        spec.devices.push_back(dev);
        block_of_rank.push_back(*at);
      }
      if (static_cast<std::int64_t>(spec.devices.size()) != partials) continue;
      const Rect partial_rect = prefix.block(pb);
      spec.collective = Collective::reducescatter;
      spec.algorithm = Algorithm::ring;
      spec.ranks = static_cast<int>(partials);
      spec.dtype = n.dtype;
      spec.bytes = partial_rect.elements() * dtype_bytes(n.dtype);
      spec.agg = n.einsum.agg;
      Task t;
      t.kind = TaskKind::collective;
      t.device = t.dst_device = spec.devices[0];
      t.node = id;
      t.block = static_cast<std::int64_t>(tg_.collectives.size());
      t.bytes = spec.bytes;
      for (std::int64_t a = 0; a < partials; ++a) {
        const std::int64_t o = block_of_rank[static_cast<std::size_t>(a)];
        const Rect out_rect = ob.partition.block(o);
        spec.regions.push_back(relative_to(out_rect, partial_rect));
        const BufferId result = new_buffer(spec.devices[static_cast<std::size_t>(a)], out_rect.shape(), n.dtype,
                                           n.einsum.agg, id);
        spec.outputs.push_back(result);
        out[static_cast<std::size_t>(o)] = result;
        t.reads.push_back(block_out[static_cast<std::size_t>(pb * partials + a)]);
      }
      const TaskId task = emit(std::move(t));
      for (BufferId b : spec.outputs) last_writer_[b.index()] = task.value;  // fresh buffers: no earlier writer
      tg_.collectives.push_back(std::move(spec));
    }
    return out;
  }

  // LowerOptions::collectives: operand regions of einsum `id` that are all-gathers,
  // emitted as collective nodes whose outputs need() then finds (lowering_all_gather.h).
  void all_gathers(NodeId id) {
    const Node& n = g_.node(id);
    const NodePlan& plan = d_.plan(id);
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const NodeId producer = n.inputs[i];
      const Produced& pr = produced_[producer.index()];
      if (!pr.replicas.empty()) continue;  // a copy at rest is read where it lies
      for (const AllGather& ag : find_all_gathers(n.einsum, i, plan, pr.partition, pr.devices)) {
        bool fresh = true;
        for (DeviceId dev : ag.devices) fresh = fresh && !assembled_.contains(RegionKey{producer.value, dev.value, ag.region});
        if (!fresh) continue;
        CollectiveSpec spec;
        spec.collective = Collective::allgather;
        spec.algorithm = Algorithm::ring;
        spec.ranks = static_cast<int>(ag.blocks.size());
        spec.dtype = g_.node(producer).dtype;
        spec.bytes = ag.region.elements() * dtype_bytes(spec.dtype);
        spec.agg = Agg::none;
        spec.devices = ag.devices;
        Task t;
        t.kind = TaskKind::collective;
        t.device = t.dst_device = spec.devices[0];
        t.node = producer;  // as the moves it replaces: the producer's communication phase
        t.block = static_cast<std::int64_t>(tg_.collectives.size());
        t.bytes = spec.bytes;
        for (std::size_t r = 0; r < ag.blocks.size(); ++r) {
          const std::int64_t b = ag.blocks[r];
          spec.regions.push_back(relative_to(pr.partition.block(b), ag.region));
          const BufferId out = new_buffer(ag.devices[r], ag.region.shape(), spec.dtype, Agg::none, producer);
          spec.outputs.push_back(out);
          assembled_.emplace(RegionKey{producer.value, ag.devices[r].value, ag.region}, out);
          t.reads.push_back(pr.buffers[static_cast<std::size_t>(b)]);
        }
        const TaskId task = emit(std::move(t));
        for (BufferId b : spec.outputs) last_writer_[b.index()] = task.value;  // fresh buffers: no earlier writer
        tg_.collectives.push_back(std::move(spec));
      }
    }
  }

  void lower_select(NodeId id) {
    const Node& n = g_.node(id);
    const NodePlan& plan = d_.plan(id);
    Produced& pr = produced_[id.index()];
    pr.partition = plan.partition;
    for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b) {
      Rect o = plan.partition.block(b);
      DeviceId dev = plan.devices[b];
      BufferId buf = new_buffer(dev, o.shape(), n.dtype, Agg::none, id);
      for (const SelectPiece& pc : n.pieces) {
        Rect piece;
        piece.rank = o.rank;
        for (int d = 0; d < o.rank; ++d) {
          piece.offset[d] = pc.dst_offset[d];
          piece.size[d] = pc.size[d];
        }
        Rect inter;
        if (!intersect(o, piece, &inter)) continue;
        Rect src = inter;  // the same region in the input's coordinates
        Rect origin = o;   // input coordinate that lands at (0,...) of buf
        for (int d = 0; d < o.rank; ++d) {
          src.offset[d] = pc.src_offset[d] + (inter.offset[d] - piece.offset[d]);
          origin.offset[d] = src.offset[d] - (inter.offset[d] - o.offset[d]);
        }
        gather_into(n.inputs[pc.input], src, dev, buf, origin);
      }
      pr.buffers.push_back(buf);
      pr.devices.push_back(dev);
    }
  }

  void lower_output(NodeId id) {
    const Node& n = g_.node(id);
    const NodePlan& plan = d_.plan(id);
    for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b) {
      Rect r = plan.partition.block(b);
      Task t;
      t.kind = TaskKind::output;
      t.device = t.dst_device = plan.devices[b];
      t.node = id;
      t.block = b;
      t.src = r;
      t.bytes = r.elements() * dtype_bytes(n.dtype);
      t.reads = {need(n.inputs[0], r, t.device)};
      emit(std::move(t));
    }
  }

  const Graph& g_;
  const Decomposition& d_;
  LowerOptions options_;
  TaskGraph tg_;
  std::vector<Produced> produced_;
  std::vector<std::int32_t> group_of_device_;  // scratch for aggregation: device -> group, -1
  std::vector<std::int32_t> last_writer_;  // per buffer: newest task writing it, -1 if none
  std::vector<std::int32_t> prev_writer_;  // per task: the previous writer of its buffer
  MoveCache moves_;
  std::unordered_map<RegionKey, BufferId, RegionKeyHash> assembled_;
};

}  // namespace

TaskGraph lower(const Graph& g, const Decomposition& d) { return lower(g, d, LowerOptions{}); }

TaskGraph lower(const Graph& g, const Decomposition& d, const LowerOptions& options) {
  d.validate(g);
  return Lowering(g, d, options).run();
}

}  // namespace tessel
