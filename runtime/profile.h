#pragma once
// Kernel profiling: the time of every distinct compute block of a task graph,
// measured through the CPU executor's own kernels — as FlexFlow-style simulators measure
// each operator once on the real device instead of predicting it from a roofline.
//
// A kernel is a (graph node, block shape) pair: every compute task of that node with a
// block of that shape runs the same code on the same amount of data. Each distinct kernel
// is run on all N workers at once (pinned as the executor pins them, each on its own
// operands), repeatedly for at least `seconds_per_kernel`, and its seconds per call are
// kept. As with calibration, measuring happens in rounds (every kernel once per round)
// and each round's figures are kept, so that a caller can interleave rounds with its
// own timed runs and pair each run with the profile taken right before it.
//
// What a profile covers: the kernel call itself, including the block's setup (the
// einsum of the block shape, operand permutation for GEMMs, the generic loop's
// bookkeeping). What it does not: the executor's per-task scheduling overhead (the
// calibration's task_overhead_s) and touches and moves (the machine model times them).
//
// Every kernel is timed twice per round: hot, called again and again on the same
// operands (they sit in the core's caches), and cold, each call right after the worker
// has written `evict_bytes` of other memory (so that the kernel's operands and output
// come from farther out, and the code it runs has been pushed out of the per-core
// cache). In a task graph a kernel meets something in between: the simulator's cache
// model (SimOptions::task_seconds_cold) decides from what each worker touched last how
// much of a task's data is still in its cache.

#include <cstdint>
#include <memory>
#include <vector>

#include "core/graph.h"
#include "core/task_graph.h"

namespace tessel::runtime {

struct KernelProfileOptions {
  int devices = 2;                   // workers running each kernel at once
  double seconds_per_kernel = 0.002;  // minimum measuring time per kernel and round (hot; cold: half)
  std::int64_t evict_bytes = 0;       // written between cold calls; 0: twice the per-core cache
  bool cold = true;                   // false: no cold calls (task_seconds_cold then gives the hot times)
};

class KernelProfiler {
 public:
  // The compute tasks of `tg`, lowered from `g`; both must outlive the profiler.
  KernelProfiler(const Graph& g, const TaskGraph& tg, const KernelProfileOptions& options);
  ~KernelProfiler();
  KernelProfiler(const KernelProfiler&) = delete;
  KernelProfiler& operator=(const KernelProfiler&) = delete;

  void round();  // measures every distinct kernel once
  [[nodiscard]] int rounds() const;
  [[nodiscard]] std::size_t kernels() const;  // distinct kernels of the task graph
  // Per task: its kernel's seconds per call in round `round` (0-based) for compute
  // tasks, -1 for every other task. An error for a round not measured.
  [[nodiscard]] std::vector<double> task_seconds(int round) const;
  // The same for the cold calls, never below the hot figure.
  [[nodiscard]] std::vector<double> task_seconds_cold(int round) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tessel::runtime
