// Fused computation-collective tasks (sim/fuse.h) and the interference model's rows
// (core/machine.h, Interference::resolve) in closed form.
#include "sim/fuse.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/partition.h"
#include "core/workloads.h"
#include "experiments/cli.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace tessel::sim {
namespace {

using testing::ps;
using testing::switch_machine;
using testing::TgBuilder;

const char* const kModels[] = {"alpha-beta", "flow"};

// A GEMM of `flops` on device 0 (f32 peak 1 TFLOP/s, memory free) whose output of
// `bytes` goes to device 1 over a link of 1e10 B/s with latency `alpha_s`.
struct GemmThenSend {
  TaskGraph tg;
  TaskId gemm, move, consumer;
};
GemmThenSend gemm_then_send(double flops, std::int64_t bytes) {
  TgBuilder b(2);
  BufferId out = b.compute(0, flops, 0, {}, bytes);
  TaskId gemm = b.last();
  BufferId moved = b.move(out, 1);
  TaskId move = b.last();
  b.compute(1, 0, 0, {moved});
  TaskId consumer = b.last();
  GemmThenSend g{b.graph(), gemm, move, consumer};
  g.tg.tasks[gemm.index()].contraction = true;
  return g;
}

SimResult run_fused(const TaskGraph& tg, const Machine& m, const std::string& network, FusedGraph* out = nullptr) {
  FusedGraph f = fuse_collectives(tg, m);
  SimOptions o;
  o.network = network;
  o.task_seconds = f.task_seconds;
  o.fused = f.fused;
  SimResult r = simulate(f.graph, m, o);
  if (out) *out = std::move(f);
  return r;
}

// finish = max(C' + m, C'/T + S/B) + L, C' = C / (1 − occupancy), m = S / (B·T).
double predicted_fused_s(double compute_s, double bytes, double bytes_per_s, double latency_s, int tiles,
                         double occupancy) {
  const double c = compute_s / (1 - occupancy);
  const double m = bytes / bytes_per_s / tiles;
  return std::max(c + m, c / tiles + bytes / bytes_per_s) + latency_s;
}

TEST(Fuse, GemmOfTTilesWithACollectiveFinishesAtThePredictedTime) {
  const double alpha = 2e-6, bw = 1e10;
  struct Case {
    double flops;
    std::int64_t bytes;
    int tiles;
    double occupancy;
  };
  // Compute-bound (1 ms GEMM, 100 µs send), communication-bound (1 ms, 10 ms), balanced,
  // one tile (no overlap left: compute then send), no occupancy cost.
  for (const Case c : {Case{1e9, 1'000'000, 16, 0.125}, Case{1e9, 100'000'000, 16, 0.125},
                       Case{1e9, 10'000'000, 8, 0.125}, Case{1e9, 10'000'000, 1, 0.125},
                       Case{1e9, 10'000'000, 32, 0.0}}) {
    Machine m = switch_machine(2, alpha, bw);
    m.interference.fused = {c.tiles, c.occupancy};
    const GemmThenSend g = gemm_then_send(c.flops, c.bytes);
    const double compute_s = c.flops / 1e12;
    const double expected = predicted_fused_s(compute_s, static_cast<double>(c.bytes), bw, alpha, c.tiles, c.occupancy);
    for (const char* model : kModels) {
      FusedGraph f;
      const SimResult r = run_fused(g.tg, m, model, &f);
      EXPECT_EQ(f.fused_kernels, 1);
      EXPECT_EQ(f.fused_moves, 1);
      // The picosecond clock rounds each tile: at most one ps per task.
      EXPECT_NEAR(r.makespan_s, expected, 1e-12 * (2 * c.tiles + 2))
          << model << " tiles " << c.tiles << " bytes " << c.bytes;
      // Unfused: the GEMM, then the whole send.
      SimOptions o;
      o.network = model;
      const double bulk = simulate(g.tg, m, o).makespan_s;
      EXPECT_NEAR(bulk, compute_s + static_cast<double>(c.bytes) / bw + alpha, 1e-11) << model;
    }
  }
}

// An all-to-all over n devices, by hand: device d's GEMM (`flops`, contraction) writes n
// chunks of `chunk` bytes; chunk p goes to device p (a move of that region), and each
// device's consumer reads the n − 1 chunks it receives.
struct GemmAllToAll {
  TaskGraph tg;
};
GemmAllToAll gemm_all_to_all(int n, double flops, std::int64_t chunk) {
  TgBuilder b(n);
  std::vector<BufferId> out;
  std::vector<TaskId> gemms;
  for (int d = 0; d < n; ++d) {
    out.push_back(b.compute(d, flops, 0, {}, chunk * n));
    gemms.push_back(b.last());
  }
  std::vector<std::vector<BufferId>> received(static_cast<std::size_t>(n));
  std::vector<TaskId> moves;
  for (int d = 0; d < n; ++d)
    for (int p = 0; p < n; ++p)
      if (p != d) {
        received[static_cast<std::size_t>(p)].push_back(b.move(out[static_cast<std::size_t>(d)], p));
        moves.push_back(b.last());
      }
  for (int p = 0; p < n; ++p) b.compute(p, 0, 0, received[static_cast<std::size_t>(p)]);
  GemmAllToAll g{b.graph()};
  for (TaskId t : gemms) g.tg.tasks[t.index()].contraction = true;
  for (TaskId t : moves) {  // one chunk of the GEMM's output, not all of it
    Task& mv = g.tg.tasks[t.index()];
    mv.bytes = chunk;
    mv.src = Rect{1, {chunk * mv.dst_device.value / 4}, {chunk / 4}};
    g.tg.buffers[mv.writes.index()].shape = Shape{chunk / 4};
  }
  g.tg.validate();
  return g;
}

// A GEMM of T tiles fused with an all-to-all over n > 2 devices on a full-bisection switch
// (each device's up and down links of bandwidth B, latency L on the sender's). Each tile
// releases n − 1 pieces of chunk/T bytes, one per peer, which leave one at a time on the
// device's channel (m = chunk/(B·T) each); every device sends to the same step (dst − src)
// mod n at once (core/ready_order.h), so every receiver takes one piece at a time at the
// full B. A two-stage flow shop of T equal jobs (a tile of C'/T, then its (n − 1)·m of
// sends):
//   finish = C'/T + (n − 1)·m + (T − 1)·max(C'/T, (n − 1)·m) + L
//          = max(C' + (n − 1)·m, C'/T + (n − 1)·chunk/B) + L,   C' = C / (1 − occupancy).
// Unfused: C + (n − 1)·chunk/B + L.
TEST(Fuse, GemmOfTTilesWithAnAllToAllOverNDevicesFinishesAtThePredictedTime) {
  const double alpha = 2e-6, bw = 1e10;
  struct Case {
    int n;
    double flops;
    std::int64_t chunk;
    int tiles;
    double occupancy;
  };
  // Compute-bound (1 ms GEMM, 3 × 10 µs of sends), communication-bound (1 ms, 7 × 2 ms),
  // near balance (per tile 143 µs of compute against 3 × 37.5 µs of sends on 4 devices),
  // one tile (compute, then every send), no occupancy cost.
  for (const Case c : {Case{4, 1e9, 100'000, 16, 0.125}, Case{8, 1e9, 20'000'000, 16, 0.125},
                       Case{4, 1e9, 3'000'000, 8, 0.125}, Case{6, 1e9, 4'000'000, 1, 0.125},
                       Case{5, 2e9, 2'000'000, 32, 0.0}}) {
    Machine m = switch_machine(c.n, alpha, bw);
    m.interference.fused = {c.tiles, c.occupancy};
    const GemmAllToAll g = gemm_all_to_all(c.n, c.flops, c.chunk);
    const double compute_s = c.flops / 1e12;
    const double cp = compute_s / (1 - c.occupancy);
    const double peers = c.n - 1;
    const double piece_s = static_cast<double>(c.chunk) / bw / c.tiles;
    const double expected =
        std::max(cp + peers * piece_s, cp / c.tiles + peers * static_cast<double>(c.chunk) / bw) + alpha;
    for (const char* model : kModels) {
      FusedGraph f;
      const SimResult r = run_fused(g.tg, m, model, &f);
      EXPECT_EQ(f.fused_kernels, c.n);
      EXPECT_EQ(f.fused_moves, c.n * (c.n - 1));
      // The picosecond clock rounds each tile and piece: at most one ps per task in line.
      EXPECT_NEAR(r.makespan_s, expected, 1e-12 * (c.n * c.tiles + 4)) << model << " n " << c.n << " tiles " << c.tiles;
      SimOptions o;
      o.network = model;
      const double bulk = simulate(g.tg, m, o).makespan_s;
      EXPECT_NEAR(bulk, compute_s + peers * static_cast<double>(c.chunk) / bw + alpha, 1e-11) << model;
    }
  }
}

// GEMV + all-reduce over n devices, by hand, as lowering builds it: device d's GEMV
// (contraction) writes a partial of n chunks; chunk p goes to device p (reduce-scatter),
// which accumulates its own chunk and the n − 1 it receives (touches on its copy lane,
// chunk/4 flops each at 1 TFLOP/s: τ = chunk / 4e12 s), then sends the sum to every other
// device (all-gather). The fused path fuses what reads a contraction's output: the
// reduce-scatter's moves go tile by tile; the all-gather reads the sum, so it waits for
// the last piece and runs unfused after it:
//   finish = max(C' + (n − 1)·m, C'/T + (n − 1)·chunk/B) + L    (reduce-scatter, as above)
//            + τ                                                (the last accumulate)
//            + (n − 1)·chunk/B + L                              (all-gather, one at a time)
// (each receiver's last pieces arrive m apart and τ < m, so no accumulate waits for another).
TEST(Fuse, GemvOfTTilesWithAnAllReduceOverNDevicesFinishesAtThePredictedTime) {
  const double alpha = 1e-6, bw = 1e10;
  for (const int n : {3, 4, 8})
    for (const std::int64_t chunk : {std::int64_t{40'000}, std::int64_t{4'000'000}}) {
      const int tiles = 16;
      const double occupancy = 0.125, flops = 1e9;
      Machine m = switch_machine(n, alpha, bw);
      m.interference.fused = {tiles, occupancy};
      TgBuilder b(n);
      std::vector<BufferId> partial, sum;
      std::vector<TaskId> gemvs, reduce_moves;
      for (int d = 0; d < n; ++d) {
        partial.push_back(b.compute(d, flops, 0, {}, chunk * n));
        gemvs.push_back(b.last());
      }
      std::vector<std::vector<BufferId>> incoming(static_cast<std::size_t>(n));
      for (int d = 0; d < n; ++d)
        for (int p = 0; p < n; ++p)
          if (p != d) {
            incoming[static_cast<std::size_t>(p)].push_back(b.move(partial[static_cast<std::size_t>(d)], p));
            reduce_moves.push_back(b.last());
          }
      std::vector<TaskId> own_touches;
      for (int p = 0; p < n; ++p) {
        sum.push_back(b.buffer(p, chunk, Agg::sum));
        b.touch(partial[static_cast<std::size_t>(p)], sum.back(), TouchOp::accumulate);
        own_touches.push_back(b.last());
        for (BufferId in : incoming[static_cast<std::size_t>(p)]) b.touch(in, sum.back(), TouchOp::accumulate);
      }
      std::vector<std::vector<BufferId>> gathered(static_cast<std::size_t>(n));
      for (int p = 0; p < n; ++p)
        for (int q = 0; q < n; ++q)
          if (q != p) gathered[static_cast<std::size_t>(q)].push_back(b.move(sum[static_cast<std::size_t>(p)], q));
      for (int q = 0; q < n; ++q) {
        gathered[static_cast<std::size_t>(q)].push_back(sum[static_cast<std::size_t>(q)]);
        b.compute(q, 0, 0, gathered[static_cast<std::size_t>(q)]);
      }
      TaskGraph tg = b.graph();
      for (TaskId t : gemvs) tg.tasks[t.index()].contraction = true;
      for (TaskId t : reduce_moves) {  // chunk p of the partial
        Task& mv = tg.tasks[t.index()];
        mv.bytes = chunk;
        mv.src = Rect{1, {chunk * mv.dst_device.value / 4}, {chunk / 4}};
        tg.buffers[mv.writes.index()].shape = Shape{chunk / 4};
      }
      for (Task& t : tg.tasks)  // every accumulate adds one chunk (TgBuilder sized them before the patch above)
        if (t.kind == TaskKind::touch) {
          t.bytes = chunk;
          t.flops = static_cast<double>(chunk / 4);
          t.dst = Rect{1, {0}, {chunk / 4}};
        }
      for (int p = 0; p < n; ++p)  // the own chunk only, from the partial
        tg.tasks[own_touches[static_cast<std::size_t>(p)].index()].src = Rect{1, {chunk * p / 4}, {chunk / 4}};
      tg.validate();

      const double cp = flops / 1e12 / (1 - occupancy);
      const double peers = n - 1, one = static_cast<double>(chunk) / bw, piece_s = one / tiles;
      const double tau = static_cast<double>(chunk / 4) / 1e12;
      ASSERT_LT(tau, piece_s);
      const double reduce_scatter = std::max(cp + peers * piece_s, cp / tiles + peers * one) + alpha;
      const double expected = reduce_scatter + tau + peers * one + alpha;
      for (const char* model : kModels) {
        FusedGraph f;
        const SimResult r = run_fused(tg, m, model, &f);
        EXPECT_EQ(f.fused_kernels, n);
        EXPECT_EQ(f.fused_moves, n * (n - 1));  // the reduce-scatter's; the all-gather's stay whole
        EXPECT_NEAR(r.makespan_s, expected, 1e-12 * (n * tiles + 3 * n + 4)) << model << " n " << n << " chunk " << chunk;
      }
    }
}

TEST(Fuse, FusedTasksIgnoreTheInterferenceFactors) {
  // The fused kernel pays its occupancy, not a second stream's contention: with heavy
  // factors the makespan is the same as with none.
  Machine m = switch_machine(2, 0, 1e10);
  const GemmThenSend g = gemm_then_send(1e9, 10'000'000);
  const double none = run_fused(g.tg, m, "flow").makespan_s;
  m.interference.normal = {1.5, 3.0, "test"};
  EXPECT_EQ(ps(run_fused(g.tg, m, "flow").makespan_s), ps(none));
  // The unfused graph does not overlap here (the send waits for the GEMM), so it is
  // unchanged as well: 1 ms + 1 ms.
  SimOptions o;
  EXPECT_EQ(ps(simulate(g.tg, m, o).makespan_s), 2'000'000'000);
}

TEST(Fuse, RewriteChainsTilesAndWaitsForEveryPiece) {
  Machine m = switch_machine(2, 0, 1e10);
  m.interference.fused.tiles = 4;
  const GemmThenSend g = gemm_then_send(1e9, 1'000'000);
  const FusedGraph f = fuse_collectives(g.tg, m);
  // 4 tiles, 4 pieces, the consumer: 9 tasks.
  ASSERT_EQ(f.graph.size(), 9u);
  std::int64_t piece_bytes = 0;
  int tiles = 0;
  for (std::size_t i = 0; i < f.graph.size(); ++i) {
    const Task& t = f.graph.tasks[i];
    if (t.kind == TaskKind::compute && t.contraction) {
      ++tiles;
      EXPECT_DOUBLE_EQ(t.flops, 1e9 / 4);
      EXPECT_NEAR(f.task_seconds[i], 1e-3 / 4 / 0.875, 1e-15);  // no launch latency here
      EXPECT_TRUE(f.fused[i]);
    }
    if (t.kind == TaskKind::move) piece_bytes += t.bytes;
  }
  EXPECT_EQ(tiles, 4);
  EXPECT_EQ(piece_bytes, 1'000'000);
  EXPECT_EQ(f.graph.tasks.back().deps.size(), 4u);  // the consumer waits for every piece
  EXPECT_FALSE(f.fused.back());
}

TEST(Fuse, NothingToFuseLeavesTheGraphAlone) {
  Machine m = switch_machine(2, 0, 1e10);
  TgBuilder b(2);
  BufferId in = b.input(0, 1'000'000);
  b.compute(0, 1e9, 0, {in});  // a GEMM whose output stays on its device
  b.move(in, 1);               // a move of an input, not of a GEMM's output
  const FusedGraph f = fuse_collectives(b.graph(), m);
  EXPECT_EQ(f.fused_kernels, 0);
  EXPECT_EQ(f.graph.size(), b.graph().size());
  EXPECT_TRUE(f.task_seconds.empty());
}

TEST(Fuse, BuiltInCollectiveWorkloadsFuse) {
  Machine m = machine_preset("h100-sxm-8");
  struct W {
    const char* workload;
    const char* parts;
    bool sooner;  // a collective worth overlapping: fused must win
  };
  // GEMM + all-to-all moves 28 MiB per GPU behind a 0.16 ms GEMM: fused wins (by 12.9%
  // with the moves staggered, core/ready_order.h; by 37% when every sender's moves queued on
  // one receiver at a time; published: 12% on average, up to 20%). The GEMV's
  // reduce-scatter is a few KiB (latency alone) and the embedding's lookup is memory-bound:
  // there the 12.5% the fused kernel costs can outweigh what its overlap saves, so only
  // that they fuse is required.
  for (const W w : {W{"gemm-alltoall:tokens=4096,dim=4096,out=4096,dtype=bf16",
                      "x=8x1x1,w=8x1x1,gemm=8x1x1x1,act=1x8x1,out=1x8x1", true},
                    W{"gemv-allreduce:rows=8192,cols=8192,dtype=bf16",
                      "W=1x8,x=8x1,V=8x1,gemv=1x1x8,act=8x1,next=8x1x1,out=8x1", false},
                    W{"embedding-alltoall:batch=4096,dtype=bf16",
                      "onehot=1x8x1,tables=8x1x1,embed=1x8x1x1,act=8x1x1,out=8x1x1", false}}) {
    Graph g = build_workload(w.workload);
    TaskGraph tg = lower(g, cli::decomposition_from_parts_spec(g, 8, w.parts));
    SimOptions o;
    const double bulk = simulate(tg, m, o).makespan_s;
    FusedGraph f;
    const double fused = run_fused(tg, m, "flow", &f).makespan_s;
    EXPECT_GT(f.fused_kernels, 0) << w.workload;
    if (w.sooner) {
      EXPECT_LT(fused, 0.95 * bulk) << w.workload;
    }
  }
}

}  // namespace
}  // namespace tessel::sim
