#include "runtime/profile.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/error.h"
#include "runtime/cpu_kernels.h"
#include "runtime/measure.h"

namespace tessel::runtime {

struct KernelProfiler::State {
  struct Kernel {
    NodeId node;
    Rect block;  // the first task's block; its shape is the key, its offset only matters to fills
    std::vector<double> samples;       // hot, per round
    std::vector<double> cold_samples;  // cold, per round
  };
  const Graph& g;
  KernelProfileOptions o;
  bool f64 = false;
  std::vector<Kernel> kernels;
  std::vector<std::int32_t> kernel_of;  // per task: index into kernels, or -1
  int rounds = 0;

  State(const Graph& graph, const TaskGraph& tg, const KernelProfileOptions& opts)
      : g(graph), o(opts), kernel_of(tg.tasks.size(), -1) {
    if (o.devices < 1) fail("kernel profile: device count ", o.devices, " must be >= 1");
    if (!(o.seconds_per_kernel > 0)) fail("kernel profile: seconds per kernel must be > 0");
    if (o.evict_bytes < 0) fail("kernel profile: evict bytes must be >= 0");
    if (o.evict_bytes == 0) o.evict_bytes = 2 * per_core_cache_bytes();
    for (const Node& n : g.nodes()) f64 = f64 || n.dtype == DType::f64;  // as CpuExecutor::run decides
    std::map<std::pair<std::int32_t, Shape>, std::int32_t> index;
    for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
      const Task& t = tg.tasks[i];
      if (t.kind != TaskKind::compute) continue;
      if (!t.node.valid() || t.node.index() >= g.size()) fail("kernel profile: task ", i, " has no node of the graph");
      auto [it, fresh] = index.try_emplace({t.node.value, t.src.shape()}, static_cast<std::int32_t>(kernels.size()));
      if (fresh) kernels.push_back({t.node, t.src, {}, {}});
      kernel_of[i] = it->second;
    }
  }


  // Hot and cold seconds per call of kernel k.
  template <class T>
  std::pair<double, double> measure(const Kernel& k) const {
    const Node& n = g.node(k.node);
    const int workers = o.devices;
    struct Worker {
      std::vector<std::vector<T>> in;
      std::vector<const T*> operands;
      std::vector<T> out;
      cpu::Scratch<T> scratch;
    };
    std::vector<Worker> ws(static_cast<std::size_t>(workers));
    const Shape shape = k.block.shape();
    auto setup = [&](int w) {
      Worker& x = ws[static_cast<std::size_t>(w)];
      if (n.kind == NodeKind::fill) {
        x.out.assign(static_cast<std::size_t>(elements(shape)), T(0));
        return;
      }
      const Einsum block = n.einsum.with_join_shape(shape);
      // Operands in [0.5, 1.5): no exp overflows, no division by zero, no log of <= 0.
      for (std::size_t i = 0; i < block.inputs.size(); ++i) {
        std::vector<T>& v = x.in.emplace_back(static_cast<std::size_t>(elements(block.input_shape(static_cast<int>(i)))));
        for (std::size_t e = 0; e < v.size(); ++e) v[e] = static_cast<T>(0.5 + static_cast<double>((e * 7 + i) % 97) / 97.0);
        x.operands.push_back(v.data());
      }
      x.out.assign(static_cast<std::size_t>(elements(block.out_shape())), T(0));
    };
    // What the executor's worker does per compute task, minus its scheduling.
    auto body = [&](int w) {
      Worker& x = ws[static_cast<std::size_t>(w)];
      if (n.kind == NodeKind::fill) {
        cpu::fill_block<T>(n.fill, k.block, x.out.data());
        return;
      }
      const Einsum block = n.einsum.with_join_shape(shape);
      cpu::einsum_block<T>(block, x.operands, x.out.data(), x.scratch);
    };
    const double hot = per_call_seconds(workers, o.seconds_per_kernel, setup, body);
    if (!o.cold) return {hot, hot};
    // Between cold calls each worker writes memory of its own: the kernel's operands,
    // output and scratch leave the per-core cache for the shared one, as other tasks'
    // data pushes them out in a graph.
    std::vector<std::vector<float>> evict(static_cast<std::size_t>(workers));
    auto cold_setup = [&](int w) {
      setup(w);
      evict[static_cast<std::size_t>(w)].assign(static_cast<std::size_t>(o.evict_bytes / 4), 0.f);
    };
    auto before = [&](int w) {
      std::vector<float>& e = evict[static_cast<std::size_t>(w)];
      const float v = e[0] + 1.f;
      std::fill(e.begin(), e.end(), v);
    };
    const double cold = per_call_seconds_after(workers, o.seconds_per_kernel / 2, hot, cold_setup, before, body);
    return {hot, cold};
  }

  void round() {
    for (Kernel& k : kernels) {
      auto [hot, cold] = f64 ? measure<double>(k) : measure<float>(k);
      k.samples.push_back(hot);
      k.cold_samples.push_back(cold);
    }
    ++rounds;
  }

  std::vector<double> per_task(int round, bool cold) const {
    if (round < 0 || round >= rounds) fail("kernel profile: round ", round, " of ", rounds, " measured");
    std::vector<double> out(kernel_of.size(), -1.0);
    for (std::size_t i = 0; i < out.size(); ++i)
      if (kernel_of[i] >= 0) {
        const Kernel& k = kernels[static_cast<std::size_t>(kernel_of[i])];
        const auto r = static_cast<std::size_t>(round);
        // A cold call counts as never faster than a hot one (timing noise can say otherwise).
        out[i] = cold ? std::max(k.samples[r], k.cold_samples[r]) : k.samples[r];
      }
    return out;
  }
};

KernelProfiler::KernelProfiler(const Graph& g, const TaskGraph& tg, const KernelProfileOptions& options)
    : state_(std::make_unique<State>(g, tg, options)) {}
KernelProfiler::~KernelProfiler() = default;

void KernelProfiler::round() { state_->round(); }
int KernelProfiler::rounds() const { return state_->rounds; }
std::size_t KernelProfiler::kernels() const { return state_->kernels.size(); }

std::vector<double> KernelProfiler::task_seconds(int round) const { return state_->per_task(round, false); }
std::vector<double> KernelProfiler::task_seconds_cold(int round) const { return state_->per_task(round, true); }

}  // namespace tessel::runtime
