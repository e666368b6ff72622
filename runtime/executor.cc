#include "runtime/executor.h"

#include <cassert>
#include <chrono>
#include <optional>
#include <thread>

#include "core/collective_rewrite.h"
#include "core/error.h"
#include "runtime/kernels.h"

namespace tessel::runtime {

void refuse_backward_bsp_dependencies(const Graph& g, const TaskGraph& tg, std::string_view who) {
  const std::optional<BackwardBspDependency> b = first_backward_bsp_dependency(tg);
  if (!b) return;
  const Task& t = tg.task(b->task);
  fail(who, ": bsp cannot run this task graph: task ", b->task.value, " (", to_string(t.kind), " of node '",
       g.node(t.node).name, "', phase ", bsp_phase(t), ") depends on task ", b->dependency.value,
       " of a later phase (", bsp_phase(tg.task(b->dependency)), "); a memory-capped graph runs under async");
}

void check_inputs(const Graph& g, const TensorMap& inputs) {
  for (NodeId id : g.inputs()) {
    const Node& n = g.node(id);
    auto it = inputs.find(n.name);
    if (it == inputs.end()) fail("input '", n.name, "' is missing (shape ", to_string(n.shape), ")");
    if (it->second.shape != n.shape)
      fail("input '", n.name, "' has shape ", to_string(it->second.shape), " but the graph needs ", to_string(n.shape));
    if (static_cast<std::int64_t>(it->second.data.size()) != elements(n.shape))
      fail("input '", n.name, "' holds ", it->second.data.size(), " values for shape ", to_string(n.shape));
  }
  for (const auto& [name, t] : inputs) {
    auto id = g.find(name);
    if (!id || g.node(*id).kind != NodeKind::input) fail("input '", name, "' is not an input of the graph");
  }
}

TensorMap random_inputs(const Graph& g, std::uint64_t seed) {
  TensorMap out;
  for (NodeId id : g.inputs()) {
    const Node& n = g.node(id);
    out.emplace(n.name, random_tensor(n.shape, n.dtype, seed * 1000003ULL + static_cast<std::uint64_t>(id.value)));
  }
  return out;
}

TensorMap evaluate_reference(const Graph& g, const TensorMap& inputs, bool storage_rounding) {
  check_inputs(g, inputs);
  // Large einsums on every core: the same result as one thread, bit for bit (einsum_kernel).
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<Tensor> values(g.size());
  TensorMap outputs;
  for (NodeId id : g.ids()) {
    const Node& n = g.node(id);
    switch (n.kind) {
      case NodeKind::input:
        values[id.index()] = inputs.at(n.name);
        values[id.index()].dtype = n.dtype;
        values[id.index()].round_to_dtype();
        if (storage_rounding) values[id.index()].round_to_storage();
        break;
      case NodeKind::fill:
        values[id.index()] = fill_kernel(n.fill, Rect::whole(n.shape), n.dtype);
        if (storage_rounding) values[id.index()].round_to_storage();
        break;
      case NodeKind::einsum: {
        std::vector<const Tensor*> ops;
        for (NodeId in : n.inputs) ops.push_back(&values[in.index()]);
        values[id.index()] = einsum_kernel(n.einsum, ops, threads);
        if (storage_rounding) values[id.index()].round_to_storage();
        break;
      }
      case NodeKind::select: {
        Tensor t(n.shape, n.dtype);
        for (const SelectPiece& p : n.pieces) {
          Rect src, dst;
          src.rank = dst.rank = static_cast<int>(n.shape.size());
          for (int d = 0; d < src.rank; ++d) {
            src.offset[d] = p.src_offset[d];
            dst.offset[d] = p.dst_offset[d];
            src.size[d] = dst.size[d] = p.size[d];
          }
          copy_region(values[n.inputs[p.input].index()], src, t, dst);
        }
        values[id.index()] = std::move(t);
        break;
      }
      case NodeKind::output:
        values[id.index()] = values[n.inputs[0].index()];
        outputs[n.name] = values[id.index()];
        break;
    }
  }
  return outputs;
}

RunResult BlockExecutor::run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) {
  check_inputs(g, inputs);
  // Collective nodes span devices; this executor checks every task stays on its own.
  if (has_lowered_collectives(tg)) return run(g, collectives_as_moves(tg), inputs);
  using clock = std::chrono::steady_clock;
  RunResult result;
  result.timeline.source = "block";
  std::vector<std::optional<Tensor>> buffers(tg.buffers.size());
  std::vector<Tensor> written;  // per output node: times each element was written
  std::map<std::int32_t, std::size_t> output_slot;
  for (NodeId id : g.outputs()) {
    const Node& n = g.node(id);
    output_slot[id.value] = written.size();
    written.emplace_back(n.shape, DType::f64, 0.0);
    result.outputs.emplace(n.name, Tensor(n.shape, n.dtype));
  }
  auto buffer_on = [&](BufferId b, DeviceId dev, const Task& t) -> Tensor& {
    const Buffer& info = tg.buffer(b);
    if (info.device != dev)
      fail("block executor: task of kind ", to_string(t.kind), " on device ", dev.value, " touches buffer ", b.value,
           " on device ", info.device.value, " (lowering bug)");
    auto& slot = buffers[b.index()];
    if (!slot) {
      slot.emplace(info.shape, info.dtype, info.init == Agg::none ? 0.0 : agg_identity(info.init));
    }
    return *slot;
  };
  auto read = [&](BufferId b, DeviceId dev, const Task& t) -> const Tensor& {
    if (!buffers[b.index()]) fail("block executor: task reads buffer ", b.value, " before any task wrote it");
    return buffer_on(b, dev, t);
  };
  const auto t0 = clock::now();
  for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
    const Task& t = tg.tasks[i];
    const auto start = clock::now();
    switch (t.kind) {
      case TaskKind::input: {
        const Node& n = g.node(t.node);
        Tensor& out = buffer_on(t.writes, t.device, t);
        Tensor whole = inputs.at(n.name);
        whole.dtype = n.dtype;
        whole.round_to_dtype();
        copy_region(whole, t.src, out, Rect::whole(out.shape));
        break;
      }
      case TaskKind::compute: {
        const Node& n = g.node(t.node);
        Tensor value;
        if (n.kind == NodeKind::fill) {
          value = fill_kernel(n.fill, t.src, n.dtype);
        } else {
          std::vector<const Tensor*> ops;
          for (BufferId b : t.reads) ops.push_back(&read(b, t.device, t));
          value = einsum_kernel(n.einsum.with_join_shape(t.src.shape()), ops);
        }
        buffer_on(t.writes, t.device, t) = std::move(value);
        break;
      }
      case TaskKind::touch: {
        const Tensor& src = read(t.reads[0], t.device, t);
        Tensor& dst = buffer_on(t.writes, t.device, t);
        copy_region(src, t.src, dst, t.dst, t.op == TouchOp::accumulate ? t.agg : Agg::none);
        break;
      }
      case TaskKind::move: {
        const Tensor& src = read(t.reads[0], t.device, t);
        Tensor moved(t.src.shape(), src.dtype);
        copy_region(src, t.src, moved, Rect::whole(moved.shape));
        buffer_on(t.writes, t.dst_device, t) = std::move(moved);
        break;
      }
      case TaskKind::evict:
      case TaskKind::load: {  // a whole buffer between device and host memory
        const Tensor& src = read(t.reads[0], t.device, t);
        Tensor copy = src;
        buffer_on(t.writes, t.device, t) = std::move(copy);
        break;
      }
      case TaskKind::output: {
        const Tensor& src = read(t.reads[0], t.device, t);
        const Node& n = g.node(t.node);
        Tensor& out = result.outputs.at(n.name);
        copy_region(src, Rect::whole(src.shape), out, t.src);
        Tensor ones(t.src.shape(), DType::f64, 1.0);
        copy_region(ones, Rect::whole(ones.shape), written[output_slot.at(t.node.value)], t.src, Agg::sum);
        break;
      }
      case TaskKind::collective:
        fail("block executor: task ", i, " is a collective node; executors run the expanded form (moves and touches) only");
    }
    const auto end = clock::now();
    result.timeline.spans.push_back(Span{TaskId(static_cast<std::int32_t>(i)), t.device, default_lane(t.kind),
                                         std::chrono::duration<double>(start - t0).count(),
                                         std::chrono::duration<double>(end - t0).count()});
  }
  for (NodeId id : g.outputs()) {
    const Tensor& w = written[output_slot.at(id.value)];
    for (std::size_t k = 0; k < w.data.size(); ++k)
      if (w.data[k] != 1.0)
        fail("block executor: element ", k, " of output '", g.node(id).name, "' was written ", w.data[k],
             " times (expected once)");
  }
  return result;
}

double output_tolerance(DType t) {
  switch (t) {
    case DType::f64: return 1e-9;
    case DType::f32: return 1e-4;
    case DType::f16: return 1e-2;
    case DType::bf16: return 3e-2;
  }
  return 1e-4;
}

double output_tolerance(DType t, std::string_view backend) {
  // The CPU executors compute f16 and bf16 graphs in float: they are held to f32's bound.
  if (backend != "cuda" && (t == DType::f16 || t == DType::bf16)) return output_tolerance(DType::f32);
  return output_tolerance(t);
}

}  // namespace tessel::runtime
