#include "core/collective_rewrite.h"

#include <algorithm>

#include "core/error.h"

namespace tessel {

BufferId CollectiveRewriter::buffer(DeviceId device, const Shape& shape, Agg init) {
  out_.buffers.push_back(Buffer{device, shape, dtype_, init, node_});
  writers_.emplace_back();
  return BufferId(static_cast<std::int32_t>(out_.buffers.size() - 1));
}

TaskId CollectiveRewriter::add(Task t) {
  const TaskId id(static_cast<std::int32_t>(out_.tasks.size()));
  for (BufferId b : t.reads)
    for (TaskId w : writers_[b.index()]) t.deps.push_back(w);
  std::sort(t.deps.begin(), t.deps.end());
  t.deps.erase(std::unique(t.deps.begin(), t.deps.end()), t.deps.end());
  if (t.writes.valid()) writers_[t.writes.index()].push_back(id);
  out_.tasks.push_back(std::move(t));
  return id;
}

BufferId CollectiveRewriter::move(BufferId src, const Rect& region, DeviceId to) {
  Task t;
  t.kind = TaskKind::move;
  t.device = out_.buffer(src).device;
  t.dst_device = to;
  t.node = node_;
  t.reads = {src};
  t.src = region;
  t.bytes = region.elements() * dtype_bytes(dtype_);
  t.writes = buffer(to, region.shape(), Agg::none);
  const BufferId w = t.writes;
  add(std::move(t));
  return w;
}

void CollectiveRewriter::touch(BufferId src, const Rect& src_region, BufferId dst, const Rect& dst_region, TouchOp op) {
  Task t;
  t.kind = TaskKind::touch;
  t.device = t.dst_device = out_.buffer(dst).device;
  t.node = node_;
  t.reads = {src};
  t.writes = dst;
  t.src = src_region;
  t.dst = dst_region;
  t.op = op;
  t.agg = op == TouchOp::accumulate ? agg_ : Agg::none;
  t.bytes = src_region.elements() * dtype_bytes(dtype_);
  t.flops = op == TouchOp::accumulate ? static_cast<double>(src_region.elements()) : 0.0;
  add(std::move(t));
}

void CollectiveRewriter::order(TaskId earlier, TaskId later) {
  auto& deps = out_.tasks[later.index()].deps;
  auto at = std::lower_bound(deps.begin(), deps.end(), earlier);
  if (at == deps.end() || *at != earlier) deps.insert(at, earlier);
}

bool has_lowered_collectives(const TaskGraph& tg) {
  return std::any_of(tg.collectives.begin(), tg.collectives.end(), [](const CollectiveSpec& s) { return s.lowered(); });
}

TaskGraph replace_collectives(
    const TaskGraph& tg, const std::function<void(const Task&, const CollectiveSpec&, CollectiveRewriter&)>& expand) {
  if (!has_lowered_collectives(tg)) return tg;
  CollectiveRewriter r;
  r.out_.num_devices = tg.num_devices;
  r.out_.buffers = tg.buffers;
  r.out_.tasks.reserve(tg.tasks.size());
  r.writers_.assign(tg.buffers.size(), {});
  for (const CollectiveSpec& s : tg.collectives)
    for (BufferId b : s.outputs) r.out_.buffers[b.index()].init = s.agg;
  // Old task id → the new tasks that stand for it (one, or a collective's many).
  std::vector<std::vector<TaskId>> now(tg.tasks.size());
  for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
    const Task& t = tg.tasks[i];
    if (t.kind == TaskKind::collective) {
      const CollectiveSpec& s = tg.collectives[static_cast<std::size_t>(t.block)];
      if (!s.lowered())
        fail("task graph: task ", i, " is a collective node that is not lowered (it must be the graph's only task)");
      const std::size_t first = r.out_.tasks.size();
      r.node_ = t.node;
      r.dtype_ = s.dtype;
      r.agg_ = s.agg;
      expand(t, s, r);
      for (std::size_t k = first; k < r.out_.tasks.size(); ++k) now[i].emplace_back(static_cast<std::int32_t>(k));
      continue;
    }
    Task c = t;
    c.deps.clear();
    for (TaskId d : t.deps) {
      const auto& stand = now[d.index()];
      if (tg.task(d).kind != TaskKind::collective) {
        for (TaskId n : stand) c.deps.push_back(n);
        continue;
      }
      // Only the new tasks writing what this task reads.
      const std::size_t before = c.deps.size();
      for (TaskId n : stand) {
        const BufferId w = r.out_.task(n).writes;
        if (w.valid() && std::find(t.reads.begin(), t.reads.end(), w) != t.reads.end()) c.deps.push_back(n);
      }
      if (c.deps.size() == before)
        for (TaskId n : stand) c.deps.push_back(n);
    }
    std::sort(c.deps.begin(), c.deps.end());
    c.deps.erase(std::unique(c.deps.begin(), c.deps.end()), c.deps.end());
    const TaskId id(static_cast<std::int32_t>(r.out_.tasks.size()));
    if (c.writes.valid()) r.writers_[c.writes.index()].push_back(id);
    r.out_.tasks.push_back(std::move(c));
    now[i] = {id};
  }
  return std::move(r.out_);
}

TaskGraph collectives_as_moves(const TaskGraph& tg) {
  return replace_collectives(tg, [](const Task& t, const CollectiveSpec& s, CollectiveRewriter& r) {
    if (s.collective == Collective::allgather) {  // every rank's input copied into its region of every output
      for (int to = 0; to < s.ranks; ++to) {
        const auto ut = static_cast<std::size_t>(to);
        for (int from = 0; from < s.ranks; ++from) {
          const auto uf = static_cast<std::size_t>(from);
          const BufferId in = t.reads[uf];
          const Rect whole = Rect::whole(r.graph().buffer(in).shape);
          const BufferId here = from == to ? in : r.move(in, whole, s.devices[ut]);
          r.touch(here, whole, s.outputs[ut], s.regions[uf], TouchOp::copy);
        }
      }
      return;
    }
    for (int to = 0; to < s.ranks; ++to) {
      const auto ut = static_cast<std::size_t>(to);
      const BufferId out = s.outputs[ut];
      const Rect& region = s.regions[ut];
      const Rect whole = Rect::whole(region.shape());
      for (int from = 0; from < s.ranks; ++from) {
        const BufferId in = t.reads[static_cast<std::size_t>(from)];
        if (from == to) {
          r.touch(in, region, out, whole, TouchOp::accumulate);
          continue;
        }
        const BufferId moved = r.move(in, region, s.devices[ut]);
        r.touch(moved, whole, out, whole, TouchOp::accumulate);
      }
    }
  });
}

}  // namespace tessel
