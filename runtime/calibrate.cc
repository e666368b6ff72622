#include "runtime/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/partition.h"
#include "core/stats.h"
#include "core/task_graph.h"
#include "runtime/cpu_executor.h"
#include "runtime/cpu_kernels.h"
#include "runtime/cpu_threads.h"
#include "runtime/measure.h"

namespace tessel::runtime {

namespace {

// Bytes of the last (level 3 or higher) cache of CPU 0 from sysfs, as lscpu reads it;
// 0 when sysfs does not say (then no outer cache is modelled). sysconf is not asked:
// this VM reports 320 MB of L3 through it, lscpu 32 MiB.
std::int64_t last_level_cache_bytes() {
  std::int64_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_in(dir + "level"), size_in(dir + "size"), type_in(dir + "type");
    if (!level_in || !size_in) break;
    int level = 0;
    std::string size, type;
    level_in >> level;
    size_in >> size;
    type_in >> type;
    if (type == "Instruction" || size.empty()) continue;
    std::int64_t bytes = 0;
    try {
      bytes = std::stoll(size);
    } catch (...) {
      continue;
    }
    const char unit = size.back();
    if (unit == 'K') bytes <<= 10;
    if (unit == 'M') bytes <<= 20;
    if (unit == 'G') bytes <<= 30;
    if (level > best_level) {
      best_level = level;
      best = bytes;
    }
  }
  return best_level >= 3 ? best : 0;  // not sysconf's figure: some VMs report a bogus one
}

}  // namespace

// Each probe measures seconds per call of one micro-benchmark. The probes run in
// rounds, every probe once per round, and each keeps its median over the rounds: a
// machine whose speed drifts while it is calibrated (a shared VM's does, by 15% and
// more within a minute) then drifts under every probe alike, and one slow or fast
// moment does not decide any figure.
struct CpuCalibrator::State {
  explicit State(const CalibrationOptions& opts) : o(opts), n(opts.devices) {
    if (o.devices < 1) fail("calibrate: device count ", o.devices, " must be >= 1");
    c.devices = o.devices;
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    c.cache_capacity_bytes = l2 > 0 ? l2 : (1 << 20);
    cache_rows = std::max<std::int64_t>(2, c.cache_capacity_bytes / 4 / 2 / cache_cols / 2 * 2);
    cache_half = Rect{2, {0, 0}, {cache_rows / 2, cache_cols}};
    // The row probe's array: 2R rows of 2 × kRowProbeCols floats (a 64-byte line each),
    // half the per-core cache.
    row_rows = std::max<std::int64_t>(64, c.cache_capacity_bytes / 256);
    // The last-level cache, shared by the workers: each gets its share. The outer probe
    // copies within half of that share; the memory probe within twice the whole cache,
    // so that it measures the memory and not the cache.
    const std::int64_t llc = last_level_cache_bytes();
    if (llc > 2 * c.cache_capacity_bytes * n) c.outer_cache_capacity_bytes = llc / n;
    const std::int64_t outer_bytes = std::max<std::int64_t>(c.outer_cache_capacity_bytes, 4 * c.cache_capacity_bytes) / 2;
    outer_rows = std::max<std::int64_t>(2, outer_bytes / 4 / cache_cols / 2 * 2);
    outer_half = Rect{2, {0, 0}, {outer_rows / 2, cache_cols}};
    mem_rows = std::clamp<std::int64_t>(2 * llc / 4 / mem_cols / 2 * 2, 2048, 16384);  // 16 to 128 MiB
    mem_half = Rect{2, {0, 0}, {mem_rows, mem_cols / 2}};

    // GEMMs through the executor's own kernel (float, Eigen, one thread per worker).
    for (int size : gemm_sizes)
      probes.emplace_back([this, size] {
        Einsum e = Einsum::from_subscripts("ij,jk->ik", {{size, size}, {size, size}});
        std::vector<std::vector<float>> a(n), b(n), out(n);
        std::vector<cpu::Scratch<float>> scratch(n);
        return per_call_seconds(
            n, o.seconds_per_point,
            [&](int w) {
              a[w].assign(static_cast<std::size_t>(size) * size, 0.5f);
              b[w].assign(static_cast<std::size_t>(size) * size, 0.25f);
              out[w].assign(static_cast<std::size_t>(size) * size, 0.f);
            },
            [&](int w) { cpu::einsum_block<float>(e, {a[w].data(), b[w].data()}, out[w].data(), scratch[w]); });
      });

    // Generic kernels: arithmetic elementwise and reduction shapes (generic rate), then
    // the same with transcendental functions (their extra cost).
    for (const Einsum& e : arith) probes.emplace_back(generic_probe(e));
    for (const Einsum& e : transcendental) probes.emplace_back(generic_probe(e));

    // Strided copies inside one worker's memory, as touches do them.
    probes.emplace_back([this] {
      Shape shape{mem_rows, mem_cols};
      Rect dst{2, {0, mem_cols / 2}, {mem_rows, mem_cols / 2}};
      std::vector<std::vector<float>> buf(n);
      return per_call_seconds(
          n, o.seconds_per_point, [&](int w) { buf[w].assign(static_cast<std::size_t>(mem_rows * mem_cols), 1.f); },
          [&](int w) {
            cpu::copy_region<float>(buf[w].data(), shape, mem_half, buf[w].data(), shape, dst, Agg::none);
          });
    });

    // The same within the per-core cache (traffic of half its capacity), then within
    // half of this worker's share of the last-level cache.
    probes.emplace_back(in_cache_probe(cache_rows, cache_half));
    probes.emplace_back(in_cache_probe(outer_rows, outer_half));

    // Copies between device memories: one alone, then all workers at once. The copy of
    // worker w writes the memory of worker (w + 1) % n; one worker alone copies into its
    // own second buffer.
    probes.emplace_back([this] {
      std::vector<std::vector<float>> src(1), dst(1);
      return per_call_seconds(
          1, o.seconds_per_point,
          [&](int) {
            src[0].assign(kCopyCount, 1.f);
            dst[0].assign(kCopyCount, 0.f);
          },
          [&](int) { std::copy(src[0].begin(), src[0].end(), dst[0].begin()); });
    });
    probes.emplace_back([this] {
      std::vector<std::vector<float>> src(static_cast<std::size_t>(n)), dst(static_cast<std::size_t>(n));
      return per_call_seconds(
          n, o.seconds_per_point,
          [&](int w) {
            src[static_cast<std::size_t>(w)].assign(kCopyCount, 1.f);
            dst[static_cast<std::size_t>(w)].assign(kCopyCount, 0.f);
          },
          [&](int w) {
            std::vector<float>& to = dst[static_cast<std::size_t>((w + 1) % n)];  // the next worker's memory
            std::copy(src[static_cast<std::size_t>(w)].begin(), src[static_cast<std::size_t>(w)].end(), to.begin());
          });
    });

    // A worker's copy of a whole buffer into another of its memory, as evicts and loads
    // are made, at sizes from within the per-core cache to past the last-level one.
    for (std::int64_t bytes : copy_sizes) probes.emplace_back(copy_size_probe(bytes));

    // Executor overhead: tiny tasks through the real executor; seconds per task, as every
    // worker runs its share of the compute tasks one after the other.
    map_chain(4, 2048, 2048, overhead_graph, overhead_tg, overhead_inputs);
    probes.emplace_back([this] {
      const std::int64_t per_worker = (overhead_tg.summary().count[static_cast<int>(TaskKind::compute)] + n - 1) / n;
      CpuExecutor exec({Policy::async, true});
      (void)exec.run(overhead_graph, overhead_tg, overhead_inputs);  // warm-up
      std::vector<double> times;
      for (int r = 0; r < 3; ++r) times.push_back(exec.run(overhead_graph, overhead_tg, overhead_inputs).timeline.makespan_s());
      return stats::median(times) / static_cast<double>(per_worker);
    });
    // Barrier latency: a chain of elementwise nodes, one block per worker (no moves),
    // under bsp and under async; the difference per barrier.
    map_chain(kBarrierChain, static_cast<std::int64_t>(n) * 64, n, barrier_graph, barrier_tg, barrier_inputs);
    // Read off the timelines rather than from the difference of two makespans, which a
    // single preemption of a few hundred microseconds decides: under bsp, the gap from
    // a phase's last end to the next phase's first start, less the gap between one task
    // and the next on a worker under async (the dispatch the simulator already counts in
    // each task's overhead); the median over every barrier of five runs.
    probes.emplace_back([this] {
      CpuExecutor async_exec({Policy::async, true}), bsp_exec({Policy::bsp, true});
      (void)async_exec.run(barrier_graph, barrier_tg, barrier_inputs);  // warm-up
      (void)bsp_exec.run(barrier_graph, barrier_tg, barrier_inputs);
      std::vector<double> boundary, dispatch;
      for (int r = 0; r < 5; ++r) {
        const Timeline a = async_exec.run(barrier_graph, barrier_tg, barrier_inputs).timeline;
        const Timeline b = bsp_exec.run(barrier_graph, barrier_tg, barrier_inputs).timeline;
        for (double g : same_device_compute_gaps(barrier_tg, a)) dispatch.push_back(g);
        for (double g : bsp_boundary_gaps(barrier_tg, b)) boundary.push_back(g);
      }
      if (boundary.empty() || dispatch.empty()) return 0.0;
      return std::max(0.0, stats::median(boundary) - stats::median(dispatch));
    });
    // Strided copies of short rows within the per-core cache: row_rows rows of
    // kRowProbeCols floats out of rows twice as wide, as touches cut a narrow block out
    // of a wider one.
    probes.emplace_back([this] {
      Shape shape{2 * row_rows, 2 * kRowProbeCols};
      Rect src{2, {0, 0}, {row_rows, kRowProbeCols}};
      Rect dst{2, {row_rows, kRowProbeCols}, {row_rows, kRowProbeCols}};
      std::vector<std::vector<float>> buf(n);
      return per_call_seconds(
          n, o.seconds_per_point, [&](int w) { buf[w].assign(static_cast<std::size_t>(elements(shape)), 1.f); },
          [&](int w) { cpu::copy_region<float>(buf[w].data(), shape, src, buf[w].data(), shape, dst, Agg::none); });
    });
    // Generic kernels over short rows (a broadcast and a row reduction, rows of
    // kShortCols): their time beyond the generic rate, per row.
    for (const Einsum& e : short_rows) probes.emplace_back(generic_probe(e));
    // Retention: the read of a buffer pushed out of the per-core cache, at once, after an
    // idle, and after the last-level cache was overwritten (from DRAM).
    const std::int64_t flush_bytes = 2 * std::max(llc, 4 * c.cache_capacity_bytes);
    probes.emplace_back(retention_probe(0, 0));
    probes.emplace_back(retention_probe(kRetentionIdleS, 0));
    probes.emplace_back(retention_probe(0, flush_bytes));
    samples.resize(probes.size());
  }

  // A copy of `bytes` from one buffer of a worker into another, every worker at once
  // (the symmetric plans' workers load alike), each call right after the worker has
  // written twice its per-core cache of other memory, as the in-place profile's cold
  // calls (InPlaceProfileOptions, runtime/cpu_executor.h): in a task graph the buffer an
  // evict or load copies was last touched tasks ago. A hot loop of the same copy ran
  // twice as fast as the LLaMA block's loads of 0.7 MiB; this state is close to them
  // (2026-11-25).
  std::function<double()> copy_size_probe(std::int64_t bytes) {
    return [this, bytes] {
      const auto count = static_cast<std::size_t>(bytes / 4);
      const auto nw = static_cast<std::size_t>(n);
      std::vector<std::vector<float>> src(nw), dst(nw);
      std::vector<CacheEvictor> evict(nw);
      auto setup = [&](int w) {
        src[static_cast<std::size_t>(w)].assign(count, 1.f);
        dst[static_cast<std::size_t>(w)].assign(count, 0.f);
        evict[static_cast<std::size_t>(w)] = CacheEvictor(2 * c.cache_capacity_bytes);
      };
      auto before = [&](int w) { evict[static_cast<std::size_t>(w)].push(); };
      auto body = [&](int w) {
        const std::vector<float>& from = src[static_cast<std::size_t>(w)];
        std::copy(from.begin(), from.end(), dst[static_cast<std::size_t>(w)].begin());
      };
      return per_call_seconds_after(n, o.seconds_per_point, static_cast<double>(bytes) / 1e10, setup, before, body);
    };
  }

  // Seconds to read a buffer of the per-core cache's size (every worker its own, at
  // once), each read after the buffer was written, then twice the per-core cache of
  // other memory, then `idle_s` of spinning without memory traffic, then `flush_bytes` of
  // other memory written (0: none).
  std::function<double()> retention_probe(double idle_s, std::int64_t flush_bytes) {
    return [this, idle_s, flush_bytes] {
      const auto count = static_cast<std::size_t>(c.cache_capacity_bytes / 4);
      const auto nw = static_cast<std::size_t>(n);
      std::vector<std::vector<float>> buf(nw);
      std::vector<CacheEvictor> evict(nw), flush(nw);
      std::vector<float> sums(nw);
      auto setup = [&](int w) {
        buf[static_cast<std::size_t>(w)].assign(count, 1.f);
        evict[static_cast<std::size_t>(w)] = CacheEvictor(2 * c.cache_capacity_bytes);
        if (flush_bytes > 0) flush[static_cast<std::size_t>(w)] = CacheEvictor(flush_bytes);
      };
      auto before = [&](int w) {
        const auto uw = static_cast<std::size_t>(w);
        std::fill(buf[uw].begin(), buf[uw].end(), sums[uw]);
        evict[uw].push();
        for (const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(idle_s);
             std::chrono::steady_clock::now() < until;)
          cpu::cpu_relax();
        if (flush_bytes > 0) flush[uw].push();
      };
      auto body = [&](int w) {
        const auto uw = static_cast<std::size_t>(w);
        float s = 0;
        for (std::size_t i = 0; i < count; i += 16) s += buf[uw][i];  // a float of every cache line
        sums[uw] = s * 1e-30f;
      };
      // The expected call: the idle or the flush, so that a batch holds a few calls.
      const double expected = std::max(idle_s, static_cast<double>(flush_bytes) / 1e10);
      return per_call_seconds_after(n, o.seconds_per_point, std::max(expected, 1e-4), setup, before, body);
    };
  }

  std::function<double()> in_cache_probe(std::int64_t rows_, Rect half) {
    return [this, rows_, half] {
      Shape shape{rows_, cache_cols};
      Rect dst{2, {rows_ / 2, 0}, {rows_ / 2, cache_cols}};
      std::vector<std::vector<float>> buf(n);
      return per_call_seconds(
          n, o.seconds_per_point, [&](int w) { buf[w].assign(static_cast<std::size_t>(rows_ * cache_cols), 1.f); },
          [&](int w) { cpu::copy_region<float>(buf[w].data(), shape, half, buf[w].data(), shape, dst, Agg::none); });
    };
  }

  // `length` elementwise nodes in a row over a vector of `elements`, each node cut into
  // `blocks` blocks placed round-robin over the workers, lowered, with random inputs.
  void map_chain(int length, std::int64_t elements, int blocks, Graph& g, TaskGraph& tg, TensorMap& inputs) const {
    GraphBuilder gb;
    NodeId x = gb.input("x", {elements});
    for (int i = 0; i < length; ++i) x = gb.map("add(x0,1)", x);
    gb.output(x, "out");
    g = gb.build();
    const std::vector<std::vector<int>> parts(g.size(), std::vector<int>{blocks});
    tg = lower(g, decomposition_from_parts(g, n, parts));
    inputs = random_inputs(g, 1);
  }

  std::function<double()> generic_probe(const Einsum& e) {
    return [this, e] {
      std::vector<std::vector<float>> x(n), y(n), out(n);
      std::vector<cpu::Scratch<float>> scratch(n);
      return per_call_seconds(
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
    };
  }

  void round() {
    for (std::size_t p = 0; p < probes.size(); ++p) samples[p].push_back(probes[p]());
    ++rounds;
  }

  [[nodiscard]] Calibration result() const {
    if (rounds == 0) fail("calibrate: no round measured yet");
    std::vector<double> seconds(probes.size());
    for (std::size_t p = 0; p < probes.size(); ++p) seconds[p] = stats::median(samples[p]);
    return from_seconds(seconds);
  }

  [[nodiscard]] Calibration round_result(int round) const {
    if (round < 0 || round >= rounds) fail("calibrate: round ", round, " of ", rounds, " measured");
    std::vector<double> seconds(probes.size());
    for (std::size_t p = 0; p < probes.size(); ++p) seconds[p] = samples[p][static_cast<std::size_t>(round)];
    return from_seconds(seconds);
  }

  // The figures from one measured time per probe, in probe order.
  [[nodiscard]] Calibration from_seconds(const std::vector<double>& seconds) const {
    Calibration r = c;
    std::size_t k = 0;
    for (int size : gemm_sizes) {
      const double flops = Einsum::from_subscripts("ij,jk->ik", {{size, size}, {size, size}}).flops();
      r.gemm.push_back({size, flops, flops / seconds[k]});
      r.peak_flops_per_s = std::max(r.peak_flops_per_s, flops / seconds[k]);
      ++k;
    }
    double arith_flops = 0, arith_s = 0;
    for (const Einsum& e : arith) {
      arith_flops += e.flops();
      arith_s += seconds[k++];
    }
    r.generic_flops_per_s = arith_flops / arith_s;
    double tr_flops = 0, tr = 0, tr_s = 0;
    for (const Einsum& e : transcendental) {
      tr_flops += e.flops();
      tr += e.join.transcendentals() * static_cast<double>(e.join_elements());
      tr_s += seconds[k++];
    }
    const double arith_part = (tr_flops - tr) / r.generic_flops_per_s;
    r.transcendental_flops_per_s = tr / std::max(tr_s - arith_part, tr_s * 0.1);
    r.memory_bytes_per_s = 2.0 * static_cast<double>(mem_half.elements()) * 4 / seconds[k++];
    r.cache_bytes_per_s = 2.0 * static_cast<double>(cache_half.elements()) * 4 / seconds[k++];
    const double outer = 2.0 * static_cast<double>(outer_half.elements()) * 4 / seconds[k++];
    if (r.outer_cache_capacity_bytes > 0) r.outer_cache_bytes_per_s = outer;
    r.copy_bytes_per_s_alone = static_cast<double>(kCopyCount) * 4 / seconds[k++];
    r.copy_bytes_per_s_shared = static_cast<double>(kCopyCount) * 4 / seconds[k++];
    for (std::int64_t bytes : copy_sizes) {
      const auto b = static_cast<double>(bytes);
      r.copy_by_size.push_back({b, b / seconds[k++]});
    }
    r.task_overhead_s = seconds[k++];
    r.barrier_latency_s = seconds[k++];
    {
      const double bytes = 2.0 * static_cast<double>(row_rows) * kRowProbeCols * 4;  // read and written
      r.copy_row_s = std::max(0.0, (seconds[k++] - bytes / r.cache_bytes_per_s) / static_cast<double>(row_rows));
    }
    {
      double flops = 0, s = 0, short_rows_total = 0;
      for (const Einsum& e : short_rows) {
        flops += e.flops();
        s += seconds[k++];
        short_rows_total += static_cast<double>(e.join_elements() / e.join_shape.back());
      }
      r.generic_row_s = std::max(0.0, (s - flops / r.generic_flops_per_s) / short_rows_total);
    }
    {
      const double now = seconds[k++], idle = seconds[k++], dram = seconds[k++];
      r.outer_cache_retention_idle_s = kRetentionIdleS;
      r.outer_cache_retained_fraction = retained_fraction(now, idle, dram);
    }
    return r;
  }

  static constexpr std::int64_t rows = 256, cols = 1024;                // generic kernels
  static constexpr std::int64_t mem_cols = 2048;
  std::int64_t mem_rows = 2048;  // past the last-level cache, at least 16 MiB
  Rect mem_half;
  std::int64_t outer_rows = 2;
  Rect outer_half;
  static constexpr std::int64_t cache_cols = 256;
  static constexpr std::int64_t kRowProbeCols = 8;  // 32-byte rows
  std::int64_t row_rows = 0;                         // rows the row probe copies
  static constexpr std::size_t kCopyCount = std::size_t{8} << 20;       // 32 MiB of floats: past the caches
  // Copies by size: 16 KiB to 64 MiB, a factor of 4 apart.
  const std::vector<std::int64_t> copy_sizes = {std::int64_t{16} << 10, std::int64_t{64} << 10, std::int64_t{256} << 10,
                                                std::int64_t{1} << 20,  std::int64_t{4} << 20,  std::int64_t{16} << 20,
                                                std::int64_t{64} << 20};
  const CalibrationOptions o;
  const int n;
  Calibration c;
  const std::vector<int> gemm_sizes = {8, 16, 32, 64, 128, 256, 512};
  const std::vector<Einsum> arith = {
      Einsum::from_subscripts("ij,ij->ij", {{rows, cols}, {rows, cols}}, ScalarOp::parse("mul(x0,x1)")),
      Einsum::from_subscripts("ij,i->ij", {{rows, cols}, {rows}}, ScalarOp::parse("sub(x0,x1)")),
      Einsum::from_subscripts("ij->i", {{rows, cols}}, ScalarOp::parse("x0"), Agg::max),
      Einsum::from_subscripts("ij,ij->ij", {{rows, cols}, {rows, cols}}, ScalarOp::parse("add(x0,x1)"))};
  const std::vector<Einsum> transcendental = {
      Einsum::from_subscripts("ij->ij", {{rows, cols}}, ScalarOp::parse("exp(x0)")),
      Einsum::from_subscripts("ij,ij->ij", {{rows, cols}, {rows, cols}}, ScalarOp::parse("mul(silu(x0),x1)"))};
  static constexpr std::int64_t kShortCols = 32, kShortRows = rows * cols / kShortCols / 16;  // 64 KiB
  const std::vector<Einsum> short_rows = {
      Einsum::from_subscripts("ij,i->ij", {{kShortRows, kShortCols}, {kShortRows}}, ScalarOp::parse("sub(x0,x1)")),
      Einsum::from_subscripts("ij->i", {{kShortRows, kShortCols}}, ScalarOp::parse("x0"), Agg::max)};
  std::int64_t cache_rows = 2;
  Rect cache_half;
  Graph overhead_graph;
  TaskGraph overhead_tg;
  TensorMap overhead_inputs;
  static constexpr int kBarrierChain = 32;
  Graph barrier_graph;
  TaskGraph barrier_tg;
  TensorMap barrier_inputs;
  std::vector<std::function<double()>> probes;
  std::vector<std::vector<double>> samples;  // per probe, one per round
  int rounds = 0;
};

CpuCalibrator::CpuCalibrator(const CalibrationOptions& options) : state_(std::make_unique<State>(options)) {}
CpuCalibrator::~CpuCalibrator() = default;
void CpuCalibrator::round() { state_->round(); }
int CpuCalibrator::rounds() const { return state_->rounds; }
Calibration CpuCalibrator::result() const { return state_->result(); }
Calibration CpuCalibrator::round_result(int round) const { return state_->round_result(round); }

double retained_fraction(double now_s, double idle_s, double dram_s) {
  if (!(dram_s > now_s)) return 1.0;
  return std::clamp((dram_s - idle_s) / (dram_s - now_s), 0.0, 1.0);
}

Calibration calibrate_cpu(const CalibrationOptions& o) {
  if (o.rounds < 1) fail("calibrate: rounds must be >= 1, got ", o.rounds);
  CpuCalibrator cal(o);
  for (int r = 0; r < o.rounds; ++r) cal.round();
  return cal.result();
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
  t.outer_cache_capacity_bytes = c.outer_cache_capacity_bytes;
  t.outer_cache_bytes_per_s = c.outer_cache_bytes_per_s;
  t.copy_row_s = c.copy_row_s;
  t.generic_row_s = c.generic_row_s;
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
  // Evicts and loads are copies of a whole buffer within the worker's own memory (its
  // arena and its host arena): links of their own, at the rate measured for a copy of
  // each size (a buffer within the caches copies several times faster than one through
  // RAM), which the simulator takes for each evict and load alone.
  const auto host_link = [&](const std::string& name) {
    const LinkId l =
        add_link(name, c.copy_by_size.empty() ? c.copy_bytes_per_s_alone : c.copy_by_size.back().bytes_per_s);
    m.links.back().bytes_per_s_by_size = c.copy_by_size;
    return l;
  };
  for (int d = 0; d < c.devices; ++d) {
    Device dev;
    const std::string w = "worker" + std::to_string(d);
    dev.fabric_out = {add_link(w + ".out", c.copy_bytes_per_s_alone), bus};
    dev.fabric_in = {add_link(w + ".in", c.copy_bytes_per_s_alone)};
    dev.host_out = {host_link(w + ".host_out")};
    dev.host_in = {host_link(w + ".host_in")};
    m.devices.push_back(std::move(dev));
  }
  m.interference = Interference::none();  // one lane per device: nothing overlaps on a worker
  m.barrier_latency_s = c.barrier_latency_s;
  m.validate(m.name);
  return m;
}

nlohmann::json to_json(const Calibration& c) {
  nlohmann::json gemm = nlohmann::json::array();
  for (const auto& p : c.gemm) gemm.push_back({{"size", p.size}, {"flops", p.flops}, {"flops_per_s", p.flops_per_s}});
  nlohmann::json by_size = nlohmann::json::array();
  for (const auto& p : c.copy_by_size) by_size.push_back({{"bytes", p.bytes}, {"bytes_per_s", p.bytes_per_s}});
  return {{"devices", c.devices},
          {"gemm", gemm},
          {"peak_flops_per_s", c.peak_flops_per_s},
          {"generic_flops_per_s", c.generic_flops_per_s},
          {"transcendental_flops_per_s", c.transcendental_flops_per_s},
          {"memory_bytes_per_s", c.memory_bytes_per_s},
          {"cache_capacity_bytes", c.cache_capacity_bytes},
          {"cache_bytes_per_s", c.cache_bytes_per_s},
          {"outer_cache_capacity_bytes", c.outer_cache_capacity_bytes},
          {"outer_cache_bytes_per_s", c.outer_cache_bytes_per_s},
          {"copy_bytes_per_s_alone", c.copy_bytes_per_s_alone},
          {"copy_bytes_per_s_shared", c.copy_bytes_per_s_shared},
          {"copy_bytes_per_s_by_size", by_size},
          {"copy_row_s", c.copy_row_s},
          {"generic_row_s", c.generic_row_s},
          {"task_overhead_s", c.task_overhead_s},
          {"barrier_latency_s", c.barrier_latency_s},
          {"outer_cache_retention_idle_s", c.outer_cache_retention_idle_s},
          {"outer_cache_retained_fraction", c.outer_cache_retained_fraction}};
}

}  // namespace tessel::runtime
