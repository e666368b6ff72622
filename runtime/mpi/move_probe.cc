#include "runtime/mpi/move_probe.h"

#include <algorithm>

#include "core/error.h"
#include "core/graph.h"
#include "core/stats.h"
#include "core/task_graph.h"
#include "runtime/mpi/mpi_executor.h"
#include "runtime/mpi/mpi_session.h"

namespace tessel::runtime::mpi {
namespace {

// x (elements floats) on device 0, moved to device `to`, output there as y.
struct OneMove {
  Graph g;
  TaskGraph tg;
  TensorMap inputs;
};

OneMove one_move(int devices, int to, std::int64_t elements) {
  OneMove m;
  GraphBuilder b(DType::f32);
  const NodeId x = b.input("x", {elements});
  const NodeId y = b.output(x, "y");
  m.g = b.build();
  const Shape shape{elements};
  const std::int64_t bytes = elements * 4;
  m.tg.num_devices = devices;
  m.tg.buffers.push_back(Buffer{DeviceId(0), shape, DType::f32, Agg::none, x});
  m.tg.buffers.push_back(Buffer{DeviceId(to), shape, DType::f32, Agg::none, x});
  Task in;
  in.kind = TaskKind::input;
  in.device = in.dst_device = DeviceId(0);
  in.node = x;
  in.block = 0;
  in.writes = BufferId(0);
  in.src = Rect::whole(shape);
  in.bytes = bytes;
  Task mv;
  mv.kind = TaskKind::move;
  mv.device = DeviceId(0);
  mv.dst_device = DeviceId(to);
  mv.node = x;
  mv.reads = {BufferId(0)};
  mv.writes = BufferId(1);
  mv.src = Rect::whole(shape);
  mv.bytes = bytes;
  mv.deps = {TaskId(0)};
  Task out;
  out.kind = TaskKind::output;
  out.device = out.dst_device = DeviceId(to);
  out.node = y;
  out.block = 0;
  out.reads = {BufferId(1)};
  out.src = Rect::whole(shape);
  out.bytes = bytes;
  out.deps = {TaskId(1)};
  m.tg.tasks = {in, mv, out};
  m.inputs.emplace("x", Tensor(shape, DType::f32, 1.0));
  return m;
}

}  // namespace

MoveFigures measure_moves(int devices, std::int64_t small_bytes, std::int64_t large_bytes, int rounds) {
  const int me = rank(), n = size();
  if (small_bytes < 4 || large_bytes <= small_bytes) fail("mpi move probe: sizes ", small_bytes, " and ", large_bytes, " bytes");
  MoveFigures f;
  f.small_bytes = small_bytes / 4 * 4;
  f.large_bytes = large_bytes / 4 * 4;
  const auto ranks = static_cast<std::size_t>(n);
  f.small_span_s.assign(ranks, 0.0);
  f.large_span_s.assign(ranks, 0.0);
  f.latency_by_rank_s.assign(ranks, 0.0);
  f.bytes_per_s_by_rank.assign(ranks, 0.0);
  MpiExecutor exec(Policy::async);
  for (int r = 1; r < n; ++r) {
    const int to = MpiExecutor::devices_of(r, n, devices).first;
    auto median_span = [&](std::int64_t bytes) {
      const OneMove m = one_move(devices, to, bytes / 4);
      std::vector<double> spans;
      for (int k = 0; k < rounds + 1; ++k) {  // the first is a warm-up
        const RunResult res = exec.run(m.g, m.tg, m.inputs);
        if (me != 0 || k == 0) continue;
        for (const Span& s : res.timeline.spans)
          if (s.task == TaskId(1)) spans.push_back(s.end_s - s.start_s);
      }
      return me == 0 && !spans.empty() ? stats::median(spans) : 0.0;
    };
    const double small = median_span(f.small_bytes), large = median_span(f.large_bytes);
    if (me != 0) continue;
    const auto i = static_cast<std::size_t>(r);
    f.small_span_s[i] = small;
    f.large_span_s[i] = large;
    const double rate = large > small ? static_cast<double>(f.large_bytes - f.small_bytes) / (large - small)
                                      : static_cast<double>(f.large_bytes) / std::max(large, 1e-9);
    f.bytes_per_s_by_rank[i] = rate;
    f.latency_by_rank_s[i] = std::max(0.0, small - static_cast<double>(f.small_bytes) / rate);
  }
  if (me == 0 && n > 1) {
    f.latency_s = stats::median(std::vector<double>(f.latency_by_rank_s.begin() + 1, f.latency_by_rank_s.end()));
    f.bytes_per_s = stats::median(std::vector<double>(f.bytes_per_s_by_rank.begin() + 1, f.bytes_per_s_by_rank.end()));
  }
  return f;
}

}  // namespace tessel::runtime::mpi
