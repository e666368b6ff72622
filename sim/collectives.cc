#include "sim/collectives.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/collective_rewrite.h"
#include "core/error.h"
#include "core/ready_order.h"

namespace tessel::sim {

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::allreduce: return "allreduce";
    case Collective::reducescatter: return "reducescatter";
    case Collective::allgather: return "allgather";
    case Collective::alltoall: return "alltoall";
  }
  return "?";
}

Collective parse_collective(std::string_view s, std::string_view what) {
  for (Collective c : {Collective::allreduce, Collective::reducescatter, Collective::allgather, Collective::alltoall})
    if (s == to_string(c)) return c;
  fail(what, ": unknown collective '", s, "' (expected allreduce, reducescatter, allgather or alltoall)");
}

double bus_bandwidth_factor(Collective c, int n) {
  const double nn = n;
  if (c == Collective::allreduce) return 2 * (nn - 1) / nn;
  return (nn - 1) / nn;
}

double collective_closed_form_s(Collective c, int n, double bytes, double alpha_s, double bytes_per_s) {
  const double nn = n;
  const double steps = c == Collective::allreduce ? 2 * (nn - 1) : nn - 1;
  return steps * alpha_s + steps / nn * bytes / bytes_per_s;
}

// Computed without forming the product c · length, which overflows for large collectives:
// c (q m + r) / m = c q + floor(c r / m), with c, r < m <= 65,536.
std::int64_t split_point(int c, std::int64_t length, int m) {
  return static_cast<std::int64_t>(c) * (length / m) + static_cast<std::int64_t>(c) * (length % m) / m;
}

namespace {

Rect interval(std::int64_t offset, std::int64_t size) {
  Rect r;
  r.rank = 1;
  r.offset[0] = offset;
  r.size[0] = size;
  return r;
}

// Appends tasks with their dependencies derived from the buffers they read, as lower() does.
class Builder {
 public:
  Builder(int n, DType dtype) : dtype_(dtype) { tg_.num_devices = n; }

  BufferId buffer(int device, std::int64_t elements, Agg init, int node) {
    tg_.buffers.push_back(Buffer{DeviceId(device), Shape{elements}, dtype_, init, NodeId(node)});
    writers_.emplace_back();
    return BufferId(static_cast<std::int32_t>(tg_.buffers.size() - 1));
  }
  std::int64_t elements(BufferId b) const { return tg_.buffer(b).shape[0]; }

  BufferId input(int device, std::int64_t elements) {
    Task t;
    t.kind = TaskKind::input;
    t.device = t.dst_device = DeviceId(device);
    t.node = NodeId(0);
    t.block = device;
    t.writes = buffer(device, elements, Agg::none, 0);
    t.src = interval(0, elements);
    t.bytes = elements * dtype_bytes(dtype_);
    add(std::move(t));
    return tg_.tasks.back().writes;
  }

  // Region [offset, offset + size) of `src` to a new buffer on `to`.
  BufferId move(BufferId src, std::int64_t offset, std::int64_t size, int to, int node) {
    Task t;
    t.kind = TaskKind::move;
    t.device = tg_.buffer(src).device;
    t.dst_device = DeviceId(to);
    t.node = NodeId(node);
    t.reads = {src};
    t.writes = buffer(to, size, Agg::none, node);
    t.src = interval(offset, size);
    t.bytes = size * dtype_bytes(dtype_);
    add(std::move(t));
    return tg_.tasks.back().writes;
  }

  // Sums region [offset, offset + size) of `src` into the whole of `dst` (same device).
  void accumulate(BufferId src, std::int64_t offset, std::int64_t size, BufferId dst, int node) {
    Task t;
    t.kind = TaskKind::touch;
    t.device = t.dst_device = tg_.buffer(dst).device;
    t.node = NodeId(node);
    t.reads = {src};
    t.writes = dst;
    t.src = interval(offset, size);
    t.dst = interval(0, size);
    t.op = TouchOp::accumulate;
    t.agg = Agg::sum;
    t.flops = static_cast<double>(size);
    t.bytes = size * dtype_bytes(dtype_);
    add(std::move(t));
  }

  // `later` also waits for `earlier` (a dependency no buffer implies).
  void order(TaskId earlier, TaskId later) {
    auto& deps = tg_.tasks[later.index()].deps;
    deps.insert(std::lower_bound(deps.begin(), deps.end(), earlier), earlier);
  }
  [[nodiscard]] TaskId last() const { return TaskId(static_cast<std::int32_t>(tg_.tasks.size() - 1)); }
  [[nodiscard]] std::size_t size() const { return tg_.tasks.size(); }

  // Tasks [first, size()) are piece j: records each rank's last incoming move, and makes
  // each rank's first send of piece j wait for piece j − window to reach it.
  void bound_pieces(std::size_t first, int j, int n, std::vector<std::vector<TaskId>>& last_into,
                    int window = kPiecesInFlight) {
    last_into.emplace_back(static_cast<std::size_t>(n));
    std::vector<TaskId> first_from(static_cast<std::size_t>(n));
    for (std::size_t t = first; t < tg_.tasks.size(); ++t) {
      const Task& task = tg_.tasks[t];
      if (task.kind != TaskKind::move) continue;
      last_into.back()[task.dst_device.index()] = TaskId(static_cast<std::int32_t>(t));
      TaskId& f = first_from[task.device.index()];
      if (!f.valid()) f = TaskId(static_cast<std::int32_t>(t));
    }
    if (j < window) return;
    const auto& before = last_into[static_cast<std::size_t>(j - window)];
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      if (before[ur].valid() && first_from[ur].valid()) order(before[ur], first_from[ur]);
    }
  }

  TaskGraph take() { return std::move(tg_); }

 private:
  void add(Task t) {
    const TaskId id(static_cast<std::int32_t>(tg_.tasks.size()));
    for (BufferId b : t.reads)
      for (TaskId w : writers_[b.index()]) t.deps.push_back(w);
    std::sort(t.deps.begin(), t.deps.end());
    t.deps.erase(std::unique(t.deps.begin(), t.deps.end()), t.deps.end());
    if (t.writes.valid()) writers_[t.writes.index()].push_back(id);
    tg_.tasks.push_back(std::move(t));
  }

  DType dtype_;
  TaskGraph tg_;
  std::vector<std::vector<TaskId>> writers_;
};




// A contiguous run of elements in a buffer; a chunk of a collective is a list of them.
struct Piece {
  BufferId buf;
  std::int64_t offset = 0;
  std::int64_t length = 0;
};
using Chunk = std::vector<Piece>;

// Ring reduce-scatter over devices `ring` (position p sends to p + 1) of the `length`
// elements that position p holds at data[p] (buffer, offset), split into m chunks as
// evenly as they go. Returns, per position p, the reduced chunk (p + 1) mod m.
std::vector<Chunk> ring_reduce_scatter(Builder& b, const std::vector<int>& ring, const std::vector<Piece>& data,
                                       int node) {
  const int m = static_cast<int>(ring.size());
  const std::int64_t length = data[0].length;
  auto lo = [&](int c) { return split_point(c, length, m); };
  auto len = [&](int c) { return lo(c + 1) - lo(c); };
  auto mod = [m](int v) { return ((v % m) + m) % m; };
  const auto um = static_cast<std::size_t>(m);
  std::vector<std::vector<BufferId>> partial(um, std::vector<BufferId>(um));
  for (int k = 0; k + 1 < m; ++k, ++node)
    for (int i = 0; i < m; ++i) {
      const int chunk = mod(i - k), to = mod(i + 1);
      const auto ui = static_cast<std::size_t>(i), uc = static_cast<std::size_t>(chunk), ut = static_cast<std::size_t>(to);
      const int dev = ring[ut];
      BufferId received = k == 0 ? b.move(data[ui].buf, data[ui].offset + lo(chunk), len(chunk), dev, node)
                                 : b.move(partial[ui][uc], 0, len(chunk), dev, node);
      BufferId sum = b.buffer(dev, len(chunk), Agg::sum, node);
      b.accumulate(received, 0, len(chunk), sum, node);
      b.accumulate(data[ut].buf, data[ut].offset + lo(chunk), len(chunk), sum, node);
      partial[ut][uc] = sum;
    }
  std::vector<Chunk> out(um);
  for (int i = 0; i < m; ++i) {
    const int c = mod(i + 1);
    const auto ui = static_cast<std::size_t>(i);
    out[ui] = m == 1 ? Chunk{data[0]} : Chunk{Piece{partial[ui][static_cast<std::size_t>(c)], 0, len(c)}};
  }
  return out;
}

// Ring all-gather: position p starts with chunk (p + own) mod m (`owned[p]`); in step k it
// forwards the chunk it received in step k − 1 (its own first). Returns have[p][c].
std::vector<std::vector<Chunk>> ring_all_gather(Builder& b, const std::vector<int>& ring, const std::vector<Chunk>& owned,
                                                int own, int node) {
  const int m = static_cast<int>(ring.size());
  const auto um = static_cast<std::size_t>(m);
  auto mod = [m](int v) { return ((v % m) + m) % m; };
  std::vector<std::vector<Chunk>> have(um, std::vector<Chunk>(um));
  for (int i = 0; i < m; ++i) have[static_cast<std::size_t>(i)][static_cast<std::size_t>(mod(i + own))] = owned[static_cast<std::size_t>(i)];
  for (int k = 0; k + 1 < m; ++k, ++node)
    for (int i = 0; i < m; ++i) {
      const auto uc = static_cast<std::size_t>(mod(i + own - k));
      const auto ut = static_cast<std::size_t>(mod(i + 1));
      Chunk moved;
      for (const Piece& p : have[static_cast<std::size_t>(i)][uc])
        moved.push_back(Piece{b.move(p.buf, p.offset, p.length, ring[ut], node), 0, p.length});
      have[ut][uc] = std::move(moved);
    }
  return have;
}

// Double binary tree all-reduce of data[p] (position p = rank p): tree 0 is the binary
// heap on positions (parent (i − 1) / 2), tree 1 its mirror image (index n − 1 − p), each
// reducing half of the elements up to its root, then broadcasting them down.
void tree_all_reduce(Builder& b, int n, const std::vector<Piece>& data, int node0) {
  int depth = 0;
  while ((2 << depth) - 1 < n) ++depth;  // levels below the root
  for (int t = 0; t < 2; ++t) {
    const std::int64_t lo = t == 0 ? 0 : data[0].length / 2;
    const std::int64_t len = t == 0 ? data[0].length / 2 : data[0].length - data[0].length / 2;
    if (len == 0) continue;
    auto rank_of = [&](int idx) { return t == 0 ? idx : n - 1 - idx; };
    auto level = [](int idx) {
      int l = 0;
      while (idx > 0) idx = (idx - 1) / 2, ++l;
      return l;
    };
    std::vector<Piece> partial(static_cast<std::size_t>(n));
    // Reduce: deepest first; a node adds what its children send to its own half.
    for (int idx = n - 1; idx >= 0; --idx) {
      const int r = rank_of(idx);
      const Piece own{data[static_cast<std::size_t>(r)].buf, data[static_cast<std::size_t>(r)].offset + lo, len};
      const int node = node0 + depth - level(idx);
      Piece mine = own;
      const int c1 = 2 * idx + 1, c2 = 2 * idx + 2;
      if (c1 < n) {
        BufferId sum = b.buffer(r, len, Agg::sum, node);
        b.accumulate(own.buf, own.offset, len, sum, node);
        for (int c : {c1, c2}) {
          if (c >= n) continue;
          const Piece& p = partial[static_cast<std::size_t>(c)];
          BufferId received = b.move(p.buf, p.offset, len, r, node);
          b.accumulate(received, 0, len, sum, node);
        }
        mine = Piece{sum, 0, len};
      }
      partial[static_cast<std::size_t>(idx)] = mine;
    }
    // Broadcast: the root's sum down the same tree.
    std::vector<Piece> final_(static_cast<std::size_t>(n));
    final_[0] = partial[0];
    for (int idx = 0; idx < n; ++idx)
      for (int c : {2 * idx + 1, 2 * idx + 2}) {
        if (c >= n) continue;
        const Piece& p = final_[static_cast<std::size_t>(idx)];
        final_[static_cast<std::size_t>(c)] =
            Piece{b.move(p.buf, p.offset, len, rank_of(c), node0 + depth + 1 + level(idx)), 0, len};
      }
  }
}

// Hierarchical all-reduce of data[p] (ranks numbered node by node, g per node):
// reduce-scatter in every node, all-reduce along every rail, all-gather in every node.
// Piece j. Each phase keeps its own window (`windows`, one per phase,
// Builder::bound_pieces; kPiecesInFlight inside the node, `rail_window` along the rails):
// the phases run over different connections (NVLink ring, NIC rail ring), and NCCL's
// NCCL_STEPS bound is per connection. One window over the whole piece would make piece
// j + 8 wait for piece j's last all-gather step before its first reduce-scatter step,
// starving the NICs between batches of 8 pieces (+12% over the formula on 16 nodes, +16%
// on 4).
void hierarchical_all_reduce(Builder& b, int n, int g, int rail_window, const std::vector<Piece>& data, int j,
                             std::vector<std::vector<TaskId>> (&windows)[3]) {
  std::size_t phase_first = b.size();
  const int nodes = n / g;
  std::vector<Chunk> reduced(static_cast<std::size_t>(n));
  for (int q = 0; q < nodes; ++q) {
    std::vector<int> ring;
    std::vector<Piece> part;
    for (int l = 0; l < g; ++l) {
      ring.push_back(q * g + l);
      part.push_back(data[static_cast<std::size_t>(q * g + l)]);
    }
    auto r = ring_reduce_scatter(b, ring, part, 1);
    for (int l = 0; l < g; ++l) reduced[static_cast<std::size_t>(q * g + l)] = r[static_cast<std::size_t>(l)];
  }
  b.bound_pieces(phase_first, j, n, windows[0]);
  phase_first = b.size();
  const int inter_node0 = g;  // after the g − 1 intra-node steps
  std::vector<Chunk> full(static_cast<std::size_t>(n));
  for (int l = 0; l < g; ++l) {
    std::vector<int> rail;
    std::vector<Piece> part;
    for (int q = 0; q < nodes; ++q) {
      rail.push_back(q * g + l);
      part.push_back(reduced[static_cast<std::size_t>(q * g + l)][0]);
    }
    auto r = ring_reduce_scatter(b, rail, part, inter_node0);
    auto have = ring_all_gather(b, rail, r, 1, inter_node0 + nodes - 1);
    for (int q = 0; q < nodes; ++q) {
      Chunk c;
      for (const Chunk& sub : have[static_cast<std::size_t>(q)]) c.insert(c.end(), sub.begin(), sub.end());
      full[static_cast<std::size_t>(q * g + l)] = std::move(c);
    }
  }
  b.bound_pieces(phase_first, j, n, windows[1], rail_window);
  phase_first = b.size();
  const int ag_node0 = inter_node0 + 2 * (nodes - 1);
  for (int q = 0; q < nodes; ++q) {
    std::vector<int> ring;
    std::vector<Chunk> owned;
    for (int l = 0; l < g; ++l) {
      ring.push_back(q * g + l);
      owned.push_back(full[static_cast<std::size_t>(q * g + l)]);
    }
    (void)ring_all_gather(b, ring, owned, 1, ag_node0);
  }
  b.bound_pieces(phase_first, j, n, windows[2]);
}

void check_spec(const CollectiveSpec& s) {
  const std::string_view c = to_string(s.collective);
  if (s.ranks < 1) fail("collective ", c, ": the number of ranks must be >= 1, got ", s.ranks);
  const std::int64_t eb = dtype_bytes(s.dtype);
  if (s.bytes <= 0 || s.bytes % eb != 0)
    fail("collective ", c, ": bytes = ", s.bytes, " is not a positive whole number of ", to_string(s.dtype),
         " elements (", eb, " bytes each)");
  if (s.slices < 1) fail("collective ", c, ": slices must be >= 1, got ", s.slices);
  if (s.window < 0) fail("collective ", c, ": window must be >= 0, got ", s.window);
  if (s.rail_window < 1) fail("collective ", c, ": rail_window must be >= 1, got ", s.rail_window);
  if (s.ring_window < 1) fail("collective ", c, ": ring_window must be >= 1, got ", s.ring_window);
  const bool a2a = s.collective == Collective::alltoall;
  if (a2a != (s.algorithm == Algorithm::pairwise) ||
      ((s.algorithm == Algorithm::tree || s.algorithm == Algorithm::hierarchical) && s.collective != Collective::allreduce))
    fail("algorithm: '", to_string(s.algorithm), "' does not fit ", c, " (expected ",
         a2a ? "pairwise" : s.collective == Collective::allreduce ? "ring, tree or hierarchical" : "ring", ")");
  if ((s.algorithm == Algorithm::hierarchical || (a2a && s.ranks_per_node > 0)) &&
      (s.ranks_per_node < 1 || s.ranks % s.ranks_per_node != 0 || s.ranks / s.ranks_per_node < 2))
    fail("algorithm: 'hierarchical' needs ranks on at least two nodes of equal size; ", s.ranks, " ranks with ",
         s.ranks_per_node, " per node do not fit");
  const std::int64_t elements = s.bytes / eb;
  const std::int64_t need = static_cast<std::int64_t>(a2a ? s.ranks : s.ranks * 2) * s.slices;
  if (elements < need && !(s.ranks == 1 && elements >= s.slices))
    fail("collective ", c, ": ", elements, " elements cannot be split into ", s.ranks, " ranks x ", s.slices,
         " slices", a2a ? "" : " x 2", " (one element per chunk at least)");
}

}  // namespace

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::pairwise: return "pairwise";
  }
  return "?";
}

Algorithm parse_algorithm(std::string_view s, std::string_view what) {
  for (Algorithm a : {Algorithm::ring, Algorithm::tree, Algorithm::hierarchical, Algorithm::pairwise})
    if (s == to_string(a)) return a;
  fail(what, ": unknown algorithm '", s, "' (expected ring, tree, hierarchical or pairwise)");
}

TaskGraph collective_task_graph(Collective c, int n, std::int64_t bytes, DType dtype) {
  CollectiveSpec s;
  s.collective = c;
  s.algorithm = c == Collective::alltoall ? Algorithm::pairwise : Algorithm::ring;
  s.ranks = n;
  s.bytes = bytes;
  s.dtype = dtype;
  return collective_task_graph(s);
}

TaskGraph collective_task_graph(const CollectiveSpec& s) {
  check_spec(s);
  const int n = s.ranks;
  const std::int64_t elements = s.bytes / dtype_bytes(s.dtype);
  auto lo = [&](int chunk) { return split_point(chunk, elements, n); };
  auto len = [&](int chunk) { return lo(chunk + 1) - lo(chunk); };
  auto mod = [n](int v) { return ((v % n) + n) % n; };
  Builder b(n, s.dtype);
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;

  if (s.collective == Collective::alltoall) {
    std::vector<BufferId> in;
    for (int i = 0; i < n; ++i) in.push_back(b.input(i, elements));
    // sent[i][k]: rank i's step-k move, for the window's ordering.
    std::vector<std::vector<TaskId>> sent(static_cast<std::size_t>(n), std::vector<TaskId>(static_cast<std::size_t>(n)));
    if (s.ranks_per_node > 0 && s.ranks_per_node < n) {
      // Two levels, staggered on each: in intra-node step j rank (q, l) sends to (q, l + j);
      // in inter-node step (d, t) to (q + d, l + t). Every step is a permutation, so no
      // NVLink or NIC receives from two senders of one step.
      // (core/ready_order.h: the steps are stagger_step's, the order ready moves tie in.)
      const StaggerLayout layout{n, s.ranks_per_node};
      for (int step = 1; step < n; ++step)
        for (int i = 0; i < n; ++i) {
          const int to = stagger_peer(i, step, layout);
          (void)b.move(in[static_cast<std::size_t>(i)], lo(to), len(to), to, step);
        }
      return b.take();
    }
    for (int k = 1; k < n; ++k)
      for (int i = 0; i < n; ++i) {
        const int to = mod(i + k);
        (void)b.move(in[static_cast<std::size_t>(i)], lo(to), len(to), to, k);
        sent[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)] = b.last();
        if (s.window > 0 && k - s.window >= 1)
          b.order(sent[static_cast<std::size_t>(i)][static_cast<std::size_t>(k - s.window)], b.last());
      }
    return b.take();
  }

  // The slice of a rank's elements [0, total) that piece j covers.
  auto slice = [&](std::int64_t total, int j) {
    const std::int64_t a = split_point(j, total, s.slices), z = split_point(j + 1, total, s.slices);
    return std::pair{a, z - a};
  };

  if (s.collective == Collective::allgather) {
    std::vector<BufferId> in;
    for (int i = 0; i < n; ++i) in.push_back(b.input(i, len(i)));
    for (int j = 0; j < s.slices; ++j) {
      std::vector<Chunk> owned;
      for (int i = 0; i < n; ++i) {
        auto [off, l] = slice(len(i), j);
        owned.push_back(Chunk{Piece{in[static_cast<std::size_t>(i)], off, l}});
      }
      (void)ring_all_gather(b, all, owned, 0, 1);
    }
    return b.take();
  }

  std::vector<BufferId> in;
  for (int i = 0; i < n; ++i) in.push_back(b.input(i, elements));
  // Pieces in flight: a rank starts sending piece j once piece j − kPiecesInFlight has
  // arrived at it, as NCCL's loop over chunks keeps a bounded number of steps in flight;
  // older pieces then finish first instead of every piece finishing at the end.
  std::vector<std::vector<TaskId>> last_into;  // per piece, per rank: its last incoming move
  std::vector<std::vector<TaskId>> phase_last_into[3];  // hierarchical: the same per phase
  for (int j = 0; j < s.slices; ++j) {
    const std::size_t first_task = b.size();
    auto [off, l] = slice(elements, j);
    std::vector<Piece> data;
    for (int i = 0; i < n; ++i) data.push_back(Piece{in[static_cast<std::size_t>(i)], off, l});
    if (s.algorithm == Algorithm::tree) {
      tree_all_reduce(b, n, data, 1);
    } else if (s.algorithm == Algorithm::ring) {
      std::vector<Chunk> reduced = ring_reduce_scatter(b, all, data, 1);
      if (s.collective == Collective::allreduce) (void)ring_all_gather(b, all, reduced, 1, n);
    } else {
      hierarchical_all_reduce(b, n, s.ranks_per_node, s.rail_window, data, j, phase_last_into);
      continue;
    }
    b.bound_pieces(first_task, j, n, last_into, s.algorithm == Algorithm::ring ? s.ring_window : kPiecesInFlight);
  }
  return b.take();
}

TaskGraph collective_node_graph(const CollectiveSpec& s) {
  check_spec(s);
  TaskGraph tg;
  tg.num_devices = s.ranks;
  tg.collectives.push_back(s);
  Task t;
  t.kind = TaskKind::collective;
  t.device = t.dst_device = DeviceId(0);
  t.node = NodeId(0);
  t.block = 0;
  t.bytes = s.bytes;
  tg.tasks.push_back(std::move(t));
  return tg;
}

namespace {

// NCCL's Simple protocol moves 512 KiB per step of a connection (4 MiB buffer / 8 steps,
// NCCL src/include/device.h NCCL_STEPS and its default buffer size): pieces of at least
// that per chunk, at most 32 of them so that the task graph stays small.
constexpr std::int64_t kSliceBytes = 512 * 1024;
constexpr int kMaxSlices = 32;

// The dimension a region is cut along into pieces: its largest (the first of equals).
int piece_dim(const Rect& r) {
  int d = 0;
  for (int k = 1; k < r.rank; ++k)
    if (r.size[k] > r.size[d]) d = k;
  return d;
}

// Piece j of `pieces` of region r along piece_dim(r).
Rect piece_of(const Rect& r, int j, int pieces) {
  Rect p = r;
  if (r.rank == 0) return p;
  const int d = piece_dim(r);
  const std::int64_t a = split_point(j, r.size[d], pieces), z = split_point(j + 1, r.size[d], pieces);
  p.offset[d] = r.offset[d] + a;
  p.size[d] = z - a;
  return p;
}

// How many pieces a lowered ring cuts its regions into: at least 512 KiB each (the largest
// region's bytes over kSliceBytes), at most kMaxSlices, and no more than the thinnest region
// has rows along its piece dimension.
int lowered_pieces(const CollectiveSpec& s) {
  std::int64_t largest = 0, thinnest = std::numeric_limits<std::int64_t>::max();
  for (const Rect& reg : s.regions) {
    largest = std::max(largest, reg.elements() * dtype_bytes(s.dtype));
    thinnest = std::min(thinnest, reg.rank == 0 ? std::int64_t{1} : reg.size[piece_dim(reg)]);
  }
  return static_cast<int>(std::clamp<std::int64_t>(std::min<std::int64_t>(largest / kSliceBytes, thinnest), 1, kMaxSlices));
}

// A lowered reduce-scatter (or all-reduce) as NCCL's pipelined ring: rank r's region
// travels the ring from rank r + 1 around to r, each rank adding its own part (two
// accumulating touches into a fresh buffer; the last step adds straight into rank r's
// output). Pieces as the expanded collectives: at least 512 KiB, at most 32, at most
// kPiecesInFlight in flight per rank.
void lowered_ring(const Task& t, const CollectiveSpec& s, CollectiveRewriter& r) {
  const int m = s.ranks;
  auto mod = [m](int v) { return ((v % m) + m) % m; };
  const int pieces = lowered_pieces(s);
  auto whole_of = [](const Rect& reg) { return Rect::whole(reg.shape()); };
  std::vector<std::vector<TaskId>> last_into;  // per piece, per rank: its last incoming move
  for (int j = 0; j < pieces; ++j) {
    std::vector<TaskId> first_from(static_cast<std::size_t>(m)), into(static_cast<std::size_t>(m));
    // partial[i][o]: rank i's partial sum of owner o's piece (buffer, region in it).
    std::vector<std::vector<std::pair<BufferId, Rect>>> partial(static_cast<std::size_t>(m),
                                                               std::vector<std::pair<BufferId, Rect>>(static_cast<std::size_t>(m)));
    for (int i = 0; i < m; ++i)
      for (int o = 0; o < m; ++o)
        partial[static_cast<std::size_t>(i)][static_cast<std::size_t>(o)] = {
            t.reads[static_cast<std::size_t>(i)], piece_of(s.regions[static_cast<std::size_t>(o)], j, pieces)};
    for (int k = 0; k + 1 < m; ++k)
      for (int i = 0; i < m; ++i) {
        const int o = mod(i - k - 1), to = mod(i + 1);
        const auto ui = static_cast<std::size_t>(i), uo = static_cast<std::size_t>(o), uto = static_cast<std::size_t>(to);
        const auto& [buf, reg] = partial[ui][uo];
        const BufferId received = r.move(buf, reg, s.devices[uto]);
        const TaskId sent = r.last();
        if (!first_from[ui].valid()) first_from[ui] = sent;
        into[uto] = sent;
        const Rect own = piece_of(s.regions[uo], j, pieces);
        if (k + 2 == m) {  // the last step: into the owner's output
          const Rect at = relative_to(own, s.regions[uo]);
          r.touch(received, whole_of(own), s.outputs[uo], at, TouchOp::accumulate);
          r.touch(t.reads[uto], own, s.outputs[uo], at, TouchOp::accumulate);
        } else {
          const BufferId sum = r.buffer(s.devices[uto], own.shape(), s.agg);
          r.touch(received, whole_of(own), sum, whole_of(own), TouchOp::accumulate);
          r.touch(t.reads[uto], own, sum, whole_of(own), TouchOp::accumulate);
          partial[uto][uo] = {sum, whole_of(own)};
        }
      }
    if (j >= kPiecesInFlight) {
      const auto& before = last_into[static_cast<std::size_t>(j - kPiecesInFlight)];
      for (int i = 0; i < m; ++i) {
        const auto ui = static_cast<std::size_t>(i);
        if (before[ui].valid() && first_from[ui].valid()) r.order(before[ui], first_from[ui]);
      }
    }
    last_into.push_back(std::move(into));
  }
}

// A lowered all-gather as NCCL's ring: each rank copies its own block into its output,
// then in step k = 0..n−2 rank i sends block i − k (its own at k = 0, the one it received
// in step k − 1 after) to rank i + 1, which copies it into its output. Pieces as
// lowered_ring; the pieces are not windowed (as the generated ring all-gather).
void lowered_ring_all_gather(const Task& t, const CollectiveSpec& s, CollectiveRewriter& r) {
  const int m = s.ranks;
  auto mod = [m](int v) { return ((v % m) + m) % m; };
  const int pieces = lowered_pieces(s);
  for (int i = 0; i < m; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    const Rect whole = Rect::whole(s.regions[ui].shape());
    r.touch(t.reads[ui], whole, s.outputs[ui], s.regions[ui], TouchOp::copy);
  }
  for (int j = 0; j < pieces; ++j) {
    // held[i]: rank i's copy of the block it forwards next (buffer, region in it).
    std::vector<std::pair<BufferId, Rect>> held(static_cast<std::size_t>(m));
    for (int i = 0; i < m; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      held[ui] = {t.reads[ui], relative_to(piece_of(s.regions[ui], j, pieces), s.regions[ui])};
    }
    for (int k = 0; k + 1 < m; ++k) {
      std::vector<std::pair<BufferId, Rect>> next(static_cast<std::size_t>(m));
      for (int i = 0; i < m; ++i) {
        const int o = mod(i - k), to = mod(i + 1);
        const auto ui = static_cast<std::size_t>(i), uo = static_cast<std::size_t>(o), uto = static_cast<std::size_t>(to);
        const Rect piece = piece_of(s.regions[uo], j, pieces);  // in the output's coordinates
        const BufferId received = r.move(held[ui].first, held[ui].second, s.devices[uto]);
        const Rect whole = Rect::whole(piece.shape());
        r.touch(received, whole, s.outputs[uto], piece, TouchOp::copy);
        next[uto] = {received, whole};
      }
      held = std::move(next);
    }
  }
}

void lowered_collective(const Task& t, const CollectiveSpec& s, CollectiveRewriter& r) {
  if (s.collective == Collective::allgather) lowered_ring_all_gather(t, s, r);
  else lowered_ring(t, s, r);
}

}  // namespace

TaskGraph expand_collectives(const TaskGraph& tg) {
  if (!tg.has_collectives()) return tg;
  if (has_lowered_collectives(tg)) return replace_collectives(tg, lowered_collective);
  if (tg.tasks.size() != 1 || tg.collectives.size() != 1 || tg.tasks[0].kind != TaskKind::collective ||
      tg.tasks[0].block != 0)
    fail("task graph: a collective node must be the graph's only task (collective nodes beside other tasks are not "
         "supported yet)");
  TaskGraph out = collective_task_graph(tg.collectives[0]);
  out.num_devices = std::max(out.num_devices, tg.num_devices);
  return out;
}

namespace {

// Route figures between two devices of m.
struct Hop {
  double latency_s = 0;
  double bytes_per_s = std::numeric_limits<double>::infinity();
};
// The route a → b's latency and slowest link; each link's `load` grows by `bytes` (none
// given: not counted).
Hop hop(const Machine& m, int a, int b, std::vector<LinkId>& route, std::vector<double>* load = nullptr,
        double bytes = 0) {
  Hop h;
  m.route(DeviceId(a), DeviceId(b), route);
  for (LinkId l : route) {
    h.latency_s += m.link(l).latency_s;
    h.bytes_per_s = std::min(h.bytes_per_s, m.link(l).bytes_per_s);
    if (load) (*load)[l.index()] += bytes;
  }
  return h;
}

// The fewest pieces in flight along rings r → r + stride (mod n) whose piece chunks are c
// bytes per step (sim/collectives.h): at least kPiecesInFlight, with W·c/B ≥ α + c/B on
// every hop (its route's latency α and slowest link B). Stride 1: the ring; g: the rails
// of a hierarchical all-reduce.
int fewest_pieces_in_flight(const Machine& m, int n, int stride, double chunk_bytes) {
  std::vector<LinkId> route;
  double w = kPiecesInFlight;
  for (int r = 0; r < n && chunk_bytes > 0; ++r) {
    const Hop h = hop(m, r, (r + stride) % n, route);
    if (std::isfinite(h.bytes_per_s)) w = std::max(w, std::ceil(1 + h.latency_s * h.bytes_per_s / chunk_bytes));
  }
  return static_cast<int>(std::min(w, 1e9));
}

// NCCL src/graph/tuning.cc, base latency of the Simple protocol (Ring LL/LL128/Simple
// 6.6/14.0/8.4 µs). Only the ring's row is taken; tree and hierarchical use the same. The per-hop latencies (NVLink 3.4, PCIe 5.7, network 14 µs,
// the same table) are already the machine presets' link latencies, read from the routes.
constexpr double kNcclBaseLatencySimple_s = 8.4e-6;

// Pieces of at least kSliceBytes per chunk, at most kMaxSlices.
int default_slices(std::int64_t chunk_bytes) {
  return static_cast<int>(std::clamp<std::int64_t>(chunk_bytes / kSliceBytes, 1, kMaxSlices));
}

}  // namespace

CollectivePlan plan_collective(Collective c, int n, std::int64_t bytes, DType dtype, const Machine& m,
                               std::optional<Algorithm> forced) {
  if (n < 1 || n > m.num_devices())
    fail("collective ", to_string(c), ": ", n, " ranks do not fit machine '", m.name, "' (", m.num_devices(),
         " devices)");
  const double S = static_cast<double>(bytes);
  const double nn = n;
  std::vector<AlgorithmEstimate> est;
  auto add = [&](Algorithm a, double latency_s, double bytes_time_s) {
    AlgorithmEstimate e;
    e.algorithm = a;
    e.latency_s = latency_s;
    e.time_s = latency_s + bytes_time_s;
    e.algbw_bytes_per_s = bytes_time_s > 0 ? S / bytes_time_s : std::numeric_limits<double>::infinity();
    est.push_back(e);
  };
  // Bytes per link: every transfer's bytes on every link of its route; the busiest link's
  // time decides the bandwidth term (links that several transfers share count them all).
  std::vector<double> load(m.links.size(), 0);
  std::vector<LinkId> route;  // reused: n² routes without an allocation each
  auto carry = [&](int a, int b, double bytes) { return hop(m, a, b, route, &load, bytes); };
  auto busiest_s = [&] {
    double t = 0;
    for (std::size_t l = 0; l < load.size(); ++l) t = std::max(t, load[l] / m.links[l].bytes_per_s);
    std::fill(load.begin(), load.end(), 0.0);
    return t;
  };
  if (c == Collective::alltoall) {
    // Pairwise: the latency of the n − 1 steps.
    double alpha = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j) alpha = std::max(alpha, carry(i, j, S / nn).latency_s);
    add(Algorithm::pairwise, kNcclBaseLatencySimple_s + (nn - 1) * alpha, busiest_s());
  } else {
    // Ring 0 → 1 → … → n−1 → 0: every hop carries steps/n·S; its longest hop's latency per
    // step.
    const double steps = c == Collective::allreduce ? 2 * (nn - 1) : nn - 1;
    Hop worst{0, std::numeric_limits<double>::infinity()};
    for (int i = 0; i < n && n > 1; ++i) {
      const Hop h = carry(i, (i + 1) % n, steps / nn * S);
      worst.latency_s = std::max(worst.latency_s, h.latency_s);
      worst.bytes_per_s = std::min(worst.bytes_per_s, h.bytes_per_s);
    }
    add(Algorithm::ring, kNcclBaseLatencySimple_s + steps * worst.latency_s, busiest_s());
    if (c == Collective::allreduce && n > 2) {
      // Double binary tree: 2·depth hops; a rank inner in one tree sends its half up once
      // and down twice, and its other half up once as a leaf of the other: 2S per rank.
      int depth = 0;
      while ((2 << depth) - 1 < n) ++depth;
      add(Algorithm::tree, kNcclBaseLatencySimple_s + 2 * depth * worst.latency_s, 2 * S / worst.bytes_per_s);
    }
    const int g = c == Collective::allreduce ? devices_per_host(m, n) : 0;
    if (g > 0) {
      // Hierarchical: every node's ring carries reduce-scatter and all-gather, 2(g−1)/g·S
      // per hop; every rail's ring 2(N−1)/N·S/g; pipelined, the busiest link decides. The
      // longest intra-node and rail hops' latencies per step.
      const double gg = g, nodes_d = n / g;
      double intra_latency_s = 0, rail_latency_s = 0;
      for (int r = 0; r < n; ++r) {
        if (g > 1)
          intra_latency_s =
              std::max(intra_latency_s, carry(r, r - r % g + (r % g + 1) % g, 2 * (gg - 1) / gg * S).latency_s);
        rail_latency_s = std::max(rail_latency_s, carry(r, (r + g) % n, 2 * (nodes_d - 1) / nodes_d * S / gg).latency_s);
      }
      add(Algorithm::hierarchical,
          kNcclBaseLatencySimple_s + 2 * (gg - 1) * intra_latency_s + 2 * (nodes_d - 1) * rail_latency_s,
          busiest_s());
    }
  }
  std::stable_sort(est.begin(), est.end(), [](const auto& a, const auto& b) { return a.time_s < b.time_s; });

  CollectivePlan plan;
  plan.estimates = est;
  CollectiveSpec& s = plan.spec;
  s.collective = c;
  s.ranks = n;
  s.bytes = bytes;
  s.dtype = dtype;
  s.ranks_per_node = c == Collective::allreduce || c == Collective::alltoall ? devices_per_host(m, n) : 0;
  if (forced) {
    const bool fits = std::any_of(est.begin(), est.end(), [&](const auto& e) { return e.algorithm == *forced; });
    if (!fits) {
      std::string list;
      for (const auto& e : est) list += (list.empty() ? "" : ", ") + std::string(to_string(e.algorithm));
      fail("--algorithm: '", to_string(*forced), "' does not fit ", to_string(c), " on ", n, " ranks of machine '",
           m.name, "'", *forced == Algorithm::hierarchical ? " (it needs ranks on two or more nodes of equal size)" : "",
           " (expected ", list, ")");
    }
    s.algorithm = *forced;
  } else {
    s.algorithm = est.front().algorithm;
  }
  // Pieces: a ring's chunk is S/n per rank (S/(n·g) along a rail), a tree's S/2.
  std::int64_t chunk = bytes / std::max(n, 1);
  if (s.algorithm == Algorithm::tree) chunk = bytes / 2;
  if (s.algorithm == Algorithm::hierarchical) chunk = bytes / std::max(s.ranks_per_node, 1);
  if (s.algorithm != Algorithm::pairwise) s.slices = default_slices(chunk);
  const std::int64_t elements = bytes / dtype_bytes(dtype);
  while (s.slices > 1 && elements < static_cast<std::int64_t>(2) * n * s.slices) --s.slices;
  // A window of every piece (or of kPiecesInFlight, where fewer) lets none wait. A ring's
  // and a rail's step moves S/(n·P) bytes of each piece.
  const double step_bytes = static_cast<double>(bytes) / (nn * s.slices);
  const int every = std::max(kPiecesInFlight, s.slices);
  if (int* w = pieces_in_flight(s); w && n > 1)
    *w = std::min(fewest_pieces_in_flight(m, n, s.algorithm == Algorithm::hierarchical ? s.ranks_per_node : 1, step_bytes),
                  every);
  return plan;
}

int* pieces_in_flight(CollectiveSpec& s) {
  if (s.algorithm == Algorithm::hierarchical) return &s.rail_window;
  if (s.algorithm == Algorithm::ring && s.collective != Collective::allgather) return &s.ring_window;
  return nullptr;
}
const int* pieces_in_flight(const CollectiveSpec& s) { return pieces_in_flight(const_cast<CollectiveSpec&>(s)); }

std::optional<PublishedBusbw> published_busbw(Collective c, int n, const Machine& m) {
  // nccl-tests all-reduce busbw for large messages from third-party reference pages (8 × H100 SXM5 above the 450 GB/s NVLink
  // figure because NVLS reduces inside the NVSwitch, which tessel does not model).
  constexpr std::string_view kSource =
      "third-party nccl-tests reference pages for DGX H100 / DGX A100, large messages";
  if (c != Collective::allreduce || n != 8) return std::nullopt;
  if (m.name == "h100-sxm-8") return PublishedBusbw{460, 480, "DGX H100 (8 x H100 SXM5, NVSwitch)", kSource};
  if (m.name == "a100-sxm-8") return PublishedBusbw{230, 250, "DGX A100 (8 x A100 SXM4, NVSwitch)", kSource};
  return std::nullopt;
}

}  // namespace tessel::sim
