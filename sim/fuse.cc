// Fused computation-collective tasks (sim/fuse.h).
#include "sim/fuse.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "sim/compute_model.h"

namespace tessel::sim {

FusedGraph fuse_collectives(const TaskGraph& tg, const Machine& m) {
  const int tiles = m.interference.fused.tiles;
  const double occupancy = m.interference.fused.comm_occupancy;
  const std::size_t n = tg.tasks.size();
  FusedGraph out;
  // A contraction is fused when moves to other devices read what it writes straight away.
  std::vector<char> gemm(n, 0), piece_move(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const Task& t = tg.tasks[i];
    if (t.kind != TaskKind::move || t.dst_device == t.device || t.reads.empty()) continue;
    for (TaskId d : t.deps) {
      const Task& p = tg.task(d);
      if (p.kind == TaskKind::compute && p.contraction && p.writes == t.reads[0]) {
        gemm[d.index()] = 1;
        piece_move[i] = 1;
      }
    }
  }
  for (char g : gemm) out.fused_kernels += g;
  if (out.fused_kernels == 0) {
    out.graph = tg;
    return out;
  }
  TaskGraph& g = out.graph;
  g.num_devices = tg.num_devices;
  g.buffers = tg.buffers;
  g.tasks.reserve(n + static_cast<std::size_t>(out.fused_kernels) * static_cast<std::size_t>(tiles));
  // Old task → its new ids: a fused GEMM's tiles, a fused move's pieces, else one task.
  std::vector<std::vector<TaskId>> ids(n);
  auto add = [&](Task t, double seconds, bool fused) {
    g.tasks.push_back(std::move(t));
    out.task_seconds.push_back(seconds);
    out.fused.push_back(fused ? 1 : 0);
    return TaskId(static_cast<std::int32_t>(g.tasks.size() - 1));
  };
  // Dependencies on old task d, as the new graph sees them: a GEMM's last tile (the
  // tiles are chained), every piece of a move, or the task itself.
  auto map_deps = [&](const std::vector<TaskId>& deps, TaskId skip) {
    std::vector<TaskId> nd;
    for (TaskId d : deps) {
      if (d == skip) continue;
      const auto& v = ids[d.index()];
      if (gemm[d.index()]) nd.push_back(v.back());
      else nd.insert(nd.end(), v.begin(), v.end());
    }
    return nd;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const Task& t = tg.tasks[i];
    if (gemm[i]) {
      const DeviceType& dt = m.type_of(t.device);
      const double whole = compute_seconds(t, tg, dt);
      const double body = std::max(0.0, whole - dt.launch_latency_s) / tiles / (1.0 - occupancy);
      for (int k = 0; k < tiles; ++k) {
        Task tile = t;
        tile.flops = t.flops / tiles;
        tile.transcendental_flops = t.transcendental_flops / tiles;
        tile.bytes = t.bytes / tiles;
        tile.deps = k == 0 ? map_deps(t.deps, TaskId()) : std::vector<TaskId>{ids[i].back()};
        ids[i].push_back(add(std::move(tile), body + (k == 0 ? dt.launch_latency_s : 0.0), true));
      }
      continue;
    }
    if (piece_move[i]) {
      ++out.fused_moves;
      // Its GEMM: the dependency that writes what it reads.
      TaskId src;
      for (TaskId d : t.deps)
        if (gemm[d.index()] && tg.task(d).writes == t.reads[0]) src = d;
      const std::vector<TaskId> rest = map_deps(t.deps, src);
      const std::int64_t pieces = std::min<std::int64_t>(tiles, std::max<std::int64_t>(1, t.bytes));
      const auto& gemm_tiles = ids[src.index()];
      for (std::int64_t k = 0; k < pieces; ++k) {
        Task piece = t;
        piece.bytes = t.bytes / pieces + (k < t.bytes % pieces ? 1 : 0);
        // The piece goes once its tile (the k-th of `pieces` shares of the tiles) is done.
        const auto tile = static_cast<std::size_t>((k + 1) * tiles / pieces - 1);
        piece.deps = rest;
        piece.deps.push_back(gemm_tiles[tile]);
        ids[i].push_back(add(std::move(piece), -1.0, true));
      }
      continue;
    }
    Task copy = t;
    copy.deps = map_deps(t.deps, TaskId());
    ids[i].push_back(add(std::move(copy), -1.0, false));
  }
  g.validate();
  return out;
}

int fuse_collectives_into(TaskGraph& tg, const Machine& m, SimOptions& so) {
  FusedGraph f = fuse_collectives(tg, m);
  if (f.fused_kernels == 0) return 0;
  tg = std::move(f.graph);
  so.task_seconds = std::move(f.task_seconds);
  so.fused = std::move(f.fused);
  return f.fused_kernels;
}

}  // namespace tessel::sim
