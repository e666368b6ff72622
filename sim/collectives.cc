#include "sim/collectives.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

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

}  // namespace

TaskGraph collective_task_graph(Collective c, int n, std::int64_t bytes, DType dtype) {
  if (n < 1) fail("collective ", to_string(c), ": the number of ranks must be >= 1, got ", n);
  const std::int64_t eb = dtype_bytes(dtype);
  if (bytes <= 0 || bytes % eb != 0)
    fail("collective ", to_string(c), ": bytes = ", bytes, " is not a positive whole number of ", to_string(dtype),
         " elements (", eb, " bytes each)");
  const std::int64_t elements = bytes / eb;
  if (elements < n)
    fail("collective ", to_string(c), ": ", elements, " elements cannot be split into ", n, " chunks (one per rank)");
  // floor(chunk * elements / n) without forming the product, which overflows for large
  // collectives: chunk * (q n + r) / n = chunk q + floor(chunk r / n), with chunk, r < 2^17.
  auto lo = [&](int chunk) {
    return static_cast<std::int64_t>(chunk) * (elements / n) + static_cast<std::int64_t>(chunk) * (elements % n) / n;
  };
  auto len = [&](int chunk) { return lo(chunk + 1) - lo(chunk); };
  auto mod = [n](int v) { return ((v % n) + n) % n; };

  Builder b(n, dtype);
  // have[i][chunk]: the buffer that holds `chunk` at rank i (fully reduced, for all-gather).
  std::vector<std::vector<BufferId>> have(static_cast<std::size_t>(n), std::vector<BufferId>(static_cast<std::size_t>(n)));
  int node = 1;

  if (c == Collective::alltoall) {
    std::vector<BufferId> in;
    for (int i = 0; i < n; ++i) in.push_back(b.input(i, elements));
    for (int k = 1; k < n; ++k, ++node)
      for (int i = 0; i < n; ++i) {
        const int to = mod(i + k);
        (void)b.move(in[static_cast<std::size_t>(i)], lo(to), len(to), to, node);
      }
    return b.take();
  }

  if (c == Collective::allgather) {
    for (int i = 0; i < n; ++i) have[static_cast<std::size_t>(i)][static_cast<std::size_t>(i)] = b.input(i, len(i));
  } else {
    // Reduce-scatter: in step k rank i sends its partial of chunk i − k to rank i + 1,
    // which adds its own copy of that chunk.
    std::vector<BufferId> in;
    for (int i = 0; i < n; ++i) in.push_back(b.input(i, elements));
    std::vector<std::vector<BufferId>> partial = have;
    for (int k = 0; k + 1 < n; ++k, ++node)
      for (int i = 0; i < n; ++i) {
        const int chunk = mod(i - k), to = mod(i + 1);
        const auto ui = static_cast<std::size_t>(i), uc = static_cast<std::size_t>(chunk);
        BufferId received = k == 0 ? b.move(in[ui], lo(chunk), len(chunk), to, node)
                                   : b.move(partial[ui][uc], 0, len(chunk), to, node);
        BufferId sum = b.buffer(to, len(chunk), Agg::sum, node);
        b.accumulate(received, 0, len(chunk), sum, node);
        b.accumulate(in[static_cast<std::size_t>(to)], lo(chunk), len(chunk), sum, node);
        partial[static_cast<std::size_t>(to)][uc] = sum;
      }
    if (c == Collective::reducescatter) return b.take();
    // Rank i now holds the reduced chunk i + 1.
    for (int i = 0; i < n; ++i)
      have[static_cast<std::size_t>(i)][static_cast<std::size_t>(mod(i + 1))] =
          partial[static_cast<std::size_t>(i)][static_cast<std::size_t>(mod(i + 1))];
  }
  // All-gather: in step k rank i forwards the chunk it got in step k − 1 (its own first).
  const int own = c == Collective::allgather ? 0 : 1;
  for (int k = 0; k + 1 < n; ++k, ++node)
    for (int i = 0; i < n; ++i) {
      const int chunk = mod(i + own - k), to = mod(i + 1);
      const auto uc = static_cast<std::size_t>(chunk);
      have[static_cast<std::size_t>(to)][uc] = b.move(have[static_cast<std::size_t>(i)][uc], 0, len(chunk), to, node);
    }
  return b.take();
}

}  // namespace tessel::sim
