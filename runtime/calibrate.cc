#include "runtime/calibrate.h"

#include <pthread.h>
#include <unistd.h>
#include <sched.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "runtime/cpu_executor.h"
#include "runtime/cpu_kernels.h"

namespace tessel::runtime {
namespace {

using Clock = std::chrono::steady_clock;

void pin(int worker) {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<unsigned>(worker) % cores, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Runs body(worker) repeatedly on `workers` pinned threads at once, until each has
// spent at least `min_seconds`; returns the median over workers of seconds per call.
double per_call_seconds(int workers, double min_seconds, const std::function<void(int)>& setup,
                        const std::function<void(int)>& body) {
  std::vector<double> per_call(static_cast<std::size_t>(workers));
  std::barrier sync(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      pin(w);
      setup(w);
      sync.arrive_and_wait();  // bodies may touch other workers' memory
      body(w);                 // warm-up
      sync.arrive_and_wait();
      auto t0 = Clock::now();
      long calls = 0;
      double elapsed = 0;
      do {
        body(w);
        ++calls;
        elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      } while (elapsed < min_seconds);
      per_call[static_cast<std::size_t>(w)] = elapsed / static_cast<double>(calls);
      sync.arrive_and_wait();  // keep every worker busy until all have measured
    });
  for (auto& t : threads) t.join();
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace

Calibration calibrate_cpu(const CalibrationOptions& o) {
  if (o.devices < 1) fail("calibrate: device count ", o.devices, " must be >= 1");
  Calibration c;
  c.devices = o.devices;
  const int n = o.devices;

  // GEMMs through the executor's own kernel (float, Eigen, one thread per worker).
  for (int size : {8, 16, 32, 64, 128, 256, 512}) {
    Einsum e = Einsum::from_subscripts("ij,jk->ik", {{size, size}, {size, size}});
    std::vector<std::vector<float>> a(n), b(n), out(n);
    std::vector<cpu::Scratch<float>> scratch(n);
    double s = per_call_seconds(
        n, o.seconds_per_point,
        [&](int w) {
          a[w].assign(static_cast<std::size_t>(size) * size, 0.5f);
          b[w].assign(static_cast<std::size_t>(size) * size, 0.25f);
          out[w].assign(static_cast<std::size_t>(size) * size, 0.f);
        },
        [&](int w) { cpu::einsum_block<float>(e, {a[w].data(), b[w].data()}, out[w].data(), scratch[w]); });
    double flops = e.flops();
    c.gemm.push_back({size, flops, flops / s});
    c.peak_flops_per_s = std::max(c.peak_flops_per_s, flops / s);
  }

  // Generic kernels: arithmetic elementwise and reduction shapes (generic rate), then
  // the same with transcendental functions (their extra cost).
  {
    const std::int64_t rows = 256, cols = 1024;
    auto measure = [&](const std::vector<Einsum>& kernels, double* flops, double* transcendental) {
      double seconds = 0;
      *flops = *transcendental = 0;
      for (const Einsum& e : kernels) {
        std::vector<std::vector<float>> x(n), y(n), out(n);
        std::vector<cpu::Scratch<float>> scratch(n);
        seconds += per_call_seconds(
            n, o.seconds_per_point,
            [&](int w) {
              x[w].assign(static_cast<std::size_t>(rows * cols), 0.5f);
              y[w].assign(static_cast<std::size_t>(rows * cols), 0.25f);
              out[w].assign(static_cast<std::size_t>(rows * cols), 0.f);
            },
            [&](int w) {
              std::vector<const float*> ops = {x[w].data()};
              if (e.inputs.size() > 1) ops.push_back(y[w].data());
              cpu::einsum_block<float>(e, ops, out[w].data(), scratch[w]);
            });
        *flops += e.flops();
        *transcendental += e.join.transcendentals() * static_cast<double>(e.join_elements());
      }
      return seconds;
    };
    double flops = 0, tr = 0;
    double arith_s = measure(
        {Einsum::from_subscripts("ij,ij->ij", {{rows, cols}, {rows, cols}}, ScalarOp::parse("mul(x0,x1)")),
         Einsum::from_subscripts("ij,i->ij", {{rows, cols}, {rows}}, ScalarOp::parse("sub(x0,x1)")),
         Einsum::from_subscripts("ij->i", {{rows, cols}}, ScalarOp::parse("x0"), Agg::max),
         Einsum::from_subscripts("ij,ij->ij", {{rows, cols}, {rows, cols}}, ScalarOp::parse("add(x0,x1)"))},
        &flops, &tr);
    c.generic_flops_per_s = flops / arith_s;
    double tr_s = measure({Einsum::from_subscripts("ij->ij", {{rows, cols}}, ScalarOp::parse("exp(x0)")),
                           Einsum::from_subscripts("ij,ij->ij", {{rows, cols}, {rows, cols}},
                                                   ScalarOp::parse("mul(silu(x0),x1)"))},
                          &flops, &tr);
    double arith_part = (flops - tr) / c.generic_flops_per_s;
    c.transcendental_flops_per_s = tr / std::max(tr_s - arith_part, tr_s * 0.1);
  }

  // Strided copies inside one worker's memory, as touches do them.
  {
    const std::int64_t rows = 2048, cols = 2048;  // 16 MiB: larger than the caches, as most blocks are
    Shape shape{rows, cols};
    Rect half{2, {0, 0}, {rows, cols / 2}};
    Rect dst{2, {0, cols / 2}, {rows, cols / 2}};
    std::vector<std::vector<float>> buf(n);
    double s = per_call_seconds(
        n, o.seconds_per_point, [&](int w) { buf[w].assign(static_cast<std::size_t>(rows * cols), 1.f); },
        [&](int w) { cpu::copy_region<float>(buf[w].data(), shape, half, buf[w].data(), shape, dst, Agg::none); });
    c.memory_bytes_per_s = 2.0 * static_cast<double>(half.elements()) * 4 / s;
  }

  // The same within the per-core cache: traffic of half its capacity.
  {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    c.cache_capacity_bytes = l2 > 0 ? l2 : (1 << 20);
    const std::int64_t cols = 256, rows = std::max<std::int64_t>(2, c.cache_capacity_bytes / 4 / 2 / cols / 2 * 2);
    Shape shape{rows, cols};
    Rect half{2, {0, 0}, {rows / 2, cols}};
    Rect dst{2, {rows / 2, 0}, {rows / 2, cols}};
    std::vector<std::vector<float>> buf(n);
    double s = per_call_seconds(
        n, o.seconds_per_point, [&](int w) { buf[w].assign(static_cast<std::size_t>(rows * cols), 1.f); },
        [&](int w) { cpu::copy_region<float>(buf[w].data(), shape, half, buf[w].data(), shape, dst, Agg::none); });
    c.cache_bytes_per_s = 2.0 * static_cast<double>(half.elements()) * 4 / s;
  }

  // Copies between device memories: one alone, then all workers at once.
  {
    const std::size_t count = 8u << 20;  // 32 MiB of floats: past the caches
    std::vector<std::vector<float>> src(n), dst(n);
    auto setup = [&](int w) {
      src[w].assign(count, 1.f);
      dst[w].assign(count, 0.f);
    };
    auto body = [&](int w) {
      std::vector<float>& to = dst[(w + 1) % n];  // into the next worker's memory
      std::copy(src[w].begin(), src[w].end(), to.begin());
    };
    // The copy of worker w writes the destination of worker (w+1) % n: with one worker
    // alone, copy into its own second buffer.
    double alone = per_call_seconds(1, o.seconds_per_point, setup, [&](int w) {
      std::copy(src[w].begin(), src[w].end(), dst[w].begin());
    });
    c.copy_bytes_per_s_alone = static_cast<double>(count) * 4 / alone;
    double shared = per_call_seconds(n, o.seconds_per_point, setup, body);
    c.copy_bytes_per_s_shared = static_cast<double>(count) * 4 / shared;
  }

  // Executor overhead: tiny tasks through the real executor.
  {
    const int blocks = 2048;
    GraphBuilder b;
    NodeId x = b.input("x", {blocks});
    for (int i = 0; i < 4; ++i) x = b.map("add(x0,1)", x);
    b.output(x, "out");
    Graph g = b.build();
    std::vector<std::vector<int>> parts(g.size(), std::vector<int>{blocks});
    TaskGraph tg = lower(g, decomposition_from_parts(g, n, parts));
    TensorMap inputs = random_inputs(g, 1);
    CpuExecutor exec({Policy::async, true});
    (void)exec.run(g, tg, inputs);
    std::vector<double> times;
    for (int r = 0; r < 5; ++r) {
      RunResult res = exec.run(g, tg, inputs);
      times.push_back(res.timeline.makespan_s());
    }
    std::sort(times.begin(), times.end());
    // Every worker ran its share of the compute tasks one after the other.
    std::int64_t per_worker = (tg.summary().count[static_cast<int>(TaskKind::compute)] + n - 1) / n;
    c.task_overhead_s = times[times.size() / 2] / static_cast<double>(per_worker);
  }
  return c;
}

}  // namespace tessel::runtime

namespace tessel::runtime {

Machine machine_from_calibration(const Calibration& c) {
  if (c.devices < 1 || !(c.peak_flops_per_s > 0)) fail("calibration: nothing measured");
  Machine m;
  m.name = "cpu-calibrated:" + std::to_string(c.devices);
  DeviceType t;
  t.name = "cpu-worker";
  // The executor computes f16/bf16/f32 graphs in float; f64 in double, whose SIMD lanes
  // hold half as many values: half the float rate (an estimate, not measured).
  t.peak_flops_per_s = {c.peak_flops_per_s, c.peak_flops_per_s, c.peak_flops_per_s, c.peak_flops_per_s / 2};
  for (const auto& p : c.gemm)
    t.efficiency.push_back({p.flops, std::clamp(p.flops_per_s / c.peak_flops_per_s, 1e-6, 1.0)});
  t.generic_flops_per_s = c.generic_flops_per_s;
  t.transcendental_flops_per_s = c.transcendental_flops_per_s;
  t.memory_bytes_per_s = c.memory_bytes_per_s;
  t.cache_capacity_bytes = c.cache_capacity_bytes;
  t.cache_bytes_per_s = c.cache_bytes_per_s;
  const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  t.memory_capacity_bytes = static_cast<std::int64_t>(ram / c.devices);
  t.launch_latency_s = c.task_overhead_s;
  t.single_lane = true;
  m.device_types = {t};
  m.hosts = {Host{"host", static_cast<std::int64_t>(ram), {}, {}}};
  auto add_link = [&](std::string name, double bytes_per_s) {
    m.links.push_back(Link{std::move(name), LinkKind::memory, bytes_per_s, 0.0});
    return LinkId(static_cast<std::int32_t>(m.links.size() - 1));
  };
  // Every copy crosses its worker's way out, the memory bus all copies share, and the
  // receiver's way in: alone a copy runs at the single-copy rate; all at once they
  // share the bus at the rate measured with every worker copying.
  LinkId bus = add_link("memory-bus", std::max(c.copy_bytes_per_s_alone, c.copy_bytes_per_s_shared * c.devices));
  for (int d = 0; d < c.devices; ++d) {
    Device dev;
    dev.fabric_out = {add_link("worker" + std::to_string(d) + ".out", c.copy_bytes_per_s_alone), bus};
    dev.fabric_in = {add_link("worker" + std::to_string(d) + ".in", c.copy_bytes_per_s_alone)};
    m.devices.push_back(std::move(dev));
  }
  m.interference = Interference::none();  // one lane per device: nothing overlaps on a worker
  m.validate(m.name);
  return m;
}

nlohmann::json to_json(const Calibration& c) {
  nlohmann::json gemm = nlohmann::json::array();
  for (const auto& p : c.gemm) gemm.push_back({{"size", p.size}, {"flops", p.flops}, {"flops_per_s", p.flops_per_s}});
  return {{"devices", c.devices},
          {"gemm", gemm},
          {"peak_flops_per_s", c.peak_flops_per_s},
          {"generic_flops_per_s", c.generic_flops_per_s},
          {"transcendental_flops_per_s", c.transcendental_flops_per_s},
          {"memory_bytes_per_s", c.memory_bytes_per_s},
          {"cache_capacity_bytes", c.cache_capacity_bytes},
          {"cache_bytes_per_s", c.cache_bytes_per_s},
          {"copy_bytes_per_s_alone", c.copy_bytes_per_s_alone},
          {"copy_bytes_per_s_shared", c.copy_bytes_per_s_shared},
          {"task_overhead_s", c.task_overhead_s}};
}

}  // namespace tessel::runtime
