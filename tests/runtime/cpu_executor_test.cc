// The CPU executor against the reference evaluator, its timeline, its policies, and
// its failure behaviour.
#include "runtime/cpu_executor.h"

#include <cmath>
#include <optional>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "runtime/cpu_kernels.h"
#include "runtime/kernels.h"

namespace tessel::runtime {
namespace {

const char* kSmallWorkloads[] = {"chain:size=48", "chain-sum:size=40", "chain-sum:size=60,skewed=1",
                                 "ffn:tokens=24,dim=16,hidden=40", "llama-block:model=tiny,seq=8"};

void expect_matches_reference(const Graph& g, const RunResult& r, const TensorMap& want, const std::string& label) {
  for (NodeId id : g.outputs()) {
    const std::string& name = g.node(id).name;
    Difference d = compare(r.outputs.at(name), want.at(name));
    EXPECT_LE(d.normwise_rel, 1e-5) << label << " output " << name << " max abs error " << d.max_abs << " at "
                                    << d.index;
  }
}

void expect_timeline_consistent(const TaskGraph& tg, const Timeline& tl, const std::string& label) {
  ASSERT_EQ(tl.spans.size(), tg.tasks.size()) << label;
  for (std::size_t i = 0; i < tl.spans.size(); ++i) {
    const Span& s = tl.spans[i];
    ASSERT_EQ(s.task.index(), i) << label;
    const Task& t = tg.tasks[i];
    EXPECT_EQ(s.device, t.kind == TaskKind::move ? t.dst_device : t.device) << label;  // moves: the receiver copies
    EXPECT_LE(s.start_s, s.end_s) << label;
    for (TaskId d : tg.tasks[i].deps)
      EXPECT_LE(tl.spans[d.index()].end_s, s.start_s) << label << ": task " << i << " started before dep " << d;
  }
}

TEST(CpuExecutor, EveryWorkloadMatchesReferenceOn1To4DevicesUnderBothPolicies) {
  for (const char* w : kSmallWorkloads) {
    Graph g = build_workload(w);
    TensorMap inputs = random_inputs(g, 3);
    TensorMap want = evaluate_reference(g, inputs);
    for (int devices : {1, 2, 4}) {
      TaskGraph tg = lower(g, split_largest(g, devices));
      for (Policy p : {Policy::async, Policy::bsp}) {
        std::string label = std::string(w) + " d=" + std::to_string(devices) + " " + std::string(to_string(p));
        RunResult r = CpuExecutor({p, false}).run(g, tg, inputs);
        expect_matches_reference(g, r, want, label);
        expect_timeline_consistent(tg, r.timeline, label);
      }
    }
  }
}

TEST(CpuExecutor, AllocatingWhenWrittenAndFreeingAfterTheLastReaderGivesTheSameResults) {
  // The path taken when all buffers together exceed the preallocation limit.
  for (const char* w : kSmallWorkloads) {
    Graph g = build_workload(w);
    TensorMap inputs = random_inputs(g, 5);
    TensorMap want = evaluate_reference(g, inputs);
    TaskGraph tg = lower(g, split_largest(g, 3));
    for (Policy p : {Policy::async, Policy::bsp}) {
      CpuOptions o{p, false};
      o.preallocate_limit_bytes = 1;
      RunResult r = CpuExecutor(o).run(g, tg, inputs);
      std::string label = std::string(w) + " lazy " + std::string(to_string(p));
      expect_matches_reference(g, r, want, label);
      expect_timeline_consistent(tg, r.timeline, label);
    }
  }
}

TEST(CpuExecutor, StressOverWorkerCountsWithUnevenSplits) {
  Graph g = build_workload("chain-sum:size=37");
  TensorMap inputs = random_inputs(g, 11);
  TensorMap want = evaluate_reference(g, inputs);
  for (int devices = 1; devices <= 12; ++devices) {
    // 5 parts of 37 are uneven; the contractions' aggregated index is split 3 ways.
    std::vector<std::vector<int>> parts;
    for (NodeId id : g.ids()) {
      std::vector<int> p(g.join_shape(id).size(), 1);
      p[0] = 5;
      if (p.size() == 3) p[2] = 3;
      parts.push_back(p);
    }
    TaskGraph tg = lower(g, decomposition_from_parts(g, devices, parts));
    for (int rep = 0; rep < 3; ++rep) {
      RunResult r = CpuExecutor({rep % 2 ? Policy::bsp : Policy::async, false}).run(g, tg, inputs);
      expect_matches_reference(g, r, want, "devices=" + std::to_string(devices));
    }
  }
}

TEST(CpuExecutor, BspStartsNoTaskBeforeEveryEarlierPhaseEnds) {
  Graph g = build_workload("ffn:tokens=32,dim=16,hidden=32");
  TaskGraph tg = lower(g, split_largest(g, 2));
  RunResult r = CpuExecutor({Policy::bsp, false}).run(g, tg, random_inputs(g, 1));
  std::map<std::int32_t, double> phase_end;
  for (const Span& s : r.timeline.spans) {
    double& e = phase_end[bsp_phase(tg.task(s.task))];
    e = std::max(e, s.end_s);
  }
  for (const Span& s : r.timeline.spans) {
    std::int32_t p = bsp_phase(tg.task(s.task));
    for (const auto& [q, end] : phase_end)
      if (q < p) {
        EXPECT_LE(end, s.start_s) << "task " << s.task << " of phase " << p << " started before phase " << q;
      }
  }
}

TEST(CpuExecutor, AFailingTaskSurfacesAsAnErrorNotAHang) {
  Graph g = build_workload("chain:size=16");
  TaskGraph tg = lower(g, split_largest(g, 2));
  // Corrupt one compute task's output buffer so the kernel's shape check fails.
  for (const Task& t : tg.tasks)
    if (t.kind == TaskKind::compute) {
      tg.buffers[t.writes.index()].shape = {1};
      break;
    }
  for (Policy p : {Policy::async, Policy::bsp}) {
    try {
      (void)CpuExecutor({p, false}).run(g, tg, random_inputs(g, 1));
      FAIL() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("compute of node"), std::string::npos) << e.what();
    }
  }
}

// One executor keeps its worker threads from run to run: graphs on more, then fewer
// devices, a run whose task fails, and the runs after it must all behave as on a fresh
// executor.
TEST(CpuExecutor, OneExecutorServesManyRunsOfDifferentWidthsAndOutlivesAFailure) {
  Graph g = build_workload("chain:size=24");
  TensorMap inputs = random_inputs(g, 3);
  TensorMap want = evaluate_reference(g, inputs);
  TaskGraph broken = lower(g, split_largest(g, 2));
  for (const Task& t : broken.tasks)
    if (t.kind == TaskKind::compute) {
      broken.buffers[t.writes.index()].shape = {1};
      break;
    }
  for (Policy p : {Policy::async, Policy::bsp}) {
    CpuExecutor exec({p, false});
    for (int devices : {1, 4, 2, 3, 1, 4}) {
      TaskGraph tg = lower(g, split_largest(g, devices));
      RunResult r = exec.run(g, tg, inputs);
      expect_matches_reference(g, r, want, "devices=" + std::to_string(devices));
      expect_timeline_consistent(tg, r.timeline, "devices=" + std::to_string(devices));
      EXPECT_THROW((void)exec.run(g, broken, inputs), Error);
    }
  }
}

// Workers run with subnormals flushed to zero (runtime/measure.h: a kernel's time must
// not depend on whether its data underflows): x·x of 1e-20 is 1e-40 in double, a
// subnormal in float, and 0 from the executor, on every worker and under both policies.
TEST(CpuExecutor, WorkersFlushSubnormalResultsToZero) {
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
  GraphBuilder b;
  auto x = b.input("x", {64, 16});
  b.output(b.map("mul(x0,x0)", x), "y");
  Graph g = b.build();
  TensorMap inputs;
  inputs.emplace("x", Tensor({64, 16}, DType::f32));
  for (double& v : inputs.at("x").data) v = 1e-20;
  ASSERT_GT(evaluate_reference(g, inputs).at("y").data[0], 0.0);  // the reference keeps it
  for (Policy p : {Policy::async, Policy::bsp})
    for (bool pin : {true, false}) {
      RunResult r = CpuExecutor({p, pin}).run(g, lower(g, split_largest(g, 2)), inputs);
      for (double v : r.outputs.at("y").data) ASSERT_EQ(v, 0.0) << to_string(p) << " pinned " << pin;
    }
#else
  GTEST_SKIP() << "no flush-to-zero mode known for this architecture";
#endif
}

// max and min propagate NaN as numpy's max / min do, wherever the NaN sits among the 16
// partial results (a NaN 16 and 32 places before the extremes shares their lane); the
// reference kernel agrees.
TEST(CpuKernels, MaxAndMinReductionsPropagateNaNLikeNumpy) {
  for (std::int64_t n : {3, 17, 40, 300})
    for (std::int64_t nan_at : {std::int64_t{0}, std::int64_t{2}, n - 1}) {
      std::vector<float> v(static_cast<std::size_t>(n), 0.f);
      v[static_cast<std::size_t>((nan_at + 16) % n)] = 100.f;
      v[static_cast<std::size_t>((nan_at + 32) % n)] = -100.f;
      v[static_cast<std::size_t>(nan_at)] = std::nanf("");
      for (Agg agg : {Agg::max, Agg::min}) {
        Einsum e = Einsum::from_subscripts("i->", {{n}}, ScalarOp::parse("x0"), agg);
        float out = 0;
        cpu::Scratch<float> scratch;
        cpu::einsum_block<float>(e, {v.data()}, &out, scratch);
        EXPECT_TRUE(std::isnan(out)) << "n=" << n << " NaN at " << nan_at << " " << to_string(agg) << ": " << out;
        Tensor t({n}, DType::f32);
        for (std::int64_t i = 0; i < n; ++i) t.data[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(i)];
        EXPECT_TRUE(std::isnan(einsum_kernel(e, {&t}).data[0])) << "reference, n=" << n << " NaN at " << nan_at;
      }
    }
}

// Row-wise reductions (one output per row, the os == 1 fast path) and the join's max /
// min (numpy's maximum / minimum) propagate NaN too.
TEST(CpuKernels, RowReductionsAndMaxMinJoinsPropagateNaN) {
  std::vector<double> v(4 * 40, 1.0);
  v[3] = std::nan("");  // row 0 of the column reduction "ij->j" and of "ij->i"
  for (const char* sub : {"ij->j", "ij->i"})
    for (Agg agg : {Agg::max, Agg::min}) {
      Einsum e = Einsum::from_subscripts(sub, {{4, 40}}, ScalarOp::parse("x0"), agg);
      std::vector<double> out(static_cast<std::size_t>(elements(e.out_shape())));
      cpu::Scratch<double> scratch;
      cpu::einsum_block<double>(e, {v.data()}, out.data(), scratch);
      EXPECT_TRUE(std::isnan(std::string(sub) == "ij->j" ? out[3] : out[0])) << sub << " " << to_string(agg);
    }
  for (const char* join : {"max(x0,x1)", "min(x0,x1)", "max(x1,x0)", "min(x1,x0)"}) {
    Einsum e = Einsum::from_subscripts("i,i->i", {{40}, {40}}, ScalarOp::parse(join));
    std::vector<double> a(40, 1.0), b(40, 2.0);
    a[7] = std::nan("");
    std::vector<double> out(40);
    cpu::Scratch<double> scratch;
    cpu::einsum_block<double>(e, {a.data(), b.data()}, out.data(), scratch);
    EXPECT_TRUE(std::isnan(out[7])) << join;
    EXPECT_FALSE(std::isnan(out[8])) << join;
    const double args[2] = {a[7], b[7]};
    EXPECT_TRUE(std::isnan(ScalarOp::parse(join).eval(args))) << join << " (reference)";
  }
}

// Per-operand state is sized by the operand count: nine vectors multiplied elementwise
// (kMaxRank is 8) through the CPU kernel and the reference kernel, on both paths.
TEST(CpuKernels, EinsumsWithMoreOperandsThanTheMaximumRankRun) {
  for (int nin : {9, 12}) {
    std::string sub;
    for (int i = 0; i < nin; ++i) sub += i ? ",i" : "i";
    sub += "->i";
    std::vector<Shape> shapes(static_cast<std::size_t>(nin), Shape{300});
    Einsum e = Einsum::from_subscripts(sub, shapes, std::nullopt, std::nullopt, DType::f64);
    std::vector<Tensor> ts;
    for (int i = 0; i < nin; ++i) ts.push_back(Tensor({300}, DType::f64, 1.0 + 0.1 * i));
    double want = 1;
    for (int i = 0; i < nin; ++i) want *= 1.0 + 0.1 * i;
    std::vector<const Tensor*> ops;
    std::vector<const double*> raw;
    for (const Tensor& t : ts) {
      ops.push_back(&t);
      raw.push_back(t.data.data());
    }
    Tensor ref = einsum_kernel(e, ops);
    std::vector<double> out(300);
    cpu::Scratch<double> scratch;
    cpu::einsum_block<double>(e, raw, out.data(), scratch);
    for (std::size_t x = 0; x < 300; ++x) {
      EXPECT_NEAR(ref.data[x], want, 1e-12) << nin << " operands, reference, element " << x;
      EXPECT_NEAR(out[x], want, 1e-12) << nin << " operands, CPU kernel, element " << x;
    }
    // A scalar einsum (rank 0) takes its own branch.
    std::string scalar_sub(static_cast<std::size_t>(nin - 1), ',');
    scalar_sub += "->";
    Einsum s = Einsum::from_subscripts(scalar_sub, std::vector<Shape>(static_cast<std::size_t>(nin), Shape{}),
                                       std::nullopt, std::nullopt, DType::f64);
    std::vector<Tensor> ss;
    for (int i = 0; i < nin; ++i) ss.push_back(Tensor({}, DType::f64, 1.0 + 0.1 * i));
    std::vector<const double*> sraw;
    for (const Tensor& t : ss) sraw.push_back(t.data.data());
    double sout = 0;
    cpu::einsum_block<double>(s, sraw, &sout, scratch);
    EXPECT_NEAR(sout, want, 1e-12) << nin << " scalar operands";
  }
}

TEST(CpuKernels, ContractionsTakeTheGemmPathAndOthersTheGenericOne) {
  auto e = [](const char* s, std::vector<Shape> shapes) { return Einsum::from_subscripts(s, shapes); };
  EXPECT_EQ(cpu::kernel_path(e("ij,jk->ik", {{2, 3}, {3, 4}})), cpu::KernelPath::gemm);
  EXPECT_EQ(cpu::kernel_path(e("bshk,bthk->bhst", {{1, 2, 3, 4}, {1, 2, 3, 4}})), cpu::KernelPath::gemm);
  EXPECT_EQ(cpu::kernel_path(e("ij,j->ij", {{2, 3}, {3}})), cpu::KernelPath::generic);  // broadcast
  EXPECT_EQ(cpu::kernel_path(e("ii,ij->j", {{3, 3}, {3, 4}})), cpu::KernelPath::generic);  // diagonal
  EXPECT_EQ(cpu::kernel_path(e("ij,k->i", {{2, 3}, {4}})), cpu::KernelPath::generic);   // one-sided sums
}

TEST(CpuKernels, GemmPathWithPermutedOperandsMatchesReferenceKernel) {
  // Operands stored in orders that need permuting, output order too.
  Einsum e = Einsum::from_subscripts("kbm,nkb->nbm", {{5, 3, 4}, {6, 5, 3}});
  ASSERT_EQ(cpu::kernel_path(e), cpu::KernelPath::gemm);
  Tensor a = random_tensor({5, 3, 4}, DType::f64, 1), b = random_tensor({6, 5, 3}, DType::f64, 2);
  Graph g;
  GraphBuilder gb(DType::f64);
  auto x = gb.input("a", a.shape);
  auto y = gb.input("b", b.shape);
  gb.output(gb.einsum("kbm,nkb->nbm", {x, y}), "out");
  TensorMap want = evaluate_reference(gb.build(), {{"a", a}, {"b", b}});
  std::vector<double> out(6 * 3 * 4);
  cpu::Scratch<double> scratch;
  cpu::einsum_block<double>(e, {a.data.data(), b.data.data()}, out.data(), scratch);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want.at("out").data[i], 1e-12) << i;
}

// The generic path's fast cases — broadcasts along the inner loop, reductions in
// several partial results, a reduction over rows run row by row (loop reordering), the
// transcendentals through Eigen's SIMD functions — against the reference evaluator in
// double. Lengths like 37 and 300 leave remainders after the 16 lanes and the 256-element
// chunks.
TEST(CpuKernels, GenericPathFastCasesMatchTheReferenceEvaluator) {
  struct Case {
    const char* subscripts;
    std::vector<Shape> shapes;
    const char* join;
    std::optional<Agg> agg;
  };
  const std::vector<Case> cases = {
      {"ij,i->ij", {{7, 300}, {7}}, "sub(x0,x1)", std::nullopt},
      {"ij,j->ij", {{7, 300}, {300}}, "mul(x0,x1)", std::nullopt},
      {"ij->i", {{5, 300}}, "x0", Agg::sum},
      {"ij->i", {{5, 37}}, "x0", Agg::max},
      {"ij->i", {{5, 300}}, "x0", Agg::min},
      {"ij->i", {{3, 40}}, "add(0.99,mul(0.01,x0))", Agg::prod},
      {"ij->j", {{300, 37}}, "x0", Agg::sum},
      {"ij->j", {{300, 37}}, "x0", Agg::max},
      {"bij->bj", {{3, 50, 40}}, "mul(x0,x0)", Agg::sum},
      {"ij,ij->j", {{64, 33}, {64, 33}}, "add(x0,mul(x0,x1))", Agg::sum},
      {"ij->ij", {{9, 300}}, "exp(x0)", std::nullopt},
      {"ij->ij", {{9, 300}}, "log(add(abs(x0),0.5))", std::nullopt},
      {"ij->ij", {{9, 300}}, "sqrt(add(abs(x0),0.5))", std::nullopt},
      {"ij->ij", {{9, 300}}, "rsqrt(add(abs(x0),0.5))", std::nullopt},
      {"ij->ij", {{9, 300}}, "tanh(x0)", std::nullopt},
      {"ij->ij", {{9, 300}}, "silu(x0)", std::nullopt},
      {"ij->ij", {{9, 300}}, "sigmoid(x0)", std::nullopt},
      {"ij->ij", {{9, 300}}, "relu(neg(x0))", std::nullopt},
      {"ij,ij->ij", {{9, 300}, {9, 300}}, "min(x0,x1)", std::nullopt},
  };
  for (const Case& c : cases) {
    const std::string label = std::string(c.subscripts) + " " + c.join;
    GraphBuilder gb(DType::f64);
    std::vector<NodeId> args;
    TensorMap in;
    std::vector<std::vector<float>> as_float;
    for (std::size_t i = 0; i < c.shapes.size(); ++i) {
      std::string name = "x" + std::to_string(i);
      args.push_back(gb.input(name, c.shapes[i]));
      Tensor t = random_tensor(c.shapes[i], DType::f64, 10 + i);
      for (double& v : t.data) v = static_cast<double>(static_cast<float>(v));  // the float kernel's inputs exactly
      as_float.emplace_back(t.data.begin(), t.data.end());
      in.emplace(name, std::move(t));
    }
    gb.output(gb.einsum(c.subscripts, args, c.join, c.agg), "out");
    const TensorMap ref = evaluate_reference(gb.build(), in);
    const Tensor& want = ref.at("out");
    Einsum e = Einsum::from_subscripts(c.subscripts, c.shapes, ScalarOp::parse(c.join), c.agg);
    ASSERT_EQ(cpu::kernel_path(e), cpu::KernelPath::generic) << label;
    std::vector<const float*> ops;
    for (const auto& v : as_float) ops.push_back(v.data());
    std::vector<float> out(want.data.size(), -7.0f);
    cpu::Scratch<float> scratch;
    cpu::einsum_block<float>(e, ops, out.data(), scratch);
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], want.data[i], 2e-5 * (1 + std::fabs(want.data[i]))) << label << " at " << i;
  }
}

}  // namespace
}  // namespace tessel::runtime
